#!/usr/bin/env python
"""The seed examples of thunder issues 463/262, before and after ``metatrace.enable()``.

Runs the codegen (reusing the cache when current), then:

1. jits ``a[:, :, :i]`` and ``a[:, :, 1:i:2]`` with ``cache="symbolic values"`` on an (8, 16, 4)
   tensor and prints, for stock thunder and for metatrace: the slice line of the first
   computation trace with what produces its output sizes, the strict checker's verdict, and
   whether the results equal eager for i = 2, then 3;
2. jits seed 000's ``if flag > 5`` function and calls it with 6, 7, 0: the results against eager,
   the number of compiles, and (with metatrace) the guards of each cache entry.
"""

import warnings

warnings.filterwarnings("ignore", message="transformer_engine module not found")

import torch  # noqa: E402
import thunder  # noqa: E402

import metatrace  # noqa: E402
from metatrace import cache  # noqa: E402
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
    print("===== metatrace.enable() =====")
    with metatrace.enable():
        for label, fn in examples:
            show(label, fn, a)
        flag_example()


if __name__ == "__main__":
    main()
