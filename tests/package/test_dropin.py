"""Drop-in: what runs under cache="constant values" runs under "symbolic values" with metatrace.

Every case is called with several values and compared with eager PyTorch (a reused cache entry
must never return a wrong result); the compile counts say where an entry is reused.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import thunder
import thunder.core.interpreter as interpreter
import thunder.core.jit_ext as jit_ext
import thunder.torch as ltorch
from thunder.core.proxies import NumberProxy, TensorProxy

import metatrace
from opinfo_harness import iter_cases, run_shared

SYMBOLIC = "symbolic values"


def jit_and_compare(fn, calls):
    """Calls ``thunder.jit(fn)`` on each argument tuple, comparing every result with eager."""
    jf = thunder.jit(fn, cache=SYMBOLIC)
    for args in calls:
        torch.testing.assert_close(jf(*args), fn(*args))
    return jf


def same_metadata(got: torch.Tensor, want: torch.Tensor) -> bool:
    return (got.shape, got.dtype, got.device) == (want.shape, want.dtype, want.device)


# ---------------------------------------------------------------------------------------------
# Strings, devices, dtypes, None, Ellipsis: static, guarded by value
# ---------------------------------------------------------------------------------------------


def test_conv1d_module_runs_and_reuses_over_lengths(enabled):
    m = torch.nn.Conv1d(3, 4, 3)
    jf = jit_and_compare(m, [(torch.randn(1, 3, 8),), (torch.randn(1, 3, 10),)])
    assert thunder.cache_misses(jf) == 1


class _Loss(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.reduction = "sum"

    def forward(self, x, y):
        return F.mse_loss(x, y, reduction=self.reduction)


def test_module_string_attribute_change_misses(enabled):
    m = _Loss()
    jf = thunder.jit(m, cache=SYMBOLIC)
    x, y = torch.randn(4), torch.randn(4)
    torch.testing.assert_close(jf(x, y), m(x, y))
    m.reduction = "mean"
    torch.testing.assert_close(jf(x, y), m(x, y))
    assert thunder.cache_misses(jf) == 2


def test_string_argument_is_guarded_by_value(enabled):
    fn = lambda a, mode: F.gelu(a, approximate=mode)  # noqa: E731
    a = torch.randn(5)
    jf = jit_and_compare(fn, [(a, "none"), (a, "tanh"), (a, "none"), (torch.randn(7), "none")])
    assert thunder.cache_misses(jf) == 2


def test_rounding_mode_string(enabled):
    fn = lambda a, b, m: torch.div(a, b, rounding_mode=m)  # noqa: E731
    a, b = torch.tensor([-7.0, 7.0]), torch.tensor([2.0, 2.0])
    jf = jit_and_compare(fn, [(a, b, "trunc"), (a, b, "floor")])
    assert thunder.cache_misses(jf) == 2


def test_einsum_equation_argument(enabled):
    fn = lambda eq, a, b: torch.einsum(eq, a, b)  # noqa: E731
    a, b = torch.randn(2, 3), torch.randn(3, 4)
    jf = jit_and_compare(fn, [("ij,jk->ik", a, b), ("ij,jk->ki", a, b), ("ij,jk->ik", a, b)])
    assert thunder.cache_misses(jf) == 2


FACTORIES = {
    "zeros": lambda n, dev: torch.zeros(n, device=dev),
    "ones": lambda n, dev: torch.ones(n, 2, device=dev, dtype=torch.float64),
    "full": lambda n, dev: torch.full((n,), 2.5, device=dev),
    "arange": lambda n, dev: torch.arange(n, device=dev),
    "empty": lambda n, dev: torch.empty(n, device=dev),
    "randn": lambda n, dev: torch.randn(n, device=dev),
    "rand": lambda n, dev: torch.rand(n, 3, device=dev),
    "randint": lambda n, dev: torch.randint(0, 5, (n,), device=dev),
}
RANDOM = {"empty", "randn", "rand", "randint"}


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_factory_with_device_string_reuses_over_sizes(enabled, name):
    fn = FACTORIES[name]
    jf = thunder.jit(fn, cache=SYMBOLIC)
    for n in (3, 4):
        got, want = jf(n, "cpu"), fn(n, "cpu")
        if name in RANDOM:
            assert same_metadata(got, want)
        else:
            torch.testing.assert_close(got, want)
    assert thunder.cache_misses(jf) == 1


def test_dtype_argument_is_guarded(enabled):
    fn = lambda n, dt: torch.zeros(n, dtype=dt)  # noqa: E731
    jf = jit_and_compare(fn, [(3, torch.float64), (3, torch.int32), (4, torch.float64)])
    assert thunder.cache_misses(jf) == 2


def test_device_object_argument(enabled):
    fn = lambda n, dev: torch.ones(n, device=dev)  # noqa: E731
    jf = jit_and_compare(fn, [(3, torch.device("cpu")), (5, torch.device("cpu"))])
    assert thunder.cache_misses(jf) == 1


def test_none_argument_against_a_number(enabled):
    fn = lambda a, d: torch.sum(a, dim=d)  # noqa: E731
    a = torch.randn(3, 4)
    jf = jit_and_compare(fn, [(a, None), (a, 0), (a, None)])
    assert thunder.cache_misses(jf) == 2


def test_ellipsis_argument(enabled):
    fn = lambda a, e: a[e, 0]  # noqa: E731
    jf = jit_and_compare(fn, [(torch.randn(3, 4), Ellipsis), (torch.randn(3, 5), Ellipsis)])
    assert thunder.cache_misses(jf) == 1


# ---------------------------------------------------------------------------------------------
# Slices: symbolic numbers, guarded
# ---------------------------------------------------------------------------------------------


def test_slice_argument_reuses_across_bounds(enabled):
    fn = lambda a, s: a[s]  # noqa: E731
    a = torch.randn(8)
    jf = jit_and_compare(fn, [(a, slice(1, 5)), (a, slice(2, 6)), (a, slice(3, 7))])
    assert thunder.cache_misses(jf) == 1


def test_slice_argument_values_are_right_everywhere(enabled):
    fn = lambda a, s: a[s]  # noqa: E731
    a = torch.randn(8)
    slices = [slice(1, 5), slice(-3, 7), slice(0, 100), slice(5, 1), slice(-8, 2), slice(0, 8, 2), slice(1, 8, 3)]
    jit_and_compare(fn, [(a, s) for s in slices])


def test_slice_with_none_parts(enabled):
    fn = lambda a, s: a[s]  # noqa: E731
    a = torch.randn(8)
    slices = [slice(1, None), slice(None, 3), slice(None, None, 2), slice(-3, None), slice(2, None)]
    jf = jit_and_compare(fn, [(a, s) for s in slices])
    assert thunder.cache_misses(jf) >= 3  # three shapes of slice (start, stop, step None or not)


def test_slice_structure_change_misses(enabled):
    fn = lambda a, s: a[s]  # noqa: E731
    a = torch.randn(8)
    jf = jit_and_compare(fn, [(a, slice(1, 5)), (a, slice(1, None))])
    assert thunder.cache_misses(jf) == 2


def test_slices_inside_a_tuple_index(enabled):
    fn = lambda a, idx: a[idx]  # noqa: E731
    a = torch.randn(4, 6)
    jit_and_compare(fn, [(a, (slice(0, 2), 1)), (a, (slice(1, 3), 2)), (a, (slice(2, 4), slice(1, 5)))])


def test_slice_over_tensor_sizes(enabled):
    fn = lambda a, s: a[s] * 2  # noqa: E731
    jf = jit_and_compare(fn, [(torch.randn(8), slice(1, 5)), (torch.randn(10), slice(2, 9))])
    assert thunder.cache_misses(jf) == 1


# ---------------------------------------------------------------------------------------------
# Numbers as indices into Python tuples, len, divmod
# ---------------------------------------------------------------------------------------------


def test_shape_indexed_by_a_number(enabled):
    fn = lambda x, d: x * x.shape[d]  # noqa: E731
    x = torch.randn(3, 4)
    jf = jit_and_compare(fn, [(x, 0), (x, 1), (x, 0), (x, -1)])
    assert thunder.cache_misses(jf) == 3


def test_size_of_a_number_dim(enabled):
    fn = lambda x, d: x * x.size(d)  # noqa: E731
    x = torch.randn(3, 4)
    jf = jit_and_compare(fn, [(x, 0), (x, 1), (x, 1)])
    assert thunder.cache_misses(jf) == 2


def test_list_indexed_by_a_number(enabled):
    fn = lambda x, i: x * [2.0, 3.0, 5.0][i]  # noqa: E731
    x = torch.randn(3)
    jf = jit_and_compare(fn, [(x, 0), (x, 2), (x, 0)])
    assert thunder.cache_misses(jf) == 2


def test_len_of_a_tensor_is_symbolic(enabled):
    fn = lambda x: x * len(x)  # noqa: E731
    jf = jit_and_compare(fn, [(torch.randn(3),), (torch.randn(4),)])
    assert thunder.cache_misses(jf) == 1


def test_len_as_a_size(enabled):
    fn = lambda x: torch.zeros(len(x), 2) + x[:1, None]  # noqa: E731
    jf = jit_and_compare(fn, [(torch.randn(3),), (torch.randn(5),)])
    assert thunder.cache_misses(jf) == 1


def test_range_of_len(enabled):
    def fn(x):
        total = x[0]
        for i in range(1, len(x)):
            total = total + x[i]
        return total

    jit_and_compare(fn, [(torch.randn(3),), (torch.randn(5),)])


def test_divmod_of_a_number(enabled):
    fn = lambda x, n: x[: divmod(n, 3)[0]] * divmod(n, 3)[1]  # noqa: E731
    x = torch.randn(8)
    jit_and_compare(fn, [(x, 7), (x, 8), (x, 9), (x, 16)])


def test_torch_tensor_of_a_list_of_numbers(enabled):
    fn = lambda n: torch.tensor([n, n + 1])  # noqa: E731
    jit_and_compare(fn, [(3,), (4,), (3,)])


def test_torch_tensor_of_a_number_is_symbolic(enabled):
    fn = lambda x, n: x * torch.tensor(n)  # noqa: E731
    x = torch.ones(2)
    jf = jit_and_compare(fn, [(x, 3), (x, 4)])
    assert thunder.cache_misses(jf) == 1


def test_number_type_change_misses(enabled):
    fn = lambda n: torch.tensor([n])  # noqa: E731
    jf = jit_and_compare(fn, [(3,), (3.0,)])
    assert thunder.cache_misses(jf) == 2


def test_torch_tensor_of_a_number_keeps_its_type(enabled):
    fn = lambda n: torch.tensor(n)  # noqa: E731
    jit_and_compare(fn, [(3,), (2.5,), (True,)])


def test_full_with_a_tensor_fill_value(enabled):
    fn = lambda x, v: x + torch.full((2, 2), v)  # noqa: E731
    jf = jit_and_compare(fn, [(torch.ones(2), torch.tensor(2.0)), (torch.ones(2), torch.tensor(3.0))])
    assert thunder.cache_misses(jf) == 1


# ---------------------------------------------------------------------------------------------
# Python number semantics on symbolic numbers
# ---------------------------------------------------------------------------------------------

NUMBER_OPS = {
    "floordiv": lambda a, b: a // b,
    "mod": lambda a, b: a % b,
    "divmod": lambda a, b: divmod(a, b)[0] + divmod(a, b)[1],
    "floor": lambda a, b: math.floor(a),
    "ceil": lambda a, b: math.ceil(a),
    "trunc": lambda a, b: math.trunc(a),
    "round": lambda a, b: round(a),
    "round_digits": lambda a, b: round(a, 1),
    "pow": lambda a, b: a**b,
    "copysign": lambda a, b: math.copysign(a, b),
}


@pytest.mark.parametrize("name", sorted(NUMBER_OPS))
@pytest.mark.parametrize("values", [((2.5, -1.5), (-3.25, 2.0), (7.75, 4.0)), ((7, -2), (-9, 4), (2, 3))], ids=["float", "int"])
def test_python_number_semantics(enabled, name, values):
    op = NUMBER_OPS[name]
    fn = lambda x, a, b: x * op(a, b)  # noqa: E731
    x = torch.ones(2, dtype=torch.float64)
    jit_and_compare(fn, [(x, a, b) for a, b in values])


def test_float_floordiv_is_symbolic(enabled):
    fn = lambda x, a, b: x * (a // b)  # noqa: E731
    x = torch.ones(2, dtype=torch.float64)
    jf = jit_and_compare(fn, [(x, 7.5, 2.0), (x, -9.0, 4.0), (x, 1.0, -3.0)])
    assert thunder.cache_misses(jf) == 1


def test_floor_of_a_float_is_symbolic(enabled):
    fn = lambda x, a: x * math.floor(a)  # noqa: E731
    x = torch.ones(2, dtype=torch.float64)
    jf = jit_and_compare(fn, [(x, 2.5), (x, -3.25)])
    assert thunder.cache_misses(jf) == 1


def test_int_pow_guards_the_sign_of_the_exponent(enabled):
    fn = lambda x, a, b: x * (a**b)  # noqa: E731
    x = torch.ones(2, dtype=torch.float64)
    jf = jit_and_compare(fn, [(x, 7, -2), (x, 2, 3), (x, 3, 2), (x, 2, -1)])
    assert thunder.cache_misses(jf) == 2


def test_arange_length_with_a_step_is_the_ceiling(enabled):
    # clang.arange's length is math.ceil((stop - start) / step): 4 for arange(0, 7, 2)
    fn = lambda x: torch.arange(0, x.shape[0], 2) + x[::2]  # noqa: E731
    jf = jit_and_compare(fn, [(torch.randn(7),), (torch.randn(8),), (torch.randn(9),)])
    assert thunder.cache_misses(jf) == 1


# ---------------------------------------------------------------------------------------------
# thunder's own opinfo samples of the factory ops, all through one jitted function per op
# ---------------------------------------------------------------------------------------------

FACTORY_OPINFOS = ["arange", "empty", "full", "full_like", "ones", "rand", "randint", "randn", "tensor", "zeros", "zeros_like"]


@pytest.mark.parametrize("name", FACTORY_OPINFOS)
def test_factory_opinfo_samples_share_one_function(enabled, name):
    cases = list(iter_cases(6, names={name}))
    results = run_shared(cases[0][0], [s for _, s in cases], SYMBOLIC)
    assert [r.error for r in results if r.status != "ok"] == []


# ---------------------------------------------------------------------------------------------
# disable() restores thunder
# ---------------------------------------------------------------------------------------------


def _thunder_state():
    names = ("__floor__", "__ceil__", "__trunc__", "__round__", "__pow__", "__rpow__", "__divmod__", "__rdivmod__")
    return (
        tuple(NumberProxy.__dict__[n] for n in names),
        TensorProxy.__dict__["__getattr__"],
        interpreter._default_lookaside_map[len],
        interpreter._default_provenance_tracking_lookaside_map[tuple.__getitem__],
        interpreter._default_provenance_tracking_lookaside_map[list.__getitem__],
        jit_ext.JitCtx.proxify,
        ltorch.tensor.meta,
        ltorch.randint.meta,
        thunder.clang.where,
        thunder.clang.tensor_from_sequence,
        thunder.core.symbol.prims,
        jit_ext._general_jit_lookaside_map[isinstance],
        ltorch._set_grad_enabled_with_warning.meta,
        frozenset(map(id, jit_ext._general_jit_lookaside_map)),
    )


def test_disable_restores_what_dropin_replaced():
    assert not metatrace.is_enabled()
    before = _thunder_state()
    with metatrace.enable():
        assert _thunder_state() != before
    assert _thunder_state() == before


def _multi_dot(a, b, c):
    return torch.linalg.multi_dot([a, b, c])


MULTI_DOT_SHAPES = (((3, 4), (4, 5), (5, 2)), ((3, 4), (4, 5), (5, 2)), ((2, 6), (6, 3), (3, 4)))


def test_multi_dot_runs_with_sizes_baked_in(enabled):
    """thunder's multi_dot refuses symbolic sizes; metatrace guards them by value instead."""
    jf = thunder.jit(_multi_dot, cache="symbolic values")
    for shapes in MULTI_DOT_SHAPES:
        args = [torch.randn(*s, requires_grad=True) for s in shapes]
        eager = [a.detach().clone().requires_grad_(True) for a in args]
        out, expected = jf(*args), _multi_dot(*eager)
        torch.testing.assert_close(out, expected)
        out.sum().backward()
        expected.sum().backward()
        for a, e in zip(args, eager):
            torch.testing.assert_close(a.grad, e.grad)
    assert thunder.cache_misses(jf) == 2  # one entry per shape: the same shapes reuse it


