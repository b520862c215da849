"""A reusable sweep over thunder's opinfos (``thunder.tests.opinfos``), CPU only.

Not a test module: tests import it to run every opinfo sample through
``thunder.jit`` (under a chosen cache mode) and compare with the op's torch
reference.  Under ``cache="symbolic values"`` every tensor and every Python
int/float of a sample is passed as a real positional input of the jitted
function, so the numbers become ``IntegerProxy``/``FloatProxy`` symbols.

    for op, sample in iter_cases():
        res = run_case(op, sample, cache="symbolic values")
        res.status                      # "ok", "thunder_error", "mismatch", "reference_error"
        thunder.last_traces(res.jfn)[0] # first computation trace (when tracing got that far)
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import torch
from torch.testing import assert_close

import thunder
import thunder.core.dtypes as dtypes
from thunder.tests.framework import custom_comparator
from thunder.tests.opinfos import OpInfo, SampleInput, opinfos

DEVICE = "cpu"

# Stock thunder on 2 CPU cores takes ~0.03-0.05 s per sample and cache mode.  The
# 231 opinfos with a torch reference have 4161 samples in all (~4 min per mode);
# 5 per op gives 1101 samples, under a minute per mode.
DEFAULT_MAX_SAMPLES_PER_OP = 5
SAMPLES_ENV_VAR = "METATRACE_SWEEP_SAMPLES"  # an int; 0 or "all" means no cap

STATUSES = ("ok", "thunder_error", "mismatch", "reference_error")

# The name of thunder's consistency test: its per-op directives (expected
# failures, custom comparators) are keyed by it.
_CONSISTENCY_TEST = "test_core_vs_torch_consistency"
_TORCH_EXECUTOR = SimpleNamespace(name="torch")  # all that DecorateInfo.is_active reads

# Ops whose values are random (or uninitialized): only metadata is compared.
# Matched against "_"-separated name tokens, so e.g. "normalize" is not random.
_RANDOM_TOKENS = re.compile(
    r"(^|_)(rand|randn|randint|rrelu|dropout|bernoulli|multinomial|normal|uniform|empty)(_|$)"
)

# Generous tolerances per result dtype (values that pass thunder's own comparator pass too).
_TOLERANCES = {
    torch.float16: 1e-2,
    torch.bfloat16: 2e-2,
    torch.float32: 1e-4,
    torch.complex64: 1e-4,
    torch.float64: 1e-7,
    torch.complex128: 1e-7,
}


@dataclass
class CaseResult:
    """The outcome of one (opinfo, sample) under one cache mode."""

    op_name: str
    status: str  # one of STATUSES
    error: str | None = None  # "ExceptionType: message" (truncated) when status != "ok"
    jfn: Callable | None = None  # the thunder.jit function; None only if thunder.jit itself raised
    known_failure: bool = False  # thunder's own opinfo marks this op xfail/skip on CPU


def default_max_samples() -> int:
    """$METATRACE_SWEEP_SAMPLES ("all" or 0: no cap), else DEFAULT_MAX_SAMPLES_PER_OP."""
    value = os.environ.get(SAMPLES_ENV_VAR, "").strip().lower()
    if not value:
        return DEFAULT_MAX_SAMPLES_PER_OP
    return 0 if value == "all" else int(value)


def pick_dtype(op: OpInfo) -> dtypes.dtype:
    """float32 (or complex64) where the op supports it, else its first supported dtype by name."""
    supported = op.dtypes()
    for preferred in (dtypes.float32, dtypes.complex64):
        if preferred in supported:
            return preferred
    return sorted(supported, key=str)[0]


def is_random(op: OpInfo) -> bool:
    return _RANDOM_TOKENS.search(op.name) is not None


def _active_decorators(op: OpInfo) -> list:
    dtype = pick_dtype(op)
    return op.test_decorators(_CONSISTENCY_TEST, _TORCH_EXECUTOR, DEVICE, dtype)


def is_known_failure(op: OpInfo) -> bool:
    """Whether thunder's opinfo marks its CPU torch-consistency test as xfail/skip."""
    for d in _active_decorators(op):
        name = getattr(d, "name", None)  # pytest MarkDecorator
        if name in ("xfail", "skip") or (name == "skipif" and d.args and d.args[0]):
            return True
    return False


_DEFAULT_CASES: dict[int, tuple[list, dict]] = {}  # samples per op -> (cases, skipped)


