"""A tensor written in place whose old value the backward reads, under a fusion executor
(``torch_compile_ex``): the whole forward is one region that defines the tensor and writes it, so
the clone the backward needs is made in the joint trace, before fusion
(``metatrace.grad.saved_values``), and rematerialization never recomputes a write inside the
backward's region (``metatrace.passes.rematerialized_writes``). Without either, ``t``'s gradient
below was half of eager's, silently.
"""

from __future__ import annotations

import pytest
import torch

import thunder
from thunder.executors.torch_compile import torch_compile_ex

import inplace_matrix


def _divided_target(x, w, t):
    target = (x * 2).detach()
    target.div_(t)
    return ((x * w - target) ** 2).sum()


def _scaled_buffer(x, w, t):
    buf = x.new_ones(x.shape)
    buf.mul_(t)
    return (buf * x * w).sum() + buf.sum()


def _lerped_buffer(x, w, t):
    buf = (x * 3).detach()
    buf.lerp_(x * w, t)
    return (buf * buf).sum()


FORMS = [_divided_target, _scaled_buffer, _lerped_buffer]


def _grads(fn, n):
    g = torch.Generator().manual_seed(n)
    x = torch.randn(n, 3, generator=g)
    w = torch.randn(3, generator=g).requires_grad_()
    t = torch.tensor(2.0).requires_grad_()
    loss = fn(x, w, t)
    loss.backward()
    return loss.detach(), w.grad, t.grad


@pytest.mark.parametrize("fn", FORMS, ids=lambda f: f.__name__.strip("_"))
def test_gradients_equal_eager_under_torch_compile_ex(enabled, fn):
    jfn = thunder.jit(fn, executors=[torch_compile_ex], cache="symbolic values")
    for n in (4, 1, 6):
        torch.testing.assert_close(_grads(jfn, n), _grads(fn, n))


# torch.compile's inductor returns an input for ``zeros + s`` (plain torch.compile too), so a region
# that wrote that sum into a fresh buffer returned the caller's ``s`` itself; the write runs
# outside torch.compile regions (metatrace.passes.fusion_regions).
def _accumulate_into_zeros(x, s):
    acc = torch.zeros_like(x)
    acc += s
    return acc


def _scale_ones(x, s):
    out = x.new_ones(x.shape)
    out.mul_(s)
    return out


@pytest.mark.parametrize("fn", [_accumulate_into_zeros, _scale_ones], ids=lambda f: f.__name__.strip("_"))
def test_a_fresh_buffer_written_from_an_argument_is_not_the_argument(enabled, fn):
    jfn = thunder.jit(fn, executors=[torch_compile_ex], cache="symbolic values")
    x, s = torch.randn(4, 3), torch.randn(4, 3, requires_grad=True)
    out = jfn(x, s)
    assert out.data_ptr() != s.data_ptr()


@pytest.mark.parametrize("fn", [_accumulate_into_zeros, _scale_ones], ids=lambda f: f.__name__.strip("_"))
def test_a_fresh_buffer_written_under_no_grad_does_not_require_grad(enabled, fn):
    jfn = thunder.jit(fn, executors=[torch_compile_ex], cache="symbolic values")
    with torch.no_grad():
        out = jfn(torch.randn(4, 3), torch.randn(4, 3, requires_grad=True))
    assert not out.requires_grad


# A sample of the in-place matrix (tests/inplace_matrix.py) under torch_compile_ex: writes whose
# regions failed there (a scatter through a transposed view read back zeros beside a second
# buffer; ``+=`` returned the source, and a view's base came back as fresh zeros), on the
# destinations that failed and their neighbours. (The whole matrix under torch_compile_ex, 27
# writes, costs about 15 minutes of CPU: run it with tests/inplace_matrix.cells by hand.)
FUSED_WRITES = ("scatter_add_", "iadd")
FUSED_DESTINATIONS = ("zeros", "ones", "view", "t")


@pytest.mark.parametrize("write", FUSED_WRITES)
def test_the_inplace_matrix_sample_follows_eager_under_torch_compile_ex(enabled, write):
    jit = lambda fn: thunder.jit(fn, executors=[torch_compile_ex], cache="symbolic values")
    found = inplace_matrix.cells(write, jit, modes=("grad", "no_grad"), destinations=FUSED_DESTINATIONS)
    assert {cell: d for cell, d in found.items() if d} == {}