def test_multi_dot_entry_is_guarded_by_its_sizes(enabled):
    jf = thunder.jit(_multi_dot, cache="symbolic values")
    jf(*(torch.randn(*s) for s in MULTI_DOT_SHAPES[0]))
    (entry,) = metatrace.explain(jf)
    assert any(g.startswith("a.shape[0] == 3 (") for g in entry.guards)  # a pin, with its reason


# ---------------------------------------------------------------------------------------------
# NaN: a float NaN baked into a trace is guarded by isnan (nan == nan never holds)
# ---------------------------------------------------------------------------------------------


def _call_and_compare_nan(jf, fn, *args):
    torch.testing.assert_close(jf(*args), fn(*args), equal_nan=True)


def test_nan_baked_into_torch_tensor_data_reuses_its_entry(enabled):
    fn = lambda v: torch.tensor([v, 1.0])  # noqa: E731  (the elements are baked into the trace)
    jf = thunder.jit(fn, cache=SYMBOLIC)
    _call_and_compare_nan(jf, fn, math.nan)
    _call_and_compare_nan(jf, fn, float("nan"))
    assert thunder.cache_misses(jf) == 1


def test_nan_entry_is_not_reused_for_a_number(enabled):
    fn = lambda v: torch.tensor([v, 1.0])  # noqa: E731
    jf = thunder.jit(fn, cache=SYMBOLIC)
    _call_and_compare_nan(jf, fn, math.nan)
    _call_and_compare_nan(jf, fn, 1.0)
    _call_and_compare_nan(jf, fn, math.nan)
    assert thunder.cache_misses(jf) == 2