def default_cases() -> tuple[list[tuple[OpInfo, SampleInput]], dict[str, str]]:
    """``(list(iter_cases()), its skipped ops)``, generated once per process: the sweeps of
    several test modules use the same samples (seeded per op, so equal to a new generation), and
    every run deep-copies a sample's arguments, so sharing them changes nothing."""
    n = default_max_samples()
    if n not in _DEFAULT_CASES:
        skipped: dict[str, str] = {}
        _DEFAULT_CASES[n] = (list(iter_cases(n, skipped=skipped)), skipped)
    return _DEFAULT_CASES[n]


def iter_cases(
    max_samples_per_op: int | None = None,
    *,
    names: set[str] | None = None,
    skipped: dict[str, str] | None = None,
) -> Iterator[tuple[OpInfo, SampleInput]]:
    """Yield (opinfo, sample) for every opinfo with a torch reference, sorted by name.

    ``max_samples_per_op`` of None means ``default_max_samples()``, 0 means all
    samples.  ``names`` limits the sweep to those opinfo names.  An op whose sample
    generation raises is skipped; the reason is stored in ``skipped`` (name -> reason)
    if given.  Seeds are reset per op, so the samples are the same on every run.
    Ops whose opinfo lists only CUDA (``_grouped_mm``,
    ``grad_forward_scaled_dot_product_attention``) are kept: they run on CPU.
    """
    if max_samples_per_op is None:
        max_samples_per_op = default_max_samples()
    ops = sorted((op for op in opinfos if op.torch_reference is not None), key=lambda op: op.name)
    for op in ops:
        if names is not None and op.name not in names:
            continue
        try:
            torch.manual_seed(0)
            gen = op.sample_inputs(DEVICE, pick_dtype(op), requires_grad=False)
            samples = []
            for sample in gen:  # generate the whole batch first: a generator may fail midway
                if max_samples_per_op and len(samples) >= max_samples_per_op:
                    break
                samples.append(sample)
        except Exception as e:
            if skipped is not None:
                skipped[op.name] = _describe(e)
            continue
        yield from ((op, s) for s in samples)


def run_case(op: OpInfo, sample: SampleInput, cache: str = "symbolic values") -> CaseResult:
    """Run one sample through ``thunder.jit(fn, cache=cache)`` and compare with torch.

    Never raises for errors in thunder or in the reference: they become the status.
    """
    # Thunder and the reference each get their own copy, so an op that mutates its inputs
    # can neither skew the comparison nor change the sample for a later run_case.
    # deepcopy preserves strides, storage offsets and aliasing between arguments.
    args, kwargs = copy.deepcopy((sample.args, sample.kwargs))
    ref_args, ref_kwargs = copy.deepcopy((sample.args, sample.kwargs))

    fn, inputs = _as_flat_function(op.op, args, kwargs)
    jfn = None
    try:
        jfn = thunder.jit(fn, cache=cache)
        torch.manual_seed(0)
        actual = jfn(*inputs)
    except Exception as e:
        return CaseResult(op.name, "thunder_error", _describe(e), jfn, is_known_failure(op))

    try:
        torch.manual_seed(0)
        expected = op.torch_reference(*ref_args, **ref_kwargs)
    except Exception as e:
        return CaseResult(op.name, "reference_error", _describe(e), jfn, is_known_failure(op))

    try:
        if is_random(op):
            _compare_metadata(actual, expected)
        else:
            _compare_values(op, sample, actual, expected)
    except Exception as e:  # AssertionError, or a TypeError/ValueError from odd results
        return CaseResult(op.name, "mismatch", _describe(e), jfn, is_known_failure(op))
    return CaseResult(op.name, "ok", None, jfn, is_known_failure(op))


def _as_flat_function(op_fn: Callable, args: tuple, kwargs: dict) -> tuple[Callable, list]:
    """Return ``(fn, inputs)`` with ``fn(*inputs) == op_fn(*args, **kwargs)``.

    Tensors and Python ints/floats (not bools) anywhere in the sample's lists, tuples,
    dicts, ``torch.Size``s and slices become the positional ``inputs``; all other
    leaves stay constants: None, bools and strings as literals in the source, other
    objects (dtypes, functions, ...) read from a captured list.  ``fn`` is
    generated as straight-line source (``op(x0, [x1, x2], dim=c[0])``) rather than
    rebuilding with ``tree_unflatten``: the jit interprets every bytecode of ``fn``,
    and interpreting a pytree rebuild costs ~0.5 s per call.  As in thunder's own
    pytree, a ``torch.Size`` is rebuilt as a tuple.
    """
    inputs: list = []
    consts: list = []

    def src(x) -> str:
        if isinstance(x, torch.Tensor) or (type(x) is not bool and isinstance(x, (int, float))):
            inputs.append(x)
            return f"x{len(inputs) - 1}"
        if type(x) is list:
            return "[" + "".join(src(v) + ", " for v in x) + "]"
        if type(x) in (tuple, torch.Size):
            return "(" + "".join(src(v) + ", " for v in x) + ")"
        if type(x) is dict and all(type(k) is str for k in x):
            return "{" + "".join(f"{k!r}: {src(v)}, " for k, v in x.items()) + "}"
        if type(x) is slice:
            return f"slice({src(x.start)}, {src(x.stop)}, {src(x.step)})"
        if x is None or x is Ellipsis or type(x) in (bool, str):
            return repr(x)  # a literal: the jit would proxy a bool read from ``c``
        consts.append(x)
        return f"c[{len(consts) - 1}]"

    call = ", ".join([src(a) for a in args] + ([f"**{src(dict(kwargs))}"] if kwargs else []))
    params = ", ".join(f"x{i}" for i in range(len(inputs)))
    namespace = {"op": op_fn, "c": consts}
    exec(f"def fn({params}):\n    return op({call})\n", namespace)
    return namespace["fn"], inputs


