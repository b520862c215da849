"""Training steps reuse one cache entry across sizes (issue 8).

The grad transform concretizes numbers in autograd rules, in executors' own metas and in number
ops that its dead-code elimination later drops. Each is projected to the inputs, so a training
step compiles once for every size on the same side of its guards, and its gradients equal eager.
A value read from tensor data is never decided: it raises ``DataDependentError``.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import thunder

import metatrace
from metatrace.checker import check_trace
from metatrace.guards.collect import DataDependentError

ROPE_CACHE = torch.randn(64, 4)


def _linear(x, w):
    return F.linear(x, w)


def _rope(q):
    return q * ROPE_CACHE[: q.shape[0]]


def _max_pool(x):
    return F.max_pool2d(x, 2)


def _linear_inputs(n):
    return (torch.randn(n, 4), torch.randn(3, 4, requires_grad=True))  # only the weight needs grad


def _rope_inputs(n):
    return (torch.randn(n, 4, requires_grad=True),)


def _pool_inputs(n):
    return (torch.randn(1, 3, n, n, requires_grad=True),)


CASES = {
    "linear_weight_grad": (_linear, _linear_inputs, (2, 3, 5, 8)),
    "rope_slice_of_buffer": (_rope, _rope_inputs, (3, 5, 7, 12)),
    "max_pool2d": (_max_pool, _pool_inputs, (8, 10, 12, 16)),
}


def _step(jf, fn, inputs):
    ours = [t.detach().clone().requires_grad_(t.requires_grad) for t in inputs]
    eager = [t.detach().clone().requires_grad_(t.requires_grad) for t in inputs]
    out, expected = jf(*ours), fn(*eager)
    torch.testing.assert_close(out, expected)
    out.sum().backward()
    expected.sum().backward()
    for a, b in zip(ours, eager):
        if b.requires_grad:
            torch.testing.assert_close(a.grad, b.grad)


@pytest.mark.parametrize("name", sorted(CASES))
def test_training_step_compiles_once_for_all_sizes(enabled, name):
    fn, make, sizes = CASES[name]
    jf = thunder.jit(fn, cache="symbolic values")
    for n in sizes:
        torch.manual_seed(n)
        _step(jf, fn, make(n))
    assert thunder.cache_misses(jf) == 1


@pytest.mark.parametrize("name", sorted(CASES))
def test_training_step_guards_pin_nothing(enabled, name):
    fn, make, sizes = CASES[name]
    jf = thunder.jit(fn, cache="symbolic values")
    _step(jf, fn, make(sizes[0]))
    (entry,) = metatrace.explain(jf)
    assert not [g for g in entry.guards if "pinned" in g]


@pytest.mark.parametrize("name", sorted(CASES))
def test_training_step_traces_define_every_symbol(enabled, name):
    fn, make, sizes = CASES[name]
    jf = thunder.jit(fn, cache="symbolic values")
    _step(jf, fn, make(sizes[0]))
    for trace in [*thunder.last_traces(jf), *thunder.last_backward_traces(jf)]:
        check_trace(trace)


def test_odd_pool_size_is_another_entry(enabled):
    """max_pool2d's backward rounds (x - 2) // 2: the entry's guard keeps the parity, so an odd
    size compiles again rather than reusing a backward built for even ones."""
    jf = thunder.jit(_max_pool, cache="symbolic values")
    for n in (8, 9, 10, 11):
        _step(jf, _max_pool, _pool_inputs(n))
    assert thunder.cache_misses(jf) == 2


def _branch_on_item(a):
    return a * 2 if a.sum().item() > 0 else a * 3


def test_branch_on_tensor_data_raises(enabled):
    jf = thunder.jit(_branch_on_item, cache="symbolic values")
    with pytest.raises(Exception, match="read from tensor data") as info:
        jf(torch.ones(2))
    # the error names the user's line, not thunder's plumbing
    assert "_branch_on_item" in str(info.value)


def test_an_undecidable_size_from_tensor_data_raises(enabled):
    # (``a[:n.item()]`` runs: tests/metas/test_data_dependent_ops.py); reshape checks that the item
    # divides the element count, which no trace-time value decides
    jf = thunder.jit(lambda a, n: a.reshape(n.item(), -1), cache="symbolic values")
    with pytest.raises(Exception, match="read from tensor data"):
        jf(torch.arange(6.0), torch.tensor(3))


def test_computing_with_tensor_data_is_not_a_decision(enabled):
    """``a * t.item()`` decides nothing: it traces, and a new value reuses the entry."""
    fn = lambda a, t: a * t.item()  # noqa: E731
    jf = thunder.jit(fn, cache="symbolic values")
    for v in (2.0, 3.0):
        t = torch.tensor(v)
        torch.testing.assert_close(jf(torch.ones(3), t), fn(torch.ones(3), t))
    assert thunder.cache_misses(jf) == 1


def test_data_dependent_error_is_a_runtime_error():
    assert issubclass(DataDependentError, RuntimeError)
