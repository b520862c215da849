"""More sizes read from tensor data (issue 28): slices and ``narrow`` with a bound read by
``item()``, ``topk`` whose k is read from data, ``repeat_interleave`` with tensor repeats,
``bincount`` and ``unique``.

Each is one compile across random data and several input shapes, its values (and gradients
where eager has them) equal eager's, its traces pass both checkers, and a bound out of range
raises eager's error at run time (``metatrace_check``) instead of returning a shorter result.
"""

from __future__ import annotations

import pytest
import thunder
import torch

import metatrace
from test_data_dependent import _masks

SHAPES = [(3, 4), (5, 2), (6, 3)]
# a size of 1 or 0 takes a second entry, as everywhere in metatrace (broadcasting guards n != 1,
# arange n != 0): the same values, one more compile
EDGE_SHAPES = [(1, 3), (1, 5)]
EMPTY_SHAPES = [(0, 3), (0, 5)]


def _ints(generator, low, high, size=()):
    return torch.randint(low, high, size, generator=generator)


def _flat(out):
    return out if isinstance(out, tuple) else (out,)


def _compare_with_eager(fn, jf, x, *rest, generator):
    """``jf(x, *rest)`` equals ``fn``'s outputs, and the gradient with respect to ``x`` of a random
    weighting of the differentiable ones equals eager's."""
    expected, actual = _flat(fn(x, *rest)), _flat(jf(x, *rest))
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e, equal_nan=True)  # (the mean of nothing is nan)
    pairs = [(a, e) for a, e in zip(actual, expected) if e.requires_grad]
    if pairs:
        weights = [torch.randn(e.shape, generator=generator) for _, e in pairs]
        (expected_grad,) = torch.autograd.grad(sum((e * w).sum() for (_, e), w in zip(pairs, weights)), x)
        (actual_grad,) = torch.autograd.grad(sum((a * w).sum() for (a, _), w in zip(pairs, weights)), x)
        torch.testing.assert_close(actual_grad, expected_grad, equal_nan=True)


def _check_traces(jf):
    """The last computation trace, its first (before transforms) and the backward pass both checkers."""
    traces = [thunder.last_traces(jf)[0], thunder.last_traces(jf)[-1]]
    if thunder.last_backward_traces(jf):
        traces.append(thunder.last_backward_traces(jf)[-1])
    for trace in traces:
        metatrace.check_trace(trace)  # metatrace's strict checker, then thunder's check_trace


# --- functions of (x, n): x float, n a 0-d int tensor whose value becomes a size ---


def _head(x, n):
    return x[: n.item()] * 2


def _tail(x, n):
    return x[n.item():]  # negative n counts from the end


def _middle_every_other(x, n):
    return x[:, 1 : n.item() : 2]


def _both_bounds(x, n):
    k = n.item()
    return x[-k:k]


def _with_ellipsis_and_index(x, n):
    return x[None, ..., : n.item()][0, 1:]


def _narrow(x, n):
    return torch.narrow(x, 0, 0, n.item())


def _narrow_method_from_end(x, n):
    return x.narrow(1, -1, n.item() % 2)


def _topk(x, n):
    return torch.topk(x.sum(1), n.item()).values * 3


def _topk_rows(x, n):
    values, indices = x.topk(n.item(), dim=0, largest=False)
    return values + indices


ITEM_OPS = {
    "head": (_head, (-8, 8)),
    "tail": (_tail, (-8, 8)),
    "middle_every_other": (_middle_every_other, (-6, 6)),
    "both_bounds": (_both_bounds, (0, 8)),
    "with_ellipsis_and_index": (_with_ellipsis_and_index, (-6, 6)),
    "narrow": (_narrow, (0, 2)),  # every length valid for the smallest shape
    "narrow_method_from_end": (_narrow_method_from_end, (0, 4)),
    "topk": (_topk, (0, 2)),
    "topk_rows": (_topk_rows, (0, 2)),
}


