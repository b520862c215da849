"""Sizes read from tensor data (issue 28): ``torch.nonzero``, ``argwhere``, ``torch.where(cond)``,
``x[mask]`` and ``masked_select`` under ``cache="symbolic values"``.

Each op is one compile across random, all-False and all-True masks and several input shapes,
forward and backward equal to eager; its traces pass both checkers (``metatrace.check_trace`` runs
metatrace's strict one and thunder's own); the prologue never sees the data-dependent size; a
decision that no value of the size settles raises ``DataDependentError``.
"""

from __future__ import annotations

import math

import pytest
import thunder
import torch

import metatrace
from metatrace.guards.collect import DataDependentError

SHAPES = [(3, 4), (5, 2), (6, 3)]
EMPTY_SHAPES = [(0, 3), (0, 5)]


def _masks(shape, generator):
    """A random mask, an all-False mask (empty result) and an all-True mask of ``shape``."""
    return [
        torch.rand(shape, generator=generator) > 0.5,
        torch.zeros(shape, dtype=torch.bool),
        torch.ones(shape, dtype=torch.bool),
    ]


def _getitem(x, m):
    return x[m]


def _getitem_leading(x, m):
    return x[m[:, 0]]  # a mask of x's leading size: whole rows


def _masked_select(x, m):
    return torch.masked_select(x, m)


def _masked_select_broadcast(x, m):
    return x.masked_select(m.any(0))  # a mask of x's last size, broadcast over the rows


def _by_nonzero(x, m):
    i = torch.nonzero(m)
    return x[i[:, 0], i[:, 1]]


def _by_argwhere(x, m):
    i = torch.argwhere(m)
    return x[i[:, 0], i[:, 1]]


def _by_where(x, m):
    return x[torch.where(m)]


def _masked_loss(x, m):
    return ((x[m] - 2 * x[m]) ** 2).sum()  # two reads of one mask: one length


def _reshape_rows(x, m):
    # reshape(-1, C) of an (n, C) selection: thunder checks n*C % C == 0 and computes n*C // C
    return x[m[:, 0]].reshape(-1, x.shape[-1]) * 2


def _flatten_selected(x, m):
    return x[m[:, 0]].reshape(-1)


def _linear_of_selected(x, m):
    # linear's grad reshapes its cotangent with -1 (thunder's _linear_prim_grad)
    return torch.nn.functional.linear(x[m[:, 0]], torch.ones(3, x.shape[-1]))


def _mask_of_columns(x, m):
    return x[:, m.any(0)]  # a mask beside a slice: the count stays in the mask's place


def _mask_after_sliced_rows(x, m):
    return x[1:, m.any(0)] * 2


def _mask_after_ellipsis(x, m):
    return x[None][..., m.any(0)]


def _mask_between_slice_and_none(x, m):
    return x.reshape(1, *x.shape)[:, m, None]


def _mask_before_a_slice(x, m):
    return x[m[:, 0], 1:]


DIFFERENTIABLE = {
    "mask_of_columns": _mask_of_columns,
    "mask_after_sliced_rows": _mask_after_sliced_rows,
    "mask_after_ellipsis": _mask_after_ellipsis,
    "mask_between_slice_and_none": _mask_between_slice_and_none,
    "mask_before_a_slice": _mask_before_a_slice,
    "reshape_rows": _reshape_rows,
    "flatten_selected": _flatten_selected,
    "linear_of_selected": _linear_of_selected,
    "getitem": _getitem,
    "getitem_leading": _getitem_leading,
    "masked_select": _masked_select,
    "masked_select_broadcast": _masked_select_broadcast,
    "nonzero": _by_nonzero,
    "argwhere": _by_argwhere,
    "where": _by_where,
    "masked_loss": _masked_loss,
}


def _run(fn, shapes, seed=0):
    """Calls one jitted ``fn`` over every shape and mask; compares values and gradients with eager."""
    generator = torch.Generator().manual_seed(seed)
    jf = thunder.jit(fn, cache="symbolic values")
    for shape in shapes:
        for m in _masks(shape, generator):
            x = torch.randn(shape, generator=generator, requires_grad=True)
            expected = fn(x, m)
            actual = jf(x, m)
            torch.testing.assert_close(actual, expected, equal_nan=True)
            weights = torch.randn(expected.shape, generator=generator)
            (expected_grad,) = torch.autograd.grad((expected * weights).sum(), x)
            (actual_grad,) = torch.autograd.grad((actual * weights).sum(), x)
            torch.testing.assert_close(actual_grad, expected_grad)
    return jf