def test_number_entry_is_not_reused_for_nan(enabled):
    fn = lambda v: torch.tensor([v, 1.0])  # noqa: E731
    jf = thunder.jit(fn, cache=SYMBOLIC)
    _call_and_compare_nan(jf, fn, 2.0)
    _call_and_compare_nan(jf, fn, math.nan)
    assert thunder.cache_misses(jf) == 2


def test_symbolic_float_nan_input_reuses_one_entry(enabled):
    fn = lambda x, v: x * v  # noqa: E731  (v stays symbolic: nothing is baked in)
    jf = thunder.jit(fn, cache=SYMBOLIC)
    x = torch.randn(3)
    for v in (math.nan, math.nan, 1.0, -math.inf):
        _call_and_compare_nan(jf, fn, x, v)
    assert thunder.cache_misses(jf) == 1


def test_self_comparison_of_a_float_is_not_a_tautology(enabled):
    def fn(x, v):
        if v == v:  # false exactly for NaN
            return x * 2
        return x * 3

    jf = thunder.jit(fn, cache=SYMBOLIC)
    x = torch.randn(3)
    for v in (1.0, math.nan, 2.0, math.nan):
        _call_and_compare_nan(jf, fn, x, v)


# ---------------------------------------------------------------------------------------------
# A symbol that returns its number argument unchanged (thunder copies it: shallow_copy)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [(3, 7), (5, 5), (7, 3)])
def test_bilinear_interpolate_to_a_size(enabled, size):
    """ltorch.to(in_w / out_w, float32) returns its number argument: thunder's shallow_copy of it
    was a tensor-only prim."""
    fn = lambda a, size: F.interpolate(a, size=size, mode="bilinear")  # noqa: E731
    jit_and_compare(fn, [(torch.randn(1, 2, 5, 5), size), (torch.randn(1, 2, 6, 4), size)])



