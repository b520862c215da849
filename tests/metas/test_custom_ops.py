"""torch.library custom ops thunder was not told about (metatrace.metas.torch_ops.custom_ops) and
``torch.histc`` (metatrace.metas.torch_ops.histc): symbolic sizes, one compile over several lengths, values
and gradients equal eager. Stock thunder refuses the first ("... is not registered") and pins the
second's input sizes (a compile per length)."""

from __future__ import annotations

import pytest
import thunder
import torch

import metatrace


@torch.library.custom_op("metatrace_tests::scaled_mm", mutates_args=())
def scaled_mm(x: torch.Tensor, w: torch.Tensor, scale: float) -> torch.Tensor:
    return (x @ w.t()) * scale


@scaled_mm.register_fake
def _(x, w, scale):
    assert x.size(1) == w.size(1)
    return x.new_empty(x.size(0), w.size(0))


def _setup_context(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], inputs[1])
    ctx.scale = inputs[2]  # an attribute of ctx, not a saved tensor


def _backward(ctx, grad):
    x, w = ctx.saved_tensors
    return grad @ w * ctx.scale, grad.t() @ x * ctx.scale, None


scaled_mm.register_autograd(_backward, setup_context=_setup_context)


@torch.library.custom_op("metatrace_tests::no_grad_twice", mutates_args=())
def no_grad_twice(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@no_grad_twice.register_fake
def _(x):
    return torch.empty_like(x)


def _uses_custom_op(x, w):
    return torch.ops.metatrace_tests.scaled_mm(torch.tanh(x), w, scale=0.5).sum(-1)


def test_a_custom_op_serves_every_length_in_one_compile(enabled):
    jf = thunder.jit(_uses_custom_op, cache="symbolic values")
    w = torch.randn(3, 4)
    for n in (2, 5, 7):
        jf(torch.randn(n, 4), w)
    assert thunder.cache_misses(jf) == 1


def test_a_custom_ops_values_equal_eager(enabled):
    jf = thunder.jit(_uses_custom_op, cache="symbolic values")
    w = torch.randn(3, 4)
    for n in (2, 5):
        x = torch.randn(n, 4)
        torch.testing.assert_close(jf(x, w), _uses_custom_op(x, w))


def test_a_custom_ops_gradients_are_its_own_autograds(enabled):
    jf = thunder.jit(_uses_custom_op, cache="symbolic values")
    for n in (2, 5):
        x, w = torch.randn(n, 4, requires_grad=True), torch.randn(3, 4, requires_grad=True)
        grads = torch.autograd.grad(jf(x, w).sum(), (x, w))
        expected = torch.autograd.grad(_uses_custom_op(x, w).sum(), (x, w))
        for g, e in zip(grads, expected):
            torch.testing.assert_close(g, e)


def test_a_custom_ops_traces_pass_both_checkers(enabled):
    jf = thunder.jit(_uses_custom_op, cache="symbolic values")
    x, w = torch.randn(5, 4, requires_grad=True), torch.randn(3, 4, requires_grad=True)
    jf(x, w).sum().backward()
    for trace in (thunder.last_traces(jf)[-1], thunder.last_backward_traces(jf)[-1]):
        metatrace.check_trace(trace)


def test_a_custom_op_without_autograd_raises_when_its_input_requires_grad(enabled):
    jf = thunder.jit(lambda x: torch.ops.metatrace_tests.no_grad_twice(x), cache="symbolic values")
    with pytest.raises(metatrace.CustomOpError, match="no autograd"):
        jf(torch.randn(3, requires_grad=True))


def test_a_custom_op_without_autograd_runs_without_grad(enabled):
    jf = thunder.jit(lambda x: torch.ops.metatrace_tests.no_grad_twice(x), cache="symbolic values")
    x = torch.randn(3)
    torch.testing.assert_close(jf(x), x * 2)


def _counts(x):
    return torch.histc(x.float(), bins=4, min=0, max=3)


def test_histc_serves_every_length_in_one_compile(enabled):
    jf = thunder.jit(_counts, cache="symbolic values")
    for n in (6, 9, 13):
        jf(torch.randint(0, 4, (n,)))
    assert thunder.cache_misses(jf) == 1


def test_histc_equals_eager_at_edges_and_outside(enabled):
    jf = thunder.jit(lambda x: torch.histc(x, bins=5, min=-1.0, max=1.0), cache="symbolic values")
    g = torch.Generator().manual_seed(0)
    for n in (7, 50):
        x = torch.randn(n, generator=g) * 2
        x[:4] = torch.tensor([-1.0, 1.0, 0.0, 0.2])  # both edges and an inner bin edge
        torch.testing.assert_close(jf(x), torch.histc(x, bins=5, min=-1.0, max=1.0))
