"""The in-place write matrix of issue 51: every destination kind x every in-place write thunder
traces x the source requiring grad or not x the caller's grad mode, each cell compared with eager.

A destination is a tensor the function makes (a factory, a ``new_*`` method, ``empty_like``, a
detached clone), or a view of one (a slice, a row, ``view``, ``t``, ``unsqueeze``); the write
takes its values from a source argument. One jitted function per (write, source requires grad,
grad mode) runs the write on every destination kind at once, each with a source of its own, so
each destination's gradient lands on its own input: the function returns, per destination, the
base and the written tensor, a product with ``x`` (an input that always requires grad) and the
write's value (the destination again in eager: one tensor at two positions).

Per destination kind the cell compares with eager: each returned tensor's ``requires_grad``,
``is_leaf`` and whether ``grad_fn`` is None, the values, and after a backward of a weighted sum of
what requires grad, every input's gradient (None where eager's is None). A call that raises
compares the exception's type (eager's RuntimeError may be metatrace's MetatraceError).
"""

from __future__ import annotations

import ast
import contextlib
from dataclasses import dataclass

import torch

N, M = 4, 3


# each destination kind's shape: its source has it (a write's values need no reshaping)
SHAPES = {"slice": (N - 1, M), "row": (M,), "view": (M, N), "t": (M, N), "unsqueeze": (1, N, M)}


# Sources of the function's statements (make_function): ``{d}`` is the destination, ``{s}`` its
# source, ``{b}`` a view's base. Written as the user writes them (``d[i] = s``, ``d += s``) and
# as straight-line code: thunder's interpreter runs every bytecode of the function, and a loop
# over lambdas in dicts made each compile a third slower with nothing more checked.
DESTINATIONS = {
    "zeros": "torch.zeros(N, M)",
    "ones": "torch.ones(N, M)",
    "full": "torch.full((N, M), 2.0)",
    "empty": "torch.empty(N, M).zero_()",
    "arange": "torch.arange(N * M, dtype=torch.float32).reshape(N, M)",
    "zeros_like": "torch.zeros_like(x)",
    "ones_like": "torch.ones_like(x)",
    "full_like": "torch.full_like(x, 3.0)",
    "empty_like": "torch.empty_like(x).fill_(1.0)",
    "new_zeros": "x.new_zeros(x.shape)",
    "new_ones": "x.new_ones(x.shape)",
    "new_full": "x.new_full(x.shape, 3.0)",
    "new_empty": "x.new_empty(x.shape).zero_()",
    "detached_clone": "x.detach().clone()",
    "slice": "{b}[1:]",
    "row": "{b}[1]",
    "view": "{b}.view(M, N)",
    "t": "{b}.t()",
    "unsqueeze": "{b}.unsqueeze(0)",
}
# the destinations that are views of a base ``torch.zeros(N, M)``
VIEWS = {kind for kind, source in DESTINATIONS.items() if "{b}" in source}

# Positions along dim 0 that every destination has, in reverse: ``[1, 0]``, ``[0]`` for
# ``unsqueeze``'s single row (an index out of range would make eager raise for every kind), and
# the source's rows for them.
_INDEX = "torch.arange(min(2, {d}.shape[0])).flip(0)"
_INDEXED = "{s}[:min(2, {d}.shape[0])]"