def test_bilinear_interpolate_reuses_its_entry_for_the_same_size(enabled):
    fn = lambda a, size: F.interpolate(a, size=size, mode="bilinear")  # noqa: E731
    jf = jit_and_compare(fn, [(torch.randn(1, 2, 5, 5), (3, 7)), (torch.randn(1, 2, 5, 5), (3, 7))])
    assert thunder.cache_misses(jf) == 1


# ---------------------------------------------------------------------------------------------
# A conv net as an nn.Module over image sizes (Conv2d, MaxPool2d, Linear)
# ---------------------------------------------------------------------------------------------

IMAGE_SIZES = (32, 40, 48, 56, 64)


class _ConvNet(torch.nn.Module):
    def __init__(self, adaptive: bool):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.pool = torch.nn.MaxPool2d(2)
        self.conv2 = torch.nn.Conv2d(8, 16, 3, padding=1)
        self.adaptive = torch.nn.AdaptiveAvgPool2d(1) if adaptive else None
        self.fc = torch.nn.Linear(16, 10)

    def forward(self, x):
        x = self.pool(torch.relu(self.conv1(x)))
        x = torch.relu(self.conv2(x))
        x = self.adaptive(x).flatten(1) if self.adaptive is not None else x.mean(dim=(2, 3))
        return self.fc(x)


