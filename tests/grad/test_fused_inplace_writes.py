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