def _run_item_op(name, shapes, seed=0, tries=4):
    fn, (low, high) = ITEM_OPS[name]
    generator = torch.Generator().manual_seed(seed)
    jf = thunder.jit(fn, cache="symbolic values")
    for shape in shapes:
        for _ in range(tries):
            x = torch.randn(shape, generator=generator, requires_grad=True)
            _compare_with_eager(fn, jf, x, _ints(generator, low, high), generator=generator)
    return jf


@pytest.mark.parametrize("name", sorted(ITEM_OPS))
def test_item_bounds_on_sizes_of_one(enabled, name):
    jf = _run_item_op(name, SHAPES[:1] + EDGE_SHAPES)
    assert thunder.cache_misses(jf) <= 2


@pytest.mark.parametrize("name", ["head", "tail", "both_bounds", "narrow", "topk"])
def test_item_bounds_on_empty_inputs(enabled, name):
    fn, _ = ITEM_OPS[name]
    jf = thunder.jit(fn, cache="symbolic values")
    for shape in EMPTY_SHAPES:
        x, n = torch.randn(shape), torch.tensor(0)
        torch.testing.assert_close(jf(x, n), fn(x, n))
    assert thunder.cache_misses(jf) == 1


@pytest.mark.parametrize("fn, n", [(_narrow, 7), (_narrow, -1), (_topk, 7), (_topk, -1)],
                         ids=["narrow_past_the_end", "narrow_negative_length", "topk_past_the_end", "topk_negative"])
def test_an_out_of_range_bound_raises_as_eager_does(enabled, fn, n):
    x = torch.randn(3, 4)
    with pytest.raises(RuntimeError):
        fn(x, torch.tensor(n))
    jf = thunder.jit(fn, cache="symbolic values")
    jf(x, torch.tensor(1))
    with pytest.raises(RuntimeError, match="out of range|exceeds"):
        jf(x, torch.tensor(n))


def test_the_out_of_range_check_is_in_the_computation(enabled):
    jf = thunder.jit(_narrow, cache="symbolic values")
    jf(torch.randn(3, 4), torch.tensor(2))
    names = {b.sym.name for b in thunder.last_traces(jf)[-1].bound_symbols}
    assert "metatrace_check" in names


# --- functions of (x, r): r a 1-d int tensor of x's length ---


def _repeat_rows(x, r):
    return torch.repeat_interleave(x, r, dim=0) * 2


def _repeat_flat(x, r):
    return x.repeat_interleave(r.repeat_interleave(x.shape[1]))


def _repeat_columns_by_one_count(x, r):
    return torch.repeat_interleave(x, r[:1], dim=1)


def _repeat_indices(x, r):
    return torch.repeat_interleave(r)


def _bincount(x, r):
    return torch.bincount(r)


def _bincount_weighted(x, r):
    return torch.bincount(r, weights=x[:, 0].detach(), minlength=5)  # (eager has no gradient)


def _unique(x, r):
    return torch.unique(r)


def _unique_all(x, r):
    values, inverse, counts = torch.unique(r, return_inverse=True, return_counts=True)
    return values * 100 + counts, inverse


def _unique_method_counts(x, r):
    return r.unique(return_counts=True)


def _unique_consecutive(x, r):
    return torch.unique_consecutive(r, return_counts=True)


def _gather_uniques(x, r):
    # the unique values index x's rows: a size read from data flows into a differentiable op
    return x[torch.unique(torch.remainder(r, x.shape[0]))].sum(0)


REPEAT_OPS = {
    "repeat_rows": _repeat_rows,
    "repeat_flat": _repeat_flat,
    "repeat_columns_by_one_count": _repeat_columns_by_one_count,
    "repeat_indices": _repeat_indices,
    "bincount": _bincount,
    "bincount_weighted": _bincount_weighted,
    "unique": _unique,
    "unique_all": _unique_all,
    "unique_method_counts": _unique_method_counts,
    "unique_consecutive": _unique_consecutive,
    "gather_uniques": _gather_uniques,
}