def _count_names(trace) -> set[str]:
    return {b.output[1].name for b in trace.bound_symbols if b.sym.name == "metatrace_nonzero"}


@pytest.mark.parametrize("name", sorted(DIFFERENTIABLE))
def test_forward_and_backward_over_masks_and_shapes_one_compile(enabled, name):
    jf = _run(DIFFERENTIABLE[name], SHAPES)
    assert thunder.cache_misses(jf) == 1


@pytest.mark.parametrize("name", sorted(DIFFERENTIABLE))
def test_traces_pass_both_checkers(enabled, name):
    jf = _run(DIFFERENTIABLE[name], SHAPES[:1])
    for trace in (thunder.last_traces(jf)[0], thunder.last_traces(jf)[-1], thunder.last_backward_traces(jf)[-1]):
        metatrace.check_trace(trace)  # metatrace's strict checker, then thunder's check_trace


@pytest.mark.parametrize("name", sorted(DIFFERENTIABLE))
def test_computation_binds_the_count_at_run_time(enabled, name):
    jf = _run(DIFFERENTIABLE[name], SHAPES[:1])
    assert _count_names(thunder.last_traces(jf)[-1])


@pytest.mark.parametrize("name", sorted(DIFFERENTIABLE))
def test_prologue_never_reads_the_count(enabled, name):
    jf = _run(DIFFERENTIABLE[name], SHAPES[:1])
    counts = _count_names(thunder.last_traces(jf)[0])
    prologue = thunder.last_prologue_traces(jf)[-1]
    read = {p.name for b in prologue.bound_symbols for p in b.flat_proxy_args}
    assert not counts & read


@pytest.mark.parametrize("name", sorted(DIFFERENTIABLE))
def test_empty_input(enabled, name):
    jf = _run(DIFFERENTIABLE[name], EMPTY_SHAPES)
    assert thunder.cache_misses(jf) == 1


def test_empty_input_after_a_nonempty_one(enabled):
    """An empty input decides ``x.numel() == 0`` (index_select's check): its own entry, both right."""
    jf = _run(_getitem, SHAPES[:1] + EMPTY_SHAPES[:1])
    assert thunder.cache_misses(jf) == 2


INDEX_OPS = {
    "nonzero": lambda m: torch.nonzero(m),
    "nonzero_method": lambda m: m.nonzero(),
    "argwhere": lambda m: torch.argwhere(m),
    "where": lambda m: torch.where(m),
    "nonzero_as_tuple": lambda m: torch.nonzero(m, as_tuple=True),
    "nonzero_1d": lambda m: torch.nonzero(m.flatten()),
    "nonzero_3d": lambda m: torch.nonzero(m.reshape(1, *m.shape)),
}


@pytest.mark.parametrize("name", sorted(INDEX_OPS))
def test_index_outputs_over_masks_and_shapes_one_compile(enabled, name):
    fn = INDEX_OPS[name]
    generator = torch.Generator().manual_seed(1)
    jf = thunder.jit(fn, cache="symbolic values")
    for shape in SHAPES:
        for m in _masks(shape, generator):
            torch.testing.assert_close(jf(m), fn(m))
    assert thunder.cache_misses(jf) == 1


@pytest.mark.parametrize("name", sorted(INDEX_OPS))
def test_index_traces_pass_both_checkers(enabled, name):
    jf = thunder.jit(INDEX_OPS[name], cache="symbolic values")
    jf(torch.rand(3, 4) > 0.5)
    for trace in (thunder.last_traces(jf)[0], thunder.last_traces(jf)[-1]):
        metatrace.check_trace(trace)


def test_empty_mask_index_outputs(enabled):
    fn = INDEX_OPS["nonzero"]
    jf = thunder.jit(fn, cache="symbolic values")
    m = torch.zeros(0, 4, dtype=torch.bool)
    torch.testing.assert_close(jf(m), fn(m))


def test_computing_with_the_count_is_not_a_decision(enabled):
    """``y.sum() / y.shape[0]`` passes the count to the computation: no decision, one entry."""
    fn = lambda x, m: x[m].sum() / x[m].shape[0]  # noqa: E731
    jf = thunder.jit(fn, cache="symbolic values")
    generator = torch.Generator().manual_seed(2)
    for shape in SHAPES:
        x, m = torch.randn(shape, generator=generator), torch.rand(shape, generator=generator) > 0.5
        torch.testing.assert_close(jf(x, m), fn(x, m))
    assert thunder.cache_misses(jf) == 1


