"""Numbers derived from sizes stay symbolic (issue 17): floats, sqrt, abs/min/max, interpolate, einsum.

Each example is jitted under ``cache="symbolic values"`` and called over several sizes or values;
every result must equal eager PyTorch's, the number of compiles is bounded (one more where a size
is 0 or 1, or where a decision on a number goes the other way), and every trace passes both trace
checkers (metatrace's strict one: every size symbol defined; thunder's ``check_trace``).
Before this change each example compiled once per size (``k.shape[2] == 8``: ``math.sqrt`` read
the size through ``__float__``; ``n == 3``: ``abs`` and ``float(n)`` pinned ``n``).
"""

from __future__ import annotations

import math

import pytest
import thunder
import torch
import torch.nn.functional as F

import metatrace
from metatrace.checker import _thunder_check_trace, check_trace
from fuzz_programs import _same


def _run(fn, calls):
    jf = thunder.jit(fn, cache="symbolic values")
    eager, got = [], []
    for args in calls:
        eager.append(fn(*args))
        got.append(jf(*args))
    return eager, got, jf


def _traces(jf) -> list:
    return [*thunder.last_prologue_traces(jf), *thunder.last_traces(jf), *(thunder.last_backward_traces(jf) or [])]


def _metatrace_check_fails(jf) -> list[str]:
    failing = []
    for trace in _traces(jf):
        try:
            check_trace(trace, thunder_checks=False)
        except Exception as e:  # noqa: BLE001
            failing.append(f"{type(e).__name__}: {e}")
    return failing


def _thunder_check_fails(jf) -> list[str]:
    failing = []
    for trace in _traces(jf):
        try:
            _thunder_check_trace(trace)
        except Exception as e:  # noqa: BLE001
            failing.append(f"{type(e).__name__}: {e}")
    return failing


def _bitwise_same(a, b) -> bool:
    """Equal tensors, NaN where eager has NaN, and the same sign bits (-0.0 is not 0.0)."""
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_bitwise_same(x, y) for x, y in zip(a, b))
    return (
        a.shape == b.shape
        and a.dtype == b.dtype
        and torch.equal(torch.isnan(a), torch.isnan(b))
        and torch.equal(torch.nan_to_num(a), torch.nan_to_num(b))
        and torch.equal(torch.signbit(a), torch.signbit(b))
    )


def _check_raises_as_eager(fn, valid, invalid, error: type[Exception]) -> None:
    """``fn(torch.ones(2), n)`` jitted: as eager on ``valid``, then raising ``error`` on ``invalid`` as eager does."""
    jf = thunder.jit(fn, cache="symbolic values")
    assert _same(jf(torch.ones(2), valid), fn(torch.ones(2), valid))
    with pytest.raises(error):
        fn(torch.ones(2), invalid)
    with pytest.raises(error):
        jf(torch.ones(2), invalid)


def _qk(n):
    g = torch.Generator().manual_seed(n)
    return torch.randn(2, 3, n, generator=g), torch.randn(2, 3, n, generator=g)


# ---------------------------------------------------------------------------------------------
# 1. attention's 1 / sqrt(d)
# ---------------------------------------------------------------------------------------------


def _scaled_scores(q, k):
    return (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))


@pytest.fixture
def sqrt_scale(enabled):
    return _run(_scaled_scores, [_qk(n) for n in (4, 8, 16, 9)])


def test_sqrt_of_a_size_matches_eager(sqrt_scale):
    eager, got, _ = sqrt_scale
    assert all(_same(e, g) for e, g in zip(eager, got))


def test_sqrt_of_a_size_compiles_once(sqrt_scale):
    assert thunder.cache_misses(sqrt_scale[2]) == 1  # before: 4 (k.shape[2] == 8, ...)


def test_sqrt_of_a_size_passes_metatrace_checker(sqrt_scale):
    assert _metatrace_check_fails(sqrt_scale[2]) == []


def test_sqrt_of_a_size_passes_thunder_checker(sqrt_scale):
    assert _thunder_check_fails(sqrt_scale[2]) == []


