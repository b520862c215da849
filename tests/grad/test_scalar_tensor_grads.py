"""Gradients through a 0-d intermediate tensor that meets a tensor of another shape
(``metatrace.grad.scalar_tensor_grads``): equal to eager's for every elementwise op, both when the
other tensor's size equals a size of the 0-d tensor's source (where stock thunder's gradient is
silently wrong) and when it does not (where stock thunder fails)."""

from __future__ import annotations

import pytest
import thunder
import torch

import metatrace

OPS = {
    "mul": lambda a, s: a * s,
    "mul, 0-d first": lambda a, s: s * a,
    "add": lambda a, s: a + s,
    "sub": lambda a, s: s - a,
    "div": lambda a, s: a / s,
    "div, 0-d numerator": lambda a, s: s / a,
    "pow": lambda a, s: a.abs() ** s,
    "pow, 0-d base": lambda a, s: s.abs() ** a,
    "where": lambda a, s: torch.where(a > 0, a, s),
    "maximum": lambda a, s: torch.maximum(a, s),
    "atan2": lambda a, s: torch.atan2(a, s),
    "addcmul": lambda a, s: torch.addcmul(a, a, s),
}

NORMALIZATIONS = {
    "standardize": lambda x: (x - x.mean()) / x.std(),
    "unit norm": lambda x: x / x.norm(),
    "softmax by hand": lambda x: (x - x.max()).exp() / (x - x.max()).exp().sum(),
}


def _grads(fn, *inputs):
    leaves = [t.detach().clone().requires_grad_() for t in inputs]
    out = fn(*leaves)
    out.sum().backward()
    return out.detach(), [t.grad for t in leaves]


def _assert_like_eager(fn, inputs_per_call):
    jfn = thunder.jit(fn, cache="symbolic values")
    for inputs in inputs_per_call:
        out, grads = _grads(jfn, *inputs)
        expected_out, expected_grads = _grads(fn, *inputs)
        torch.testing.assert_close(out, expected_out)
        for got, expected in zip(grads, expected_grads):
            torch.testing.assert_close(got, expected)
    return jfn


@pytest.mark.parametrize("name", sorted(OPS))
def test_a_0d_intermediate_in_an_elementwise_op_gets_eagers_gradient(name):
    op = OPS[name]

    def fn(x, w):
        return op(x.sum(-1), w.sum() * 0.1)

    torch.manual_seed(0)
    # T = 3 equals w's last size (stock thunder: a silently wrong gradient); 4 and 7 do not (it fails)
    calls = [(torch.randn(T, 3), torch.randn(5, 3)) for T in (3, 4, 7)]
    with metatrace.enable():
        jfn = _assert_like_eager(fn, calls)
    assert thunder.cache_misses(jfn) == 1


@pytest.mark.parametrize("name", sorted(NORMALIZATIONS))
def test_normalizing_by_a_0d_reduction_gets_eagers_gradient(name):
    torch.manual_seed(0)
    with metatrace.enable():
        _assert_like_eager(NORMALIZATIONS[name], [(torch.randn(T, 3),) for T in (3, 5)])