def _conv_net(adaptive: bool) -> torch.nn.Module:
    torch.manual_seed(0)
    return _ConvNet(adaptive).double()  # float64: the comparisons with eager are not about rounding


@pytest.mark.parametrize("adaptive", [False, True], ids=["mean", "adaptive_avg_pool"])
def test_conv_net_over_image_sizes_compiles_at_most_twice(enabled, adaptive):
    m = _conv_net(adaptive)
    jf = thunder.jit(m, cache=SYMBOLIC)
    with torch.no_grad():
        for s in IMAGE_SIZES:
            x = torch.randn(2, 3, s, s, dtype=torch.float64)
            torch.testing.assert_close(jf(x), m(x))
    assert thunder.cache_misses(jf) <= 2


@pytest.mark.parametrize("adaptive", [False, True], ids=["mean", "adaptive_avg_pool"])
def test_conv_net_training_step_grads_equal_eager(enabled, adaptive):
    import copy

    m = _conv_net(adaptive)
    eager = copy.deepcopy(m)
    jf = thunder.jit(m, cache=SYMBOLIC)
    for s in IMAGE_SIZES:
        x = torch.randn(2, 3, s, s, dtype=torch.float64, requires_grad=True)
        x_eager = x.detach().clone().requires_grad_()
        out, want = jf(x), eager(x_eager)
        torch.testing.assert_close(out, want)
        grad_out = torch.randn_like(want)
        out.backward(grad_out)
        want.backward(grad_out)
        torch.testing.assert_close(x.grad, x_eager.grad)
        for (name, p), q in zip(m.named_parameters(), eager.parameters()):
            torch.testing.assert_close(p.grad, q.grad, msg=lambda msg, name=name: f"{name} at size {s}: {msg}")
            p.grad, q.grad = None, None
    assert thunder.cache_misses(jf) <= 2