def test_sqrt_of_a_size_is_recorded_as_number_ops(sqrt_scale):
    text = str(thunder.last_traces(sqrt_scale[2])[0])
    assert "prims.convert_element_type(" in text and "prims.sqrt(" in text and "prims.div(1.0, " in text


def test_sqrt_of_a_size_with_gradients(enabled):
    jf = thunder.jit(_scaled_scores, cache="symbolic values")
    for n in (4, 8, 9):
        q, k = (t.requires_grad_() for t in _qk(n))
        expected = _scaled_scores(q, k)
        expected.sum().backward()
        eager_grads = (q.grad, k.grad)
        q.grad = k.grad = None
        got = jf(q, k)
        got.sum().backward()
        assert _same(expected, got)
        assert _same(eager_grads, (q.grad, k.grad))
    assert thunder.cache_misses(jf) == 1
    assert _metatrace_check_fails(jf) == []
    assert _thunder_check_fails(jf) == []


# ---------------------------------------------------------------------------------------------
# 2. abs, min, max of sizes; a factory's fill value from a number
# ---------------------------------------------------------------------------------------------


def _abs_min_max(x, n):
    return (
        torch.zeros(max(x.shape[0], n)),
        torch.full((min(x.shape[0], n),), float(n)),
        x[: abs(n - x.shape[0])],
    )


@pytest.fixture
def abs_min_max(enabled):
    return _run(_abs_min_max, [(torch.arange(5.0), n) for n in (3, 2, 4, 1, 7, 9)])


def test_abs_min_max_match_eager(abs_min_max):
    eager, got, _ = abs_min_max
    assert all(_same(e, g) for e, g in zip(eager, got))


def test_abs_min_max_compile_once_per_side(abs_min_max):
    # n < x.shape[0] and n > x.shape[0]: before, one compile per n (n == 3, n == 2, ...)
    assert thunder.cache_misses(abs_min_max[2]) == 2


def test_abs_min_max_are_guarded_by_relations(abs_min_max):
    text = "\n".join(map(str, metatrace.explain(abs_min_max[2])))
    assert "n < " in text and "n > " in text
    assert "n == " not in text and "pinned" not in text


def test_abs_min_max_pass_metatrace_checker(abs_min_max):
    assert _metatrace_check_fails(abs_min_max[2]) == []


def test_abs_min_max_pass_thunder_checker(abs_min_max):
    assert _thunder_check_fails(abs_min_max[2]) == []


def test_fill_value_from_a_number_stays_an_input(enabled):
    fn = lambda x, n: x.new_full((n,), n / 2)  # noqa: E731
    eager, got, jf = _run(fn, [(torch.ones(3), n) for n in (3, 4, 5, 7)])
    assert all(_same(e, g) for e, g in zip(eager, got))
    assert thunder.cache_misses(jf) == 1


def test_new_full_size_from_a_number_is_not_baked_in(enabled):
    """thunder's automatic registration ran torch's meta on the numbers' values, unguarded: the
    result's size stayed the first call's (a wrong result for the second)."""
    fn = lambda x, n: x * x.new_full((n,), 2.0).shape[0]  # noqa: E731
    eager, got, jf = _run(fn, [(torch.ones(2), n) for n in (3, 4, 0)])
    assert all(_same(e, g) for e, g in zip(eager, got))
    assert thunder.cache_misses(jf) == 1


@pytest.mark.parametrize("method", ["new_zeros", "new_ones", "new_empty"])
def test_new_factory_size_from_a_number(enabled, method):
    fn = lambda x, n: x * getattr(x, method)((n, 2)).shape[0]  # noqa: E731
    eager, got, jf = _run(fn, [(torch.ones(2), n) for n in (3, 4, 1)])
    assert all(_same(e, g) for e, g in zip(eager, got))
    assert thunder.cache_misses(jf) == 1


