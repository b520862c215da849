"""Torch ops thunder registers automatically (no thunder definition) keep their sizes symbolic:
their meta runs torch on fake tensors with a torch symbol per size
(metatrace.metas.torch_ops.auto_registered), where thunder's read every size's value."""

from __future__ import annotations

import pytest
import torch

import thunder

import metatrace
from metatrace.testing import compiles_over

SYMBOLIC = "symbolic values"


WIDTHS = [(torch.randn(2, n),) for n in (3, 5, 7)]


@pytest.mark.parametrize("fn", [
    # T5's relative position buckets call torch.min; torch's contiguity check on 2-d sizes
    # (``s0 * s1 >= 2``) becomes a lower bound on each size that implies it, not a pin
    lambda x: torch.min(x, x * 2) * x.shape[1],
    lambda x: torch.absolute(x) + 1,
    lambda x: torch.roll(x, 1, 1) * x.shape[1],
], ids=["min", "absolute", "roll"])
def test_an_automatically_registered_op_shares_one_entry_over_sizes(enabled, fn):
    assert compiles_over(fn, WIDTHS) == 1


def test_an_output_size_that_is_no_input_size_is_pinned_and_named(enabled):
    """block_diag's output is ``2 n`` long: not a size of an input, so the sizes it reads are
    pinned (a compile per width, as stock thunder) and explain() says why."""
    fn = lambda x: torch.block_diag(x, x)  # noqa: E731
    jf = thunder.jit(fn, cache=SYMBOLIC)
    for (x,) in WIDTHS[:2]:
        torch.testing.assert_close(jf(x), fn(x))
    assert thunder.cache_misses(jf) == 2
    assert "a size of block_diag's output" in str(metatrace.explain(jf)[0])


def test_the_decisions_of_torchs_meta_are_guarded(enabled):
    """torch.min of two tensors requires equal sizes (no size 1 here): the fake run's ``Eq``
    guard is the entry's, so unequal sizes are not run through the entry; they raise as eager."""
    fn = lambda x, y: torch.min(x, y) + 1  # noqa: E731
    jf = thunder.jit(fn, cache=SYMBOLIC)
    for n in (2, 4):
        x, y = torch.randn(n, 3), torch.randn(n, 3)
        torch.testing.assert_close(jf(x, y), fn(x, y))
    assert thunder.cache_misses(jf) == 1
    x, y = torch.randn(4, 3), torch.randn(5, 3)
    with pytest.raises(RuntimeError):
        fn(x, y)
    with pytest.raises(Exception):
        jf(x, y)


def test_with_a_gradient_values_equal_eager(enabled):
    fn = lambda x: torch.min(x, x * x).sum()  # noqa: E731
    jf = thunder.jit(fn, cache=SYMBOLIC)
    for (x,) in WIDTHS:
        x = x.clone().requires_grad_()
        want = fn(x)
        want.backward()
        want_grad, x.grad = x.grad, None
        got = jf(x)
        got.backward()
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(x.grad, want_grad)