WRITES = {
    "item": "{d}[0] = {s}[0]",
    "slice_assign": "{d}[1:] = {s}[1:]",
    "mask_assign": "{d}[{s} > 0] = {s}.sum()",
    "index_assign": f"{{d}}[{_INDEX}] = {_INDEXED}",
    "copy_": "{d}.copy_({s})",
    "index_put_": f"{{d}}.index_put_(({_INDEX},), {_INDEXED})",
    "index_put_accumulate": f"{{d}}.index_put_(({_INDEX},), {_INDEXED}, accumulate=True)",
    "index_copy_": f"{{d}}.index_copy_(0, {_INDEX}, {_INDEXED})",
    "index_add_": f"{{d}}.index_add_(0, {_INDEX}, {_INDEXED})",
    "scatter_": "{d}.scatter_(0, torch.zeros({d}.shape, dtype=torch.long), {s})",
    "scatter_add_": "{d}.scatter_add_(0, torch.zeros({d}.shape, dtype=torch.long), {s})",
    "masked_fill_": "{d}.masked_fill_({s} > 0, {s}.sum())",
    "fill_": "{d}.fill_({s}.sum())",
    "fill_number": "{d}.fill_(2.0)",
    "zero_": "{d}.zero_()",
    "add_": "{d}.add_({s})",
    "sub_": "{d}.sub_({s}, alpha=2)",
    "mul_": "{d}.mul_({s})",
    "div_": "{d}.div_({s}.exp())",
    "addcmul_": "{d}.addcmul_({s}, {s})",
    "addcdiv_": "{d}.addcdiv_({s}, {s}.exp())",
    "iadd": "{d} += {s}",
    "imul": "{d} *= {s}",
    "clamp_": "{d}.clamp_(min={s})",
    "lerp_": "{d}.lerp_({s}, 0.3)",
    "out_add": "torch.add({s}, 1.0, out={d})",
    "out_mul": "torch.mul({s}, {s}, out={d})",
}
MODES = {"grad": contextlib.nullcontext, "no_grad": torch.no_grad, "inference_mode": torch.inference_mode}
# The cells where eager raises (a raise for one destination would hide the others' cells, so every
# write works on every destination kind but here): out= under grad with a source that requires grad.
EAGER_RAISES = {("out_add", True, "grad"), ("out_mul", True, "grad")}


def source(write: str, destinations=tuple(DESTINATIONS)) -> str:
    """The source of :func:`make_function`'s ``fn``: per destination kind ``i``, its base ``b{i}``
    and destination ``d{i}``, the write from ``s{i}``, and the four tensors it returns (base,
    destination, a product with ``x``, and the write's value: what a method or ``out=`` call
    returns, ``d{i}`` itself after a statement). The write's value is the destination in eager,
    one tensor at two positions of the output, which thunder's backward must read from both."""
    lines = [f"def write_{write}(x, {', '.join(f's{i}' for i in range(len(destinations)))}):"]
    statement = not isinstance(ast.parse(WRITES[write].format(d="d", s="s")).body[0], ast.Expr)  # (d[i] = v, d += s)
    for i, kind in enumerate(destinations):
        b, d, s = f"b{i}", f"d{i}", f"s{i}"
        if kind in VIEWS:
            lines.append(f"    {b} = torch.zeros(N, M)")
            lines.append(f"    {d} = {DESTINATIONS[kind].format(b=b)}")
        else:
            lines.append(f"    {b} = {d} = {DESTINATIONS[kind]}")
        write_source = WRITES[write].format(d=d, s=s)
        lines.append(f"    {write_source}" if statement else f"    r{i} = {write_source}")
        if statement:
            lines.append(f"    r{i} = {d}")
    outputs = ", ".join(f"(b{i}, d{i}, (b{i} * x).sum(), r{i})" for i in range(len(destinations)))
    lines.append(f"    return [{outputs}]")
    return "\n".join(lines) + "\n"


PER_DESTINATION = 4  # the tensors fn returns per destination kind (source())


def make_function(write: str, destinations=tuple(DESTINATIONS)):
    """``fn(x, *sources)``: the write on every destination kind, one source each."""
    namespace = {"torch": torch, "N": N, "M": M}
    exec(compile(source(write, destinations), f"<inplace matrix: {write}>", "exec"), namespace)
    return namespace[f"write_{write}"]


@dataclass
class Outcome:
    error: str | None = None
    metadata: list | None = None  # per destination, per returned tensor: (requires_grad, is_leaf, grad_fn is None)
    values: list | None = None
    grads: list | None = None  # per input: its gradient, or None