@pytest.mark.parametrize("method", ["new_zeros", "new_ones", "new_empty"])
def test_new_factory_sizes_as_separate_arguments(enabled, method):
    """``x.new_zeros(*x.shape[:-1], 3)`` (litgpt's LoRA ``zero_pad``): the sizes as varargs."""
    fn = lambda x: getattr(x, method)(*x.shape[:-1], 3).shape[1] * x  # noqa: E731
    eager, got, jf = _run(fn, [(torch.ones(2, T, 4),) for T in (3, 5, 8)])
    assert all(_same(e, g) for e, g in zip(eager, got))
    assert thunder.cache_misses(jf) == 1


def test_auto_registered_op_guards_the_numbers_it_bakes_in(enabled):
    """``torch.roll`` is registered automatically (torch's meta on values): its shift is baked
    in, guarded by equality (before: read silently, harmless for roll, whose result's shape does
    not depend on it, a wrong result for ``new_empty((n,))``)."""
    fn = lambda x, n: torch.roll(x, n)  # noqa: E731
    eager, got, jf = _run(fn, [(torch.arange(4.0), n) for n in (1, 2, 1)])
    assert all(_same(e, g) for e, g in zip(eager, got))
    assert thunder.cache_misses(jf) == 2
    assert "n == 1 (a number argument of a torch op thunder registered automatically" in str(metatrace.explain(jf)[0])


def test_new_full_with_a_gradient(enabled):
    fn = lambda x, n: (x * 2).sum() + x.new_full((n,), n / 2).sum()  # noqa: E731
    jf = thunder.jit(fn, cache="symbolic values")
    for n in (3, 4):
        x = torch.ones(3, requires_grad=True)
        expected = fn(x, n)
        expected.backward()
        eager_grad, x.grad = x.grad, None
        got = jf(x, n)
        got.backward()
        assert _same(expected, got)
        assert _same(eager_grad, x.grad)
    assert thunder.cache_misses(jf) == 1


def test_new_full_with_a_negative_size_raises_as_eager(enabled):
    _check_raises_as_eager(lambda x, n: x.new_full((n,), 1.0), 2, -1, RuntimeError)


def test_fill_value_from_a_size(enabled):
    fn = lambda x: x.new_full((x.shape[0],), x.shape[0] / 2) + float(x.shape[0])  # noqa: E731
    eager, got, jf = _run(fn, [(torch.ones(n),) for n in (3, 4, 5, 7)])
    assert all(_same(e, g) for e, g in zip(eager, got))
    assert thunder.cache_misses(jf) == 1
    assert _metatrace_check_fails(jf) == []
    assert _thunder_check_fails(jf) == []


# ---------------------------------------------------------------------------------------------
# 3. interpolate, Upsample, einsum
# ---------------------------------------------------------------------------------------------

IMAGES = [(2, 3, 4, 4), (2, 3, 5, 6), (2, 3, 8, 3), (2, 3, 7, 7)]


def _images():
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(*shape, generator=g),) for shape in IMAGES]