def test_cat_of_masked_values(enabled):
    fn = lambda x, m: torch.cat([x[m], 2 * x[m]])  # noqa: E731
    jf = thunder.jit(fn, cache="symbolic values")
    x, m = torch.randn(3, 4), torch.rand(3, 4) > 0.5
    torch.testing.assert_close(jf(x, m), fn(x, m))


def test_cat_of_masked_values_passes_both_checkers(enabled):
    jf = thunder.jit(lambda x, m: torch.cat([x[m], 2 * x[m]]), cache="symbolic values")
    jf(torch.randn(3, 4), torch.rand(3, 4) > 0.5)
    metatrace.check_trace(thunder.last_traces(jf)[-1])


def test_in_place_write_to_the_mask_reads_it_again(enabled):
    """The indices of one mask are shared (``x[m] - y[m]``) until an in-place op: then read again."""

    def fn(x, m):
        a = x[m]
        m.logical_not_()
        return a.sum() + 10 * x[m].sum()

    jf = thunder.jit(fn, cache="symbolic values")
    x, m = torch.randn(3, 4), torch.rand(3, 4) > 0.5
    torch.testing.assert_close(jf(x, m.clone()), fn(x, m.clone()))


def _branch_on_count(x, m):
    y = x[m]
    if y.shape[0] > 2:
        return y * 2
    return y


def test_branch_on_the_count_raises(enabled):
    jf = thunder.jit(_branch_on_count, cache="symbolic values")
    with pytest.raises(Exception, match="computed from metatrace_nonzero"):
        jf(torch.randn(3, 4), torch.rand(3, 4) > 0.5)


def test_int_of_the_count_raises(enabled):
    jf = thunder.jit(lambda x, m: torch.zeros(int(x[m].shape[0])), cache="symbolic values")
    with pytest.raises(DataDependentError):
        jf(torch.randn(3, 4), torch.rand(3, 4) > 0.5)


@pytest.mark.parametrize("fn", [
    lambda x, m: torch.zeros(x[m].shape[0].bit_length()),
    lambda x, m: torch.zeros(math.gcd(x[m].shape[0], 4)),
    lambda x, m: torch.zeros(len("{:>4}".format(x[m].shape[0]))),
], ids=["attribute", "C function", "format"])
def test_c_code_reading_the_count_raises(enabled, fn):
    """C code that reads a number gets its value (metatrace.interpret.calls.c_code.opaque_calls): a count read
    from data has none, and the clear error reaches the caller."""
    jf = thunder.jit(fn, cache="symbolic values")
    with pytest.raises(DataDependentError):
        jf(torch.randn(3, 4), torch.rand(3, 4) > 0.5)


def test_broadcasting_two_counts_raises(enabled):
    """``x[m] + x[~m]``: two counts, equal only for some masks; eager raises where they differ."""
    jf = thunder.jit(lambda x, m: x[m] + x[~m], cache="symbolic values")
    with pytest.raises(DataDependentError):
        jf(torch.randn(3, 4), torch.rand(3, 4) > 0.5)


def _branch_on_item(a):
    return a * 2 if a.sum().item() > 0 else a * 3


def test_branch_on_item_still_raises(enabled):
    jf = thunder.jit(_branch_on_item, cache="symbolic values")
    with pytest.raises(Exception, match="computed from item"):
        jf(torch.ones(2))


# Decisions on an unbacked size, outside any trace


def _size():
    from thunder.core.trace import TraceCtx, tracectx

    from metatrace.metas import unbacked

    with tracectx(TraceCtx()):
        return unbacked.new_size()


def test_size_is_itself():
    from metatrace.metas.unbacked import decide

    n = _size()
    assert decide("eq", n, n) is True


def test_size_is_nonnegative():
    from metatrace.metas.unbacked import decide

    assert decide("ge", _size(), 0) is True


def test_size_is_not_negative():
    from metatrace.metas.unbacked import decide

    assert decide("lt", _size(), 0) is False


def test_size_compared_with_zero_flipped():
    from metatrace.metas.unbacked import decide

    assert decide("le", 0, _size()) is True


