"""Backward traces under symbolic values (issue 4's examples).

The slice rule's pad widths are computed from symbols the backward receives (the rewritten
``_slice_prim_grad`` keeps them symbolic), so changing ``i`` within the entry's guards reuses the
entry; a reduction axis is a constant for the executors, so a changed ``d`` misses the cache
instead of crashing. Every trace of every entry passes the strict checker.
"""

from __future__ import annotations

import pytest
import torch

import thunder

import metatrace
from metatrace.checker import check_trace


def _slice_sum(a, i):
    return (a[:, :, :i] * 2).sum()


def _slice_sum_dim(a, i, d):
    return (a[:, :, :i] * 2).sum(d)


def all_traces(jf) -> list:
    return [*thunder.last_prologue_traces(jf), *thunder.last_traces(jf), *thunder.last_backward_traces(jf)]


def _grads_match(jf, fn, args) -> None:
    a = torch.randn(8, 16, 4, requires_grad=True)
    b = a.detach().clone().requires_grad_(True)
    out, expected = jf(a, *args), fn(b, *args)
    torch.manual_seed(0)
    cotangent = torch.randn_like(expected)
    out.backward(cotangent)
    expected.backward(cotangent)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(a.grad, b.grad)
    for trace in all_traces(jf):
        check_trace(trace)


def test_slice_gradients_reuse_one_entry_across_i(enabled):
    jf = thunder.jit(_slice_sum, cache="symbolic values")
    _grads_match(jf, _slice_sum, (2,))
    _grads_match(jf, _slice_sum, (3,))
    # i = 2 and 3 share the entry: the pad width a.shape[2] - i is computed in the backward.
    assert thunder.cache_misses(jf) == 1 and thunder.cache_hits(jf) == 1
    backward = str(thunder.last_backward_traces(jf)[-1])
    assert "(0, 2, 0)" not in backward and "(0, 1, 0)" not in backward
    for i in (4, 1, 3):
        _grads_match(jf, _slice_sum, (i,))
    # i == a.shape[2] (no slice) and i == 1 (a broadcastable size) are other entries.
    assert thunder.cache_misses(jf) <= 3


def test_reduction_axis_is_static_and_a_new_axis_misses(enabled):
    jf = thunder.jit(_slice_sum_dim, cache="symbolic values")
    for i, d in ((2, 1), (3, 2), (4, 0), (1, 1), (3, 1)):
        _grads_match(jf, _slice_sum_dim, (i, d))
    (first, *_) = metatrace.explain(jf)
    assert "d == 1" in " ".join(first.guards)
    assert thunder.cache_hits(jf) >= 1  # (3, 1) reuses (2, 1)'s entry


def test_grad_transform_guards_are_explained(enabled):
    jf = thunder.jit(_slice_sum, cache="symbolic values")
    jf(torch.randn(8, 16, 4, requires_grad=True), 2).backward()
    (entry,) = metatrace.explain(jf)
    grad_guards = [g for g in entry.guards if "grad transform" in g]
    assert grad_guards and not any("pinned" in g for g in grad_guards)


def test_stock_thunder_reuses_a_stale_backward():
    """The issue's first failure, on stock thunder: a reused backward built for other sizes."""
    assert not metatrace.is_enabled()
    jf = thunder.jit(_slice_sum, cache="symbolic values")
    jf(torch.randn(8, 16, 4, requires_grad=True), 2).backward()
    with pytest.raises(RuntimeError, match="invalid gradient"):
        jf(torch.randn(8, 16, 4, requires_grad=True), 3).backward()