def _run_repeat_op(name, shapes, seed=0, tries=3):
    fn = REPEAT_OPS[name]
    generator = torch.Generator().manual_seed(seed)
    jf = thunder.jit(fn, cache="symbolic values")
    for shape in shapes:
        for high in (3, 1, 4)[:tries]:  # random counts, all zero, larger ones
            x = torch.randn(shape, generator=generator, requires_grad=True)
            r = _ints(generator, 0, high, (shape[0],))
            _compare_with_eager(fn, jf, x, r, generator=generator)
    return jf


@pytest.mark.parametrize("name", sorted(set(REPEAT_OPS) - {"repeat_columns_by_one_count"}))  # (eager raises)
def test_counts_from_data_on_empty_inputs(enabled, name):
    jf = _run_repeat_op(name, EMPTY_SHAPES, tries=1)
    assert thunder.cache_misses(jf) == 1


@pytest.mark.parametrize("name", sorted(REPEAT_OPS))
def test_counts_from_data_on_sizes_of_one(enabled, name):
    jf = _run_repeat_op(name, SHAPES[:1] + EDGE_SHAPES)
    assert thunder.cache_misses(jf) <= 2


def test_bincount_dtypes_follow_eager(enabled):
    r = torch.tensor([0, 2, 2, 5])
    fn = lambda r, w: torch.bincount(r, weights=w)  # noqa: E731
    for weights in (torch.rand(4), torch.rand(4, dtype=torch.float64), torch.arange(4)):
        assert thunder.jit(fn, cache="symbolic values")(r, weights).dtype == fn(r, weights).dtype


def test_repeats_of_another_length_raise(enabled):
    jf = thunder.jit(_repeat_rows, cache="symbolic values")
    with pytest.raises(RuntimeError, match="same size"):
        jf(torch.randn(3, 2), torch.tensor([1, 2]))


def test_the_prologue_never_reads_a_size_read_from_data(enabled):
    jf = _run_repeat_op("unique_all", SHAPES[:1], tries=1)
    computation = thunder.last_traces(jf)[0]
    sizes = {b.output[-1].name for b in computation.bound_symbols if b.sym.name == "metatrace_unique"}
    prologue = thunder.last_prologue_traces(jf)[-1]
    read = {p.name for b in prologue.bound_symbols for p in b.flat_proxy_args}
    assert sizes and not sizes & read


def _slice_rows(x):
    return x[:, 1:] * 2


def test_the_gradient_of_a_slice_of_an_empty_tensor_is_eagers(enabled):
    # the gradient of a slice is thunder's pad, whose torch implementation refused an empty
    # dimension (stock thunder too): metatrace_pad
    jf = thunder.jit(_slice_rows, cache="symbolic values")
    x = torch.randn(0, 4, requires_grad=True)
    (actual,) = torch.autograd.grad(jf(x).sum(), x)
    (expected,) = torch.autograd.grad(_slice_rows(x).sum(), x)
    torch.testing.assert_close(actual, expected)


def _detach_twice(x):
    y = x * 2
    return y * y.detach() + torch.detach(y)


def test_detach_keeps_size_symbols_and_eagers_gradient(enabled):
    jf = thunder.jit(_detach_twice, cache="symbolic values")
    for rows in (3, 5, 7):
        x = torch.randn(rows, 2, requires_grad=True)
        (actual,) = torch.autograd.grad(jf(x).sum(), x)
        (expected,) = torch.autograd.grad(_detach_twice(x).sum(), x)
        torch.testing.assert_close(actual, expected)
    assert thunder.cache_misses(jf) == 1


# --- ops on a tensor whose size was read from data: their decisions are size-oblivious ---