def test_size_positive_is_undecided():
    from metatrace.metas.unbacked import decide

    assert decide("gt", _size(), 0) is None


def test_size_one_is_undecided_outside_broadcasting():
    from metatrace.metas.unbacked import decide

    assert decide("eq", _size(), 1) is None


def test_two_sizes_are_undecided():
    from metatrace.metas.unbacked import decide

    assert decide("eq", _size(), _size()) is None


def test_item_value_is_not_a_size():
    from thunder.core.proxies import IntegerProxy
    from thunder.core.trace import TraceCtx, tracectx

    from metatrace.metas.unbacked import decide

    with tracectx(TraceCtx()):
        value = IntegerProxy(value=None)  # what item() returns: no value, no range
    assert decide("ge", value, 0) is None


def _set_negative_to_zero(x):
    y = x * 2
    y[y < 0] = 0  # a mask computed in the function, a number assigned
    return y


def _set_masked_to_number(x, m):
    y = x.clone()
    y[m] = 3.0
    return y * x


@pytest.mark.parametrize("fn", [_set_negative_to_zero, _set_masked_to_number], ids=["mask_of_y", "mask_argument"])
def test_assigning_a_number_through_a_mask_serves_every_mask_and_shape(enabled, fn):
    # x[mask] = number needs no count (thunder writes it as a where): one compile, eager's values
    # and gradients
    jf = thunder.jit(fn, cache="symbolic values")
    generator = torch.Generator().manual_seed(3)
    for shape in SHAPES:
        for m in _masks(shape, generator):
            x = torch.randn(shape, generator=generator, requires_grad=True)
            args = (x,) if fn is _set_negative_to_zero else (x, m)
            expected, actual = fn(*args), jf(*args)
            torch.testing.assert_close(actual, expected)
            (expected_grad,) = torch.autograd.grad(expected.sum(), x)
            (actual_grad,) = torch.autograd.grad(actual.sum(), x)
            torch.testing.assert_close(actual_grad, expected_grad)
    assert thunder.cache_misses(jf) == 1


def _double_masked(x, m):
    y = x.clone()
    y[m] = y[m] * 2  # a tensor of the mask's count assigned (thunder's copy_with_setitem)
    return y


def _assign_sine_of_other_read(x, m):
    y = x * 1
    y[m] = torch.sin(x[m])  # the value read through the mask from another tensor
    return y.sum(0) * x


ASSIGNMENTS = {"double_masked": _double_masked, "assign_sine_of_other_read": _assign_sine_of_other_read}


@pytest.mark.parametrize("name", sorted(ASSIGNMENTS))
def test_assigning_a_tensor_through_a_mask_serves_every_mask_and_shape(enabled, name):
    # the gradient of ``y[m] = v`` reads ``g[m]`` again: its count and v's are one op's on one mask
    jf = _run(ASSIGNMENTS[name], SHAPES, seed=4)
    assert thunder.cache_misses(jf) == 1


@pytest.mark.parametrize("name", sorted(ASSIGNMENTS))
def test_assigning_a_tensor_through_a_mask_passes_both_checkers(enabled, name):
    jf = _run(ASSIGNMENTS[name], SHAPES[:1], seed=4)
    for trace in (thunder.last_traces(jf)[-1], thunder.last_backward_traces(jf)[-1]):
        metatrace.check_trace(trace)


def _assign_through_another_mask(x, m):
    y = x.clone()
    v = y[m] * 2
    m = m.logical_not()  # another mask: eager raises unless both have one count
    y[m] = v
    return y


def test_assigning_through_a_mask_of_another_count_is_not_decided(enabled):
    jf = thunder.jit(_assign_through_another_mask, cache="symbolic values")
    with pytest.raises(DataDependentError):
        jf(torch.randn(3, 4, requires_grad=True), torch.rand(3, 4) > 0.5)


def test_assigning_through_a_mask_of_another_count_raises_without_grad(enabled):
    # no gradient, no decision: torch's index_put raises at run time, as in eager
    jf = thunder.jit(_assign_through_another_mask, cache="symbolic values")
    m = torch.tensor([[True, True, False, False]])
    with pytest.raises(RuntimeError):
        jf(torch.randn(1, 4), torch.tensor([[True, True, True, False]]))
    torch.testing.assert_close(jf(torch.ones(1, 4), m), _assign_through_another_mask(torch.ones(1, 4), m))
