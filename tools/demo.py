#!/usr/bin/env python
"""The seed examples of thunder issues 463/262, before and after ``metatrace.enable()``.

Runs the codegen (reusing the cache when current), then:

1. jits ``a[:, :, :i]`` and ``a[:, :, 1:i:2]`` with ``cache="symbolic values"`` on an (8, 16, 4)
   tensor and prints, for stock thunder and for metatrace: the slice line of the first
   computation trace with what produces its output sizes, the strict checker's verdict, and
   whether the results equal eager for i = 2, then 3;
2. jits seed 000's ``if flag > 5`` function and calls it with 6, 7, 0: the results against eager,
   the number of compiles, and (with metatrace) the guards of each cache entry;
3. a training step, ``F.linear(x, w)`` with only ``w`` requiring grad, over batch sizes 2, 3, 5, 8:
   gradients against eager and compiles (stock thunder under constant values, as it would be
   used for training, against metatrace under symbolic values), with the entry's guards.
"""

import warnings

warnings.filterwarnings("ignore", message="transformer_engine module not found")

import torch  # noqa: E402
import thunder  # noqa: E402

import metatrace  # noqa: E402
from metatrace.codegen import cache  # noqa: E402
from metatrace.checker import find_orphans  # noqa: E402


def show(label: str, fn, a: torch.Tensor) -> None:
    jf = thunder.jit(fn, cache="symbolic values")
    results = []
    for i in (2, 3):
        try:
            results.append(torch.equal(jf(a, i), fn(a, i)))
        except Exception as e:  # stock thunder may fail on the reused entry: show it
            results.append(f"{type(e).__name__}: {e}"[:120])
        if i == 2:
            first = thunder.last_traces(jf)[0]
    print(f"--- {label} ---")
    lines = [ln for ln in str(first).splitlines() if "prims.slice_prim" in ln or "prims.add" in ln
             or "prims.sub" in ln or "prims.py_floordiv" in ln]
    print("\n".join(ln.strip() for ln in lines))
    orphans = find_orphans(first)
    print("strict checker:", "passes" if not orphans else f"{len(orphans)} undefined size symbol(s): "
          + ", ".join(o.symbol for o in orphans))
    print(f"equal to eager for i=2, i=3 (one jitted function): {results}; "
          f"compiles: {thunder.cache_misses(jf)}\n")


def flag_example() -> None:
    def foo(flag):
        if flag > 5:
            return torch.ones(1)
        return torch.zeros(1)

    jf = thunder.jit(foo, cache="symbolic values")
    results = [bool(torch.equal(jf(v), foo(v))) for v in (6, 7, 0)]
    print(f"--- if flag > 5 (seed 000), calls 6, 7, 0 ---\nequal to eager: {results}; compiles: {thunder.cache_misses(jf)}")
    if metatrace.is_enabled():
        for entry in metatrace.explain(jf):
            print("\n".join(line for line in str(entry).splitlines() if "flag" in line or "entry" in line))
    print()


def training_example(cache_option: str) -> None:
    import torch.nn.functional as F

    def linear(x, w):
        return F.linear(x, w)

    jf = thunder.jit(linear, cache=cache_option)
    same = []
    for n in (2, 3, 5, 8):
        x, w = torch.randn(n, 4), torch.randn(3, 4, requires_grad=True)
        w_eager = w.detach().clone().requires_grad_(True)
        jf(x, w).sum().backward()
        F.linear(x, w_eager).sum().backward()
        same.append(bool(torch.allclose(w.grad, w_eager.grad)))
    print(f"--- training step F.linear(x, w), w requires grad, batch 2, 3, 5, 8 ({cache_option}) ---")
    print(f"weight gradients equal to eager: {same}; compiles: {thunder.cache_misses(jf)}")
    if metatrace.is_enabled():
        for entry in metatrace.explain(jf):
            print("\n".join(line for line in str(entry).splitlines() if "shape" in line or "entry" in line))
    print()


def main() -> None:
    result = cache.ensure()
    statuses = [e["status"] for e in result.manifest["prims"].values()]
    print(f"codegen: {result.directory} ({result.action}); {statuses.count('ported')} of {len(statuses)} prims ported\n")
    a = torch.randn(8, 16, 4)
    examples = [("a[:, :, :i]", lambda a, i: a[:, :, :i]), ("a[:, :, 1:i:2]", lambda a, i: a[:, :, 1:i:2])]
    print("===== stock thunder =====")
    for label, fn in examples:
        show(label, fn, a)
    flag_example()
    training_example("constant values")
    print("===== metatrace.enable() =====")
    with metatrace.enable():
        for label, fn in examples:
            show(label, fn, a)
        flag_example()
        training_example("symbolic values")


if __name__ == "__main__":
    main()