ON_SELECTED = {
    "softmax": lambda x, m: torch.softmax(x[m], 0),
    "softmax_of_rows": lambda x, m: torch.softmax(x[m[:, 0]], -1),
    "mean": lambda x, m: x[m].mean(),
    "amax_of_rows": lambda x, m: x[m.any(1)].amax(1),
    "argmax_of_rows": lambda x, m: x[m.any(1)].argmax(1),
    "view_then_broadcast": lambda x, m: x[m].view(-1, 1) * torch.ones(1, 3),
    "cumsum": lambda x, m: x[m].cumsum(0),
    # a slice of a dimension whose length was read from data: a mask over its positions
    "head_of_a_selection": lambda x, m: x[m][:2] * 2,
    "tail_of_rows_of_a_selection": lambda x, m: x[m.any(1)][1:] * 3,
}


def _run_on_selected(name, shapes, tries=None):
    fn = ON_SELECTED[name]
    generator = torch.Generator().manual_seed(5)
    jf = thunder.jit(fn, cache="symbolic values")
    for shape in shapes:
        for m in _masks(shape, generator):
            x = torch.randn(shape, generator=generator, requires_grad=True)
            _compare_with_eager(fn, jf, x, m, generator=generator)
    return jf


def test_a_reduction_without_identity_over_an_empty_selection_raises_as_eager(enabled):
    fn = lambda x, m: x[m].amax(0)  # noqa: E731
    jf = thunder.jit(fn, cache="symbolic values")
    x = torch.randn(3, 4)
    torch.testing.assert_close(jf(x, x > 0), fn(x, x > 0))
    with pytest.raises((RuntimeError, IndexError)):
        fn(x, x > 100)
    with pytest.raises((RuntimeError, IndexError)):
        jf(x, x > 100)


# every family above: (its table of functions, the runner that calls one over shapes)
FAMILIES = {
    "item_bounds": (ITEM_OPS, _run_item_op),
    "counts_from_data": (REPEAT_OPS, _run_repeat_op),
    "on_a_selection": (ON_SELECTED, _run_on_selected),
}
CASES = [(family, name) for family, (table, _) in FAMILIES.items() for name in sorted(table)]
CASE_IDS = [f"{family}-{name}" for family, name in CASES]


@pytest.mark.parametrize("family, name", CASES, ids=CASE_IDS)
def test_one_compile_over_values_and_shapes(enabled, family, name):
    jf = FAMILIES[family][1](name, SHAPES)
    assert thunder.cache_misses(jf) == 1


@pytest.mark.parametrize("family, name", CASES, ids=CASE_IDS)
def test_traces_pass_both_checkers(enabled, family, name):
    _check_traces(FAMILIES[family][1](name, SHAPES[:1], tries=1))


def _selection_and_counts(x, w, m):
    h = torch.relu(x[m.any(1)] @ w)
    counts = torch.bincount(m.sum(1), minlength=x.shape[1])
    return h.sum(0) * counts[: w.shape[1]].float().sum() + counts[1:].float().mean()


@pytest.mark.slow  # (torch.compile runs: inductor compiles on CPU)
def test_sizes_read_from_data_under_torch_compile_ex_with_grad_on_weights_only(enabled):
    from thunder.executors.torch_compile import torch_compile_ex

    jf = thunder.jit(_selection_and_counts, cache="symbolic values", executors=[torch_compile_ex])
    generator = torch.Generator().manual_seed(6)
    for rows in (3, 5, 8):
        x, w = torch.randn(rows, 4, generator=generator), torch.randn(4, 4, generator=generator, requires_grad=True)
        for m in _masks((rows, 4), generator):
            expected, actual = _selection_and_counts(x, w, m), jf(x, w, m)
            torch.testing.assert_close(actual, expected, equal_nan=True)
            (expected_grad,) = torch.autograd.grad(expected.sum(), w)
            (actual_grad,) = torch.autograd.grad(actual.sum(), w)
            torch.testing.assert_close(actual_grad, expected_grad, equal_nan=True)
    assert thunder.cache_misses(jf) == 1