def _tolerance(expected: Any) -> float:
    """The loosest generous tolerance among the floating dtypes of the expected result."""
    tols = [
        _TOLERANCES.get(x.dtype, 0.0)
        for x in torch.utils._pytree.tree_leaves(expected)
        if isinstance(x, torch.Tensor)
    ]
    return max(tols, default=0.0) or _TOLERANCES[torch.float32]  # numbers: float32 tolerance


def _compare_values(op: OpInfo, sample: SampleInput, actual: Any, expected: Any) -> None:
    """Pass if either the generous default or thunder's op-specific comparator passes."""
    if isinstance(expected, str):  # e.g. Tensor.type() with no argument
        assert actual == expected, f"{actual!r} != {expected!r}"
        return
    tol = _tolerance(expected)
    try:
        assert_close(actual, expected, atol=tol, rtol=tol, equal_nan=True)
        return
    except AssertionError:
        custom = (d.comparator for d in _active_decorators(op) if isinstance(d, custom_comparator))
        comp = sample.comp or next(custom, None)
        if comp is None:
            raise
    comp(actual, expected, equal_nan=True)


def _compare_metadata(actual: Any, expected: Any) -> None:
    """For random ops: same structure, and same shape/dtype/device per tensor."""
    a_leaves, a_spec = torch.utils._pytree.tree_flatten(actual)
    e_leaves, e_spec = torch.utils._pytree.tree_flatten(expected)
    assert a_spec == e_spec, f"result structure differs: {a_spec} vs {e_spec}"
    for a, e in zip(a_leaves, e_leaves):
        assert type(a) is type(e), f"result type differs: {type(a)} vs {type(e)}"
        if isinstance(e, torch.Tensor):
            got, want = (a.shape, a.dtype, a.device), (e.shape, e.dtype, e.device)
            assert got == want, f"tensor metadata differs: {got} vs {want}"


def _describe(e: BaseException, limit: int = 500) -> str:
    msg = f"{type(e).__name__}: {e}"
    return msg if len(msg) <= limit else msg[:limit] + "..."


def run_shared(op: OpInfo, samples: list[SampleInput], cache: str) -> list[CaseResult]:
    """All ``samples`` of ``op`` through ONE ``thunder.jit`` function, in order.

    This is how a user reuses a compiled function: a later sample may hit a cache entry traced
    for an earlier one. Its numbers reach the jit as real inputs (nested in lists and tuples as
    the sample has them), so under "symbolic values" they are symbols the prologue must guard.
    """

    def call_op(*args, **kwargs):
        return op.op(*args, **kwargs)

    jfn = thunder.jit(call_op, cache=cache)
    results = []
    for sample in samples:
        args, kwargs = copy.deepcopy((sample.args, sample.kwargs))
        ref_args, ref_kwargs = copy.deepcopy((sample.args, sample.kwargs))
        try:
            torch.manual_seed(0)
            actual = jfn(*args, **kwargs)
        except Exception as e:
            results.append(CaseResult(op.name, "thunder_error", _describe(e), jfn, is_known_failure(op)))
            continue
        try:
            torch.manual_seed(0)
            expected = op.torch_reference(*ref_args, **ref_kwargs)
        except Exception as e:
            results.append(CaseResult(op.name, "reference_error", _describe(e), jfn, is_known_failure(op)))
            continue
        try:
            if is_random(op):
                _compare_metadata(actual, expected)
            else:
                _compare_values(op, sample, actual, expected)
        except Exception as e:
            results.append(CaseResult(op.name, "mismatch", _describe(e), jfn, is_known_failure(op)))
            continue
        results.append(CaseResult(op.name, "ok", None, jfn, is_known_failure(op)))
    return results
