"""thunder's operator-pass run made only for sorting distributed waits is skipped on a trace
without a distributed prim (metatrace.passes.wait_sorting): ``maybe_sort_waits`` receives the
computation trace itself, and the compiled function still equals eager."""

from __future__ import annotations

import pytest
import torch

import thunder
import thunder.distributed.utils as dist_utils


def _step(x, w):
    return torch.nn.functional.gelu(x @ w).reshape(-1).sum()


@pytest.fixture
def sort_wait_inputs(monkeypatch):
    seen = []
    original = dist_utils.maybe_sort_waits

    def maybe_sort_waits(trace):
        seen.append(str(trace.get_provenance() or ""))
        return original(trace)

    monkeypatch.setattr(dist_utils, "maybe_sort_waits", maybe_sort_waits)
    return seen


def test_the_wait_sorting_run_is_skipped_without_distributed_prims(enabled, sort_wait_inputs):
    x, w = torch.randn(5, 4), torch.randn(4, 3, requires_grad=True)
    thunder.jit(_step, cache="symbolic values")(x, w)
    assert sort_wait_inputs and not any("Transform for operator executor execution" in p for p in sort_wait_inputs)


def test_values_and_gradients_equal_eager_with_the_run_skipped(enabled):
    jfn = thunder.jit(_step, cache="symbolic values")
    for n in (5, 2):
        x = torch.randn(n, 4)
        got_w, want_w = torch.randn(4, 3, requires_grad=True), None
        want_w = got_w.detach().clone().requires_grad_()
        got, want = jfn(x, got_w), _step(x, want_w)
        got.backward()
        want.backward()
        torch.testing.assert_close((got, got_w.grad), (want, want_w.grad))
