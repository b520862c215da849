"""Every trace of a jitted function passes both trace checkers, and results equal eager PyTorch.

For each case the function is jitted with ``cache="symbolic values"`` and called with two or three
sizes; after every call, values and gradients (for a fixed random cotangent) are compared with
eager PyTorch, and every trace of the entry used (prologue, every computation trace, the forward
after the grad split, every backward trace) must pass ``metatrace.check_trace``: metatrace's strict
checker (every size symbol has a definition) and thunder's own ``thunder.dev_utils.check_trace``
(every argument is bound in its scope). Then the number of compiles is counted.

The first cases are the reported failures (an empty slice's backward, conv after max_pool, masked
fills then slices, view + transpose, cat of a slice, max_pool on a slice, conv's backward,
torchex's ``max_pool2d_with_indices``); the others are ops, sizes 0 and 1 and partial gradients
that took the same paths.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import pytest
import torch
import torch.nn.functional as F

import thunder

from metatrace.checker import check_trace


def _t(*shape, grad=True):
    return torch.randn(*shape, requires_grad=grad)


@dataclass
class Case:
    name: str
    fn: Callable
    calls: list  # argument tuples, one per call
    compiles: int  # thunder.cache_misses after all calls
    marks: list = field(default_factory=list)


CASES = [
    # -- the reported failures
    Case("empty_slice_with_step", lambda a, k: a[5:3:k] * 2, [(_t(10), 1), (_t(12), 1)], 1),
    Case(
        "conv_after_max_pool",
        lambda x, w: F.conv2d(F.max_pool2d(x, 2), w, padding=1),
        [(_t(1, 3, 8, 8), _t(3, 3, 3, 3)), (_t(1, 3, 10, 10), _t(3, 3, 3, 3))],
        1,
    ),
    Case(
        "masked_fill_ones_then_slice",
        lambda x, n: x.masked_fill(torch.ones(n, n, dtype=torch.bool), 0.0)[:, : n - 1],
        [(_t(8, 8), 8), (_t(6, 6), 6)],
        1,
    ),
    Case(
        "masked_fill_tril_then_slice",
        lambda x, n: x.masked_fill(~torch.tril(torch.ones(n, n, dtype=torch.bool)), 0)[:, : n // 2 + 1],
        [(_t(8, 8), 8), (_t(6, 6), 6)],
        1,
    ),
    Case("view_transpose_slice", lambda x, h, d: x.view(h, d).t()[:2] * 2, [(_t(32), 4, 8), (_t(32), 8, 4)], 1),
    Case("cat_with_a_slice", lambda x, i: torch.cat([x, x[:, :i] * 2], 1), [(_t(4, 6), 2), (_t(4, 6), 3)], 1),
    Case(
        "max_pool_of_a_slice_no_grad",
        lambda x: F.max_pool2d(x[..., 1:], 2),
        [(_t(1, 3, 8, 9, grad=False),), (_t(1, 3, 10, 11, grad=False),)],
        1,
    ),
    Case(
        "conv_padding",
        lambda x, w: F.conv2d(x, w, padding=1),
        [(_t(1, 3, 8, 8), _t(3, 3, 3, 3)), (_t(1, 3, 10, 10), _t(3, 3, 3, 3))],
        1,
    ),
    Case("max_pool", lambda x: F.max_pool2d(x, 2), [(_t(1, 3, 8, 8),), (_t(1, 3, 10, 10),), (_t(1, 3, 12, 12),)], 1),
    # -- other ops, sizes 0 and 1, gradients for some inputs only
    Case("split_reversed_cat", lambda x, k: torch.cat(list(reversed(torch.split(x, k, 1))), 1) * 2,
         [(_t(3, 8), 2), (_t(3, 10), 2), (_t(3, 12), 3)], 2),  # k=3 makes 4 chunks, not 5: a new entry
    Case("chunk_cat", lambda x: torch.cat(torch.chunk(x, 2, 0)[::-1], 1), [(_t(4, 3),), (_t(6, 3),)], 2),
    Case("pad", lambda x, p: F.pad(x, (p, p + 1)) * 2, [(_t(2, 5), 1), (_t(2, 7), 2), (_t(2, 6), 1)], 1),
    Case("expand", lambda x, n: x.expand(n, -1, -1) * 2, [(_t(1, 3, 4), 5), (_t(1, 3, 5), 6), (_t(1, 2, 4), 2)], 1),
    Case("index_select", lambda x, i: torch.index_select(x, 1, i) * 2,
         [(_t(4, 7), torch.arange(3)), (_t(4, 9), torch.arange(5))], 1),
    Case("narrow", lambda x, s, n: x.narrow(1, s, n) * 2, [(_t(3, 10), 2, 5), (_t(3, 12), 3, 4)], 2),
    Case("reshape_inferred", lambda x, h: x.reshape(h, -1).t() * 2, [(_t(24), 4), (_t(24), 6), (_t(36), 4)], 1),
    Case("unfold", lambda x: F.unfold(x, 2) * 2, [(_t(1, 2, 5, 5),), (_t(1, 2, 6, 6),)], 2),
    Case("flip_of_a_slice_no_grad", lambda x, i: torch.flip(x[:, :i], (1,)) * 2,
         [(_t(3, 8, grad=False), 4), (_t(3, 9, grad=False), 5)], 1),
    Case("layer_norm", lambda x, w, b: F.layer_norm(x, x.shape[-1:], w, b),
         [(_t(2, 5, 8), _t(8), _t(8)), (_t(3, 7, 8), _t(8), _t(8))], 1),
    Case("layer_norm_of_a_slice", lambda x, i: F.layer_norm(x[:i], (x.shape[-1],)),
         [(_t(6, 8), 3), (_t(6, 8), 4), (_t(7, 8), 5)], 1),
    Case("conv1d_of_a_slice", lambda x, w, i: F.conv1d(x[..., :i], w, padding=1),
         [(_t(1, 2, 10), _t(3, 2, 3), 8), (_t(1, 2, 12), _t(3, 2, 3), 9)], 1),
    Case("grad_for_the_sliced_input_only", lambda x, w: (x[:, 1:] @ w).relu(),
         [(_t(3, 5), _t(4, 2, grad=False)), (_t(4, 6), _t(5, 2, grad=False))], 1),
    Case("grad_for_the_weight_only", lambda x, w: (x[:, 1:] @ w).relu(),
         [(_t(3, 5, grad=False), _t(4, 2)), (_t(4, 6, grad=False), _t(5, 2))], 1),
    # i == size: an empty slice, its own entry
    Case("empty_slice_size_0", lambda x, i: x[:, i:] * 2, [(_t(3, 4), 4), (_t(3, 5), 5), (_t(3, 4), 2)], 2),
    # a size 1 shares the entry of other sizes (metatrace.proxies.size_oblivious: nothing broadcasts it)
    Case("slice_size_1", lambda x, i: (x[:, :i] + 1).sum(1), [(_t(3, 4), 1), (_t(3, 5), 1), (_t(3, 6), 2)], 1),
    Case("zero_batch", lambda x: (x * 2).sum(0), [(_t(0, 4),), (_t(0, 5),), (_t(2, 4),)], 1),
]


def _all_traces(jf) -> list:
    return [
        *thunder.last_prologue_traces(jf),
        *thunder.last_traces(jf),
        *(thunder.last_backward_traces(jf) or []),
    ]


def _copies(args) -> list:
    return [a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a for a in args]


def _failing_traces(jf) -> list[str]:
    failures = []
    for trace in _all_traces(jf):
        try:
            check_trace(trace)
        except Exception as e:  # noqa: BLE001 - report every trace's failure, of either checker
            provenance = str(trace.get_provenance() or "the first trace").strip()
            failures.append(f"{provenance}: {type(e).__name__}: {str(e)[:500]}")
    return failures


def _grads(args) -> list:
    return [a.grad for a in args if isinstance(a, torch.Tensor) and a.requires_grad]


@pytest.mark.parametrize(
    "case", [pytest.param(c, id=c.name, marks=c.marks) for c in CASES]
)
def test_traces_pass_both_checkers_and_match_eager(enabled, case):
    jf = thunder.jit(case.fn, cache="symbolic values")
    for args in case.calls:
        jitted_args, eager_args = _copies(args), _copies(args)
        out = jf(*jitted_args)
        expected = case.fn(*eager_args)
        torch.testing.assert_close(out, expected)
        if expected.requires_grad:
            torch.manual_seed(0)
            cotangent = torch.randn_like(expected)
            out.backward(cotangent)
            expected.backward(cotangent)
            torch.testing.assert_close(_grads(jitted_args), _grads(eager_args))
        assert _failing_traces(jf) == []
    assert thunder.cache_misses(jf) == case.compiles


@pytest.mark.parametrize("not_a_trace", [None, "trace", []])
def test_check_trace_of_something_else_says_it_expects_a_trace(not_a_trace):
    with pytest.raises(TypeError, match="expects a thunder trace"):
        check_trace(not_a_trace)