@pytest.mark.parametrize(
    "first, then",
    [
        (complex(math.nan, 1.0), complex(math.nan, 1.0)),
        (complex(math.nan, 1.0), complex(math.nan, 2.0)),
        (complex(1.0, math.nan), complex(math.nan, 1.0)),
        (0.0, -0.0),
        (-0.0, 0.0),
        (-0.0, -0.0),
    ],
)
def test_baked_nan_and_signed_zero_are_compared_exactly(enabled, first, then):
    """``(nan+1j) == (nan+1j)`` is False and ``-0.0 == 0.0`` is True: neither may decide reuse."""
    fn = lambda v: torch.tensor([v, 1.0])  # noqa: E731  (the elements are baked into the trace)
    jf = thunder.jit(fn, cache=SYMBOLIC)
    for v in (first, then):
        got, want = jf(v), fn(v)
        torch.testing.assert_close(got, want, equal_nan=True)
        assert torch.equal(torch.view_as_real(got.to(torch.complex64)).signbit(),
                           torch.view_as_real(want.to(torch.complex64)).signbit())


def test_baked_complex_nan_reuses_its_entry(enabled):
    fn = lambda v: torch.tensor([v, 1.0])  # noqa: E731
    jf = thunder.jit(fn, cache=SYMBOLIC)
    for v in (complex(math.nan, 1.0), complex(math.nan, 1.0)):
        torch.testing.assert_close(jf(v), fn(v), equal_nan=True)
    assert thunder.cache_misses(jf) == 1