def inputs(source_requires_grad: bool, destinations, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(N, M, generator=g).requires_grad_(True)
    sources = [torch.randn(*SHAPES.get(kind, (N, M)), generator=g).requires_grad_(source_requires_grad)
               for kind in destinations]
    return x, sources


def run(fn, source_requires_grad: bool, mode: str, destinations) -> Outcome:
    x, sources = inputs(source_requires_grad, destinations)
    try:
        with MODES[mode]():
            outputs = fn(x, *sources)
    except Exception as e:  # the exception is part of the behaviour compared
        return Outcome(error=type(e).__name__)
    flat = [t for group in outputs for t in group]
    outcome = Outcome(
        metadata=[tuple((t.requires_grad, t.is_leaf, t.grad_fn is None) for t in group) for group in outputs],
        values=[t.detach().clone() for t in flat],
    )
    differentiable = [t for t in flat if t.requires_grad]
    if differentiable:
        loss = sum((t * torch.linspace(-1, 2, t.numel()).reshape(t.shape)).sum() for t in differentiable)
        loss.backward()
        outcome.grads = [None if t.grad is None else t.grad.clone() for t in (x, *sources)]
    return outcome


def differences(expected: Outcome, actual: Outcome, destinations=tuple(DESTINATIONS)) -> list[str]:
    """What ``actual`` (thunder) has that ``expected`` (eager) has not, per destination kind."""
    if expected.error or actual.error:
        same = expected.error == actual.error or (expected.error == "RuntimeError" and actual.error == "MetatraceError")
        return [] if same else [f"eager {expected.error or 'ran'}, thunder {actual.error or 'ran'}"]
    found = []
    for i, kind in enumerate(destinations):
        if expected.metadata[i] != actual.metadata[i]:
            found.append(f"{kind}: (requires_grad, is_leaf, grad_fn is None) eager {expected.metadata[i]}, "
                         f"thunder {actual.metadata[i]}")
        for j in range(PER_DESTINATION):
            e, a = expected.values[PER_DESTINATION * i + j], actual.values[PER_DESTINATION * i + j]
            if e.shape != a.shape or not torch.allclose(e, a, rtol=1e-4, atol=1e-5, equal_nan=True):
                found.append(f"{kind}: output {j} values differ")
    if (expected.grads is None) != (actual.grads is None):
        found.append(f"backward: eager {'ran' if expected.grads else 'had nothing to run'}, thunder "
                     f"{'ran' if actual.grads else 'had nothing to run'}")
    elif expected.grads is not None:
        for k, (e, a) in enumerate(zip(expected.grads, actual.grads)):
            name = "x" if k == 0 else f"source of {destinations[k - 1]}"
            if (e is None) != (a is None):
                found.append(f"gradient of {name}: eager {'None' if e is None else 'a tensor'}, "
                             f"thunder {'None' if a is None else 'a tensor'}")
            elif e is not None and not torch.allclose(e, a, rtol=1e-4, atol=1e-5):
                found.append(f"gradient of {name} differs: eager {e.flatten().tolist()}, thunder {a.flatten().tolist()}")
    return found


def cells(write: str, jit, modes=tuple(MODES), destinations=tuple(DESTINATIONS),
          sources_require_grad=(True, False)) -> dict[tuple, list[str]]:
    """(source requires grad, mode) -> differences, for one write on ``destinations``, each of
    ``modes`` and ``sources_require_grad``; ``jit`` makes the compiled function, called for every cell in turn (its cache
    serves them). Eager raising where :data:`EAGER_RAISES` does not say so is a difference too
    (the matrix's own defect: it would compare nothing)."""
    fn = make_function(write, destinations)
    jitted = jit(fn)
    found = {}
    for source_requires_grad in sources_require_grad:
        for mode in modes:
            expected = run(fn, source_requires_grad, mode, destinations)
            actual = run(jitted, source_requires_grad, mode, destinations)
            found[(source_requires_grad, mode)] = differences(expected, actual, destinations)
            if (expected.error is not None) != ((write, source_requires_grad, mode) in EAGER_RAISES):
                found[(source_requires_grad, mode)].append(f"the matrix: eager {expected.error or 'ran'}")
    return found


def cell_count() -> int:
    return len(DESTINATIONS) * len(WRITES) * 2 * len(MODES)