CASES = {
    # scale 2.0 and 3.0 expand, 1.5 and 2.5 sample (thunder's two nearest paths): one entry each
    "interpolate_scale_factor": (
        lambda x, s: F.interpolate(x, scale_factor=s),
        lambda: [(torch.randn(2, 3, 4, 4), s) for s in (2.0, 1.5, 3.0, 2.5)],
        2,
    ),
    "interpolate_scale_factor_over_sizes": (
        lambda x, s: F.interpolate(x, scale_factor=s),
        lambda: [(x, 2.0) for (x,) in _images()],
        1,
    ),
    "interpolate_size": (
        lambda x: F.interpolate(x, size=(2 * x.shape[2], 2 * x.shape[3])),
        _images,
        1,
    ),
    "upsample": (torch.nn.Upsample(scale_factor=2), _images, 1),
    "einsum": (
        lambda a, b: torch.einsum("bij,bjk->bik", a, b),
        lambda: [(torch.randn(b, i, j), torch.randn(b, j, k)) for b, i, j, k in ((2, 3, 4, 5), (3, 4, 5, 6),
                                                                                 (2, 5, 3, 4), (4, 2, 2, 3))],
        1,
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_decomposition_matches_eager(enabled, name):
    fn, calls, _ = CASES[name]
    eager, got, _ = _run(fn, calls())
    assert all(_same(e, g) for e, g in zip(eager, got))


@pytest.mark.parametrize("name", CASES)
def test_decomposition_compiles(enabled, name):
    fn, calls, compiles = CASES[name]
    _, _, jf = _run(fn, calls())
    assert thunder.cache_misses(jf) == compiles  # before: one per call


@pytest.mark.parametrize("name", CASES)
def test_decomposition_passes_metatrace_checker(enabled, name):
    fn, calls, _ = CASES[name]
    _, _, jf = _run(fn, calls())
    assert _metatrace_check_fails(jf) == []


@pytest.mark.parametrize("name", CASES)
def test_decomposition_passes_thunder_checker(enabled, name):
    fn, calls, _ = CASES[name]
    _, _, jf = _run(fn, calls())
    assert _thunder_check_fails(jf) == []


def test_interpolate_output_size_is_a_symbol(enabled):
    _, _, jf = _run(CASES["interpolate_size"][0], _images()[:1])
    text = "\n".join(map(str, metatrace.explain(jf)))
    # no guard pins the size (``x.shape[2] == 8``); ``... % x.shape[2] == 0`` is a divisibility check
    assert "int(" in text and not any(line.strip().startswith("x.shape[2] ==") for line in text.splitlines())


def test_einsum_of_three_operands_pins_the_sizes(enabled):
    """The contraction order of three operands depends on their sizes: each is guarded by
    equality (one entry per size combination), and the results stay eager's."""
    fn = lambda a, b, c: torch.einsum("ij,jk,kl->il", a, b, c)  # noqa: E731
    calls = [(torch.randn(i, j), torch.randn(j, k), torch.randn(k, l)) for i, j, k, l in ((2, 3, 4, 5), (3, 4, 5, 6))]
    eager, got, jf = _run(fn, calls)
    assert all(_same(e, g) for e, g in zip(eager, got))
    assert thunder.cache_misses(jf) == 2


def test_einsum_of_three_operands_names_why_it_pins(enabled):
    fn = lambda a, b, c: torch.einsum("ij,jk,kl->il", a, b, c)  # noqa: E731
    _, _, jf = _run(fn, [(torch.randn(2, 3), torch.randn(3, 4), torch.randn(4, 5))])
    text = "\n".join(map(str, metatrace.explain(jf)))
    assert "a.shape[0] == 2 (torch.einsum's contraction order" in text


# ---------------------------------------------------------------------------------------------
# 4. sweeps against eager: rounding, NaN, -0.0, integers beyond 2**53
# ---------------------------------------------------------------------------------------------


def _scaled(x):
    return x * (1.0 / math.sqrt(x.shape[-1]))


def test_scale_sweep_is_bitwise_eager(enabled):
    eager, got, jf = _run(_scaled, [(torch.ones(n),) for n in range(1, 65)])
    assert all(_bitwise_same(e, g) for e, g in zip(eager, got))
    assert thunder.cache_misses(jf) <= 2  # size 1 broadcasts


def _roundtrip_branch(x):
    # 1 / sqrt(n) * sqrt(n) is 1.0 for some n and not for their neighbours (n = 2: 1.0000000000000002)
    d = math.sqrt(x.shape[0])
    if (1.0 / d) * d == 1.0:
        return x + 1
    return x - 1


def test_rounding_decision_sweep_matches_eager(enabled):
    calls = [(torch.zeros(n),) for n in range(2, 40)]
    outcomes = {(1.0 / math.sqrt(n)) * math.sqrt(n) == 1.0 for n in range(2, 40)}
    assert outcomes == {True, False}  # the sweep crosses the rounding both ways
    eager, got, jf = _run(_roundtrip_branch, calls)
    assert all(_bitwise_same(e, g) for e, g in zip(eager, got))
    assert thunder.cache_misses(jf) == 2  # one entry per outcome, guarded exactly


def _float_branch(x, s):
    if s >= 0:
        return x * math.sqrt(s)  # sqrt(-0.0) is -0.0
    return x * 0 + 5


FLOATS = [4.0, 0.0, -0.0, float("nan"), 2.0, -1.0, float("inf"), 9.0, -0.0]


def test_float_branch_with_nan_and_signed_zero_matches_eager(enabled):
    eager, got, _ = _run(_float_branch, [(torch.ones(3), s) for s in FLOATS])
    assert all(_bitwise_same(e, g) for e, g in zip(eager, got))


def test_float_branch_with_nan_and_signed_zero_compiles_per_side(enabled):
    _, _, jf = _run(_float_branch, [(torch.ones(3), s) for s in FLOATS])
    assert thunder.cache_misses(jf) == 3  # s >= 0, s < 0, s is NaN


def _inverse_sqrt_branch(x, s):
    y = 1.0 / math.sqrt(s) if s > 0 else -1.0
    if y < 0.5:
        return x * 2
    return x * y


def test_inverse_sqrt_decision_on_a_float_argument(enabled):
    values = [1.0, 4.0, 5.0, 3.0, 0.0, -0.0, float("nan"), 4.0000001, 3.9999999, 100.0]
    eager, got, jf = _run(_inverse_sqrt_branch, [(torch.ones(3), s) for s in values])
    assert all(_bitwise_same(e, g) for e, g in zip(eager, got))
    assert thunder.cache_misses(jf) == 4  # y >= 0.5, y < 0.5, s <= 0, NaN


def test_float_of_an_int_beyond_2_53_is_exact(enabled):
    def fn(x, n):
        if float(n) == n:
            return x + 1
        return x - 1

    eager, got, _ = _run(fn, [(torch.zeros(2), n) for n in (3, 2**53 + 1, 5, 2**60 + 1, 4)])
    assert all(_bitwise_same(e, g) for e, g in zip(eager, got))


def test_true_division_of_an_int_beyond_2_53_is_exact(enabled):
    def fn(x, n):
        if n / 1 == n:
            return x + 1
        return x - 1

    eager, got, _ = _run(fn, [(torch.zeros(2), n) for n in (3, 2**53 + 1, 5)])
    assert all(_bitwise_same(e, g) for e, g in zip(eager, got))


def test_sqrt_of_a_negative_number_raises_as_eager(enabled):
    _check_raises_as_eager(lambda x, n: x * math.sqrt(n), 4, -4, ValueError)


class _ScaledConv(torch.nn.Module):
    """A conv net scaling by ``1 / sqrt(length)``: the backward converts a cotangent to float."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv1d(4, 8, 3, padding=1)
        self.up = torch.nn.Upsample(scale_factor=2)

    def forward(self, x, w):
        h = self.up(torch.relu(self.conv(x))) * (1.0 / math.sqrt(x.shape[-1]))
        return (h.mean(-1) @ w).sum()


def test_backward_float_of_a_cotangent_does_not_pin_the_length(enabled):
    """Grad on ``w`` only: the grad transform's ``float()`` range guard on a number computed from
    a cotangent cannot be projected to the inputs; it pinned every length (one compile each)."""
    torch.manual_seed(0)
    model = _ScaledConv()
    jm = thunder.jit(model, cache="symbolic values")
    for length in (5, 9, 16):
        x, w = torch.randn(2, 4, length), torch.randn(8, 3, requires_grad=True)
        (expected,) = torch.autograd.grad(model(x, w), w)
        (got,) = torch.autograd.grad(jm(x, w), w)
        torch.testing.assert_close(got, expected)
    assert thunder.cache_misses(jm) == 1


def test_explain_shows_the_float_exactness_bound_as_a_power_of_two(enabled):
    # float(n) is exact for |n| <= 2**53: the guard keeping an entry to that range reads as such
    jf = thunder.jit(lambda x, n: x * float(n), cache="symbolic values")
    jf(torch.ones(2), 3)
    (entry,) = metatrace.explain(jf)
    assert "-2**53 <= n <= 2**53" in entry.guards
