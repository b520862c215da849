"""Gradients of thunder's opinfo samples through ``thunder.jit``, compared with eager PyTorch.

Not a test module. As in thunder's own ``test_grad`` (``test_vjp_correctness``), every sample of
an op with ``supports_grad`` is generated with ``requires_grad=True`` tensors (CPU, float32);
the jitted function's forward results and its gradients for random cotangents are compared with
the same computation in eager PyTorch.

    result = run_grad_case(op, sample, cache="symbolic values")          # a fresh jitted function
    results = run_grad_shared(op, samples, cache="symbolic values")      # one function, all samples
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator

import torch
import torch.utils._pytree as pytree
from torch.testing import assert_close

import thunder
import thunder.core.dtypes as dtypes
from opinfo_harness import DEVICE, CaseResult, _as_flat_function, _describe, is_known_failure, is_random
from thunder.tests.opinfos import OpInfo, SampleInput, opinfos, tensor_creation_ops

TOLERANCE = 1e-4  # float32, generous: thunder's own grad tests use 1e-5 relative in float64


def _differentiable_in_thunder(op: OpInfo) -> bool:
    """thunder's own criterion (``thunder.tests.test_grad``'s supported op list, which needs the
    ``fdm`` package to import): a traced sample's every bound symbol has a VJP rule."""
    from thunder.core.transforms import check_bsym_for_vjp, trace_interpreter_skip_list

    try:
        for sample in op.sample_inputs(DEVICE, dtypes.float32, requires_grad=True):
            trace = thunder.trace()(op.op, *sample.args, **sample.kwargs)
            if all(b.sym.id in trace_interpreter_skip_list for b in trace.bound_symbols):
                continue
            return all(check_bsym_for_vjp(b) for b in trace.bound_symbols)
    except Exception:
        return False
    return False


def grad_ops() -> list[OpInfo]:
    """Ops with a torch reference, float32, non-random results, that support grad: marked
    ``supports_grad`` or differentiable by thunder's VJP rules (as thunder's test_grad picks)."""
    ops = []
    for op in opinfos:
        if op.torch_reference is None or dtypes.float32 not in op.dtypes() or is_random(op):
            continue
        if op in tensor_creation_ops:
            continue
        if op.supports_grad or _differentiable_in_thunder(op):
            ops.append(op)
    return sorted(ops, key=lambda op: op.name)


def iter_grad_samples(op: OpInfo, max_samples: int) -> list[SampleInput]:
    torch.manual_seed(0)
    samples = []
    try:
        for sample in op.sample_inputs(DEVICE, dtypes.float32, requires_grad=True):
            samples.append(sample)
            if len(samples) >= max_samples:
                break
    except Exception:
        return samples  # a generator failing midway: use what it gave
    return samples


def _fresh_copy(x):
    """Independent leaf copies of every tensor (samples may hold views of a leaf, which
    ``copy.deepcopy`` refuses), keeping ``requires_grad``."""

    def copy_leaf(t):
        if isinstance(t, torch.Tensor):
            return t.detach().clone().requires_grad_(t.requires_grad)
        return copy.deepcopy(t)

    return pytree.tree_map(copy_leaf, x)


def _differentiable(x) -> list[torch.Tensor]:
    return [t for t in pytree.tree_leaves(x) if isinstance(t, torch.Tensor) and t.requires_grad and t.grad_fn is not None]


def _grad_inputs(inputs) -> list[torch.Tensor]:
    return [t for t in pytree.tree_leaves(inputs) if isinstance(t, torch.Tensor) and t.requires_grad]


def _run(fn: Callable, inputs, kwargs) -> tuple:
    """(outputs, gradients of the inputs for seeded random cotangents)."""
    out = fn(*inputs, **kwargs)
    outs = _differentiable(out)
    leaves = _grad_inputs((inputs, kwargs))
    if not outs or not leaves:
        return out, []
    torch.manual_seed(1)
    cotangents = [torch.randn_like(o) for o in outs]
    grads = torch.autograd.grad(outs, leaves, cotangents, allow_unused=True)
    return out, [torch.zeros_like(x) if g is None else g for x, g in zip(leaves, grads)]


def _compare(actual, expected) -> None:
    assert_close(actual, expected, atol=TOLERANCE, rtol=TOLERANCE, equal_nan=True)


def _case(op: OpInfo, reference: Callable, jfn: Callable, args, kwargs, ref_args, ref_kwargs) -> CaseResult:
    try:
        actual = _run(jfn, args, kwargs)
    except Exception as e:
        return CaseResult(op.name, "thunder_error", _describe(e), jfn, is_known_failure(op))
    try:
        expected = _run(reference, ref_args, ref_kwargs)
    except Exception as e:
        return CaseResult(op.name, "reference_error", _describe(e), jfn, is_known_failure(op))
    try:
        _compare(actual, expected)
    except Exception as e:
        return CaseResult(op.name, "mismatch", _describe(e), jfn, is_known_failure(op))
    return CaseResult(op.name, "ok", None, jfn, is_known_failure(op))


def run_grad_case(op: OpInfo, sample: SampleInput, cache: str) -> CaseResult:
    """One sample through a fresh ``thunder.jit`` function; numbers become its inputs."""
    args, kwargs = _fresh_copy((sample.args, sample.kwargs))
    ref_args, ref_kwargs = _fresh_copy((sample.args, sample.kwargs))
    fn, inputs = _as_flat_function(op.op, args, kwargs)
    reference, ref_inputs = _as_flat_function(op.torch_reference, ref_args, ref_kwargs)
    try:
        jfn = thunder.jit(fn, cache=cache)
    except Exception as e:
        return CaseResult(op.name, "thunder_error", _describe(e), None, is_known_failure(op))
    return _case(op, reference, jfn, inputs, {}, ref_inputs, {})


def run_grad_shared(op: OpInfo, samples: list[SampleInput], cache: str) -> Iterator[CaseResult]:
    """All samples through ONE jitted function, in order (a later one may reuse an entry)."""

    def call_op(*args, **kwargs):
        return op.op(*args, **kwargs)

    jfn = thunder.jit(call_op, cache=cache)
    for sample in samples:
        args, kwargs = _fresh_copy((sample.args, sample.kwargs))
        ref_args, ref_kwargs = _fresh_copy((sample.args, sample.kwargs))
        yield _case(op, op.torch_reference, jfn, args, kwargs, ref_args, ref_kwargs)