# ---------------------------------------------------------------------------------------------
# isinstance on numbers, grad mode and autocast flags that are symbolic numbers
# ---------------------------------------------------------------------------------------------


def _add_if_int(a, b, c):
    if isinstance(a, int):
        return a + b
    return b + c


def test_isinstance_of_a_number_argument_is_its_python_type(enabled):
    b, c = torch.randn(2, 2), torch.randn(1, 2)
    jit_and_compare(_add_if_int, [(torch.randn(2, 1), b, c), (2, b, c), (2.5, b, c), (torch.randn(2, 1), b, c)])


def test_unread_tensor_argument_replaced_by_a_number_misses(enabled):
    b, c = torch.randn(2, 2), torch.randn(1, 2)
    jf = jit_and_compare(_add_if_int, [(torch.randn(2, 1), b, c), (3, b, c)])
    assert thunder.cache_misses(jf) == 2


def test_isinstance_of_a_number_against_a_tuple_of_types(enabled):
    fn = lambda x, n: x * 2 if isinstance(n, (float, complex)) else x * 3  # noqa: E731
    x = torch.randn(3)
    jit_and_compare(fn, [(x, 1), (x, 1.5), (x, True), (x, 2)])


@pytest.mark.parametrize("flag", [False, True])
def test_set_grad_enabled_with_a_closure_flag(enabled, flag):
    initial = torch.is_grad_enabled()

    def fn(x):
        torch.set_grad_enabled(flag)
        return x.sin()

    try:
        x = torch.randn(4, requires_grad=True)
        got = thunder.jit(fn, cache=SYMBOLIC)(x)
        torch.set_grad_enabled(initial)
        want = fn(x)
        torch.set_grad_enabled(initial)
        torch.testing.assert_close(got, want)
        assert got.requires_grad == want.requires_grad
    finally:
        torch.set_grad_enabled(initial)


def _grad_mode_from(x, n, how):
    flag = {"int": (n > 0) * (n > 1), "bool": n > 1, "float": n * 0.5, "bool of an int": bool(n)}[how]
    with torch.set_grad_enabled(flag):
        return x * 3, torch.is_grad_enabled()


@pytest.mark.parametrize("how", ["int", "bool", "float", "bool of an int"])
@pytest.mark.parametrize("n", [0, 6])
def test_set_grad_enabled_of_a_number_accepts_what_eager_accepts(enabled, how, n):
    """``torch.set_grad_enabled`` takes a bool only: ``(n > 0) * (n > 1)`` is an int, and eager
    raises TypeError where thunder's symbol took it as the mode (found by the fuzzer)."""
    x = torch.ones(2, requires_grad=True)
    initial = torch.is_grad_enabled()
    try:
        outcomes = []
        for fn in (_grad_mode_from, thunder.jit(_grad_mode_from, cache=SYMBOLIC)):
            try:
                out, mode = fn(x, n, how)
                outcomes.append((out.tolist(), out.requires_grad, mode))
            except TypeError:
                outcomes.append(TypeError)
        assert outcomes[1] == outcomes[0]
    finally:
        torch.set_grad_enabled(initial)


def test_no_autocast_function_runs_under_symbolic_values(enabled):
    """thunder's no_autocast wrapper (every trace's python_callable has it) passes a closure's
    bool to the opaque torch.set_autocast_enabled."""
    from thunder.executors.torchex import no_autocast

    fn = no_autocast(lambda x, y: x @ y + 1)
    jit_and_compare(fn, [(torch.randn(2, 3), torch.randn(3, 4)), (torch.randn(5, 3), torch.randn(3, 2))])
    assert not torch.is_autocast_enabled("cpu")


_GLOBAL_NUMBER = 2


def _scale_by_global(x):
    y = x * _GLOBAL_NUMBER
    return y if torch.is_floating_point(y) else y + 1  # the trace bakes in y's dtype


def test_global_number_type_change_misses(enabled):
    global _GLOBAL_NUMBER
    jf = thunder.jit(_scale_by_global, cache=SYMBOLIC)
    x = torch.arange(3)
    try:
        for n in (2, 2.5, 3):
            _GLOBAL_NUMBER = n
            torch.testing.assert_close(jf(x), _scale_by_global(x))
    finally:
        _GLOBAL_NUMBER = 2
    assert thunder.cache_misses(jf) == 2  # 3 reuses the entry made for 2


def test_isinstance_of_a_closure_number_follows_its_type(enabled):
    n = 2

    def fn(x):
        return x * 2 if isinstance(n, int) else x * 3

    jf = thunder.jit(fn, cache=SYMBOLIC)
    x = torch.randn(3)
    torch.testing.assert_close(jf(x), fn(x))
    n = 2.0
    torch.testing.assert_close(jf(x), fn(x))


# ---------------------------------------------------------------------------------------------
# t.numel of a tensor with constant sizes next to symbolic numbers
# ---------------------------------------------------------------------------------------------


def test_reshape_of_a_constant_size_tensor_to_a_symbolic_shape_with_minus_one(enabled):
    # clang.reshape computes ``a.numel % numel`` and ``a.numel // numel``: the static product
    # (callable like thunder's) met a symbolic ``numel`` and reached prims.remainder's meta as an
    # int subclass, which thunder's tree_flatten refused
    def fn(a, n):
        z = torch.zeros(4, 2) + a.sum()
        return z.reshape(2, n, -1)

    a = torch.randn(3)
    jf = jit_and_compare(fn, [(a, 2), (a, 4), (a, 1)])
    assert thunder.cache_misses(jf) == 1


def test_trace_of_reshape_with_a_proxied_shape(enabled):
    # thunder.trace() proxies the shape argument (thunder's test_grad builds its op list this way
    # at import): thunder's own plain int numel stays a plain int in its clang layer
    a = torch.randn(4, 2, dtype=torch.float64)
    trc = thunder.trace()(ltorch.reshape, a, (2, -1, 2))
    assert any(b.sym.name == "reshape" for b in trc.bound_symbols)


def test_static_numel_called_and_combined_with_symbolic_numbers(enabled):
    def fn(a, n):
        z = torch.zeros(4, 2) + a.sum()
        return z.numel() % n, n % z.numel(), z.numel() // n, z.numel() == n, a.numel() * n

    jf = thunder.jit(fn, cache=SYMBOLIC)
    for n in (3, 5, 8):
        assert jf(torch.randn(3), n) == fn(torch.randn(3), n)


@pytest.mark.parametrize("padding_idx", [0, 2, -1, -5, None])
def test_embedding_padding_idx_of_any_sign(enabled, padding_idx):
    # issue 30: padding_idx=-1 is thunder's "none" sentinel; eager's -1 is the last row (its
    # gradient zeroed): the weight's gradient differed, stock thunder too
    def f(idx, w):
        return F.embedding(idx, w, padding_idx=padding_idx)

    jf = thunder.jit(f, cache=SYMBOLIC)
    for n in (5, 7):
        idx = torch.tensor([[0, 1, 2, n - 1], [n - 1, 3, 2, 1]])
        w = torch.randn(n, 3, requires_grad=True)
        w_ref = w.detach().clone().requires_grad_()
        out, ref = jf(idx, w), f(idx, w_ref)
        torch.testing.assert_close(out, ref)
        out.sum().backward()
        ref.sum().backward()
        torch.testing.assert_close(w.grad, w_ref.grad)


def test_embedding_padding_idx_out_of_range_raises(enabled):
    jf = thunder.jit(lambda idx, w: F.embedding(idx, w, padding_idx=-6), cache=SYMBOLIC)
    with pytest.raises(Exception):
        F.embedding(torch.tensor([0]), torch.randn(5, 3), padding_idx=-6)
    with pytest.raises(Exception):
        jf(torch.tensor([0]), torch.randn(5, 3))
