"""Hand-written sample inputs for the prims that thunder's opinfos do not reach on the CPU.

Each entry builds (args, kwargs) for a direct call of the prim's symbol inside a trace with
symbolic values (``direct_call_context``). Tensor sizes and numbers are NumberProxies, so the
rewritten meta records and guards exactly as it would under ``thunder.jit``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from types import SimpleNamespace

import torch

import thunder.core.devices as devices
import thunder.core.dtypes as dtypes
from thunder.core.compile_data import compile_data_and_stats
from thunder.core.options import CACHE_OPTIONS
from thunder.core.proxies import AnyProxy, IntegerProxy, TensorProxy
from thunder.core.trace import TraceCtx, tracectx

CPU = devices.Device("cpu")


@contextlib.contextmanager
def direct_call_context():
    """A fresh trace under ``cache="symbolic values"``, as thunder.jit sets one up for tracing."""
    cd = SimpleNamespace(
        cache_option=CACHE_OPTIONS.SYMBOLIC_VALUES,
        is_grad_enabled=True,
        is_autocast_enabled=False,
        autocast_stack=SimpleNamespace(is_empty=lambda: True),
    )
    trace = TraceCtx()
    with compile_data_and_stats(cd, None), tracectx(trace):
        yield trace


def n(value: int) -> IntegerProxy:
    return IntegerProxy(value=value)


def t(*shape, dtype=dtypes.float32, symbolic=True, requires_grad=False) -> TensorProxy:
    sizes = [n(s) if symbolic else s for s in shape]
    return TensorProxy(shape=sizes, device=CPU, dtype=dtype, requires_grad=requires_grad)


Sample = tuple[tuple, dict]

# prim name -> builder of a list of samples (called inside direct_call_context)
SAMPLES: dict[str, Callable[[], list[Sample]]] = {
    "ASSERT_COMPARE": lambda: [((n(3),), {"op": ">=", "other": 2})],
    "ASSERT_TENSOR_METADATA": lambda: [((t(2, 3),), {"shape": (2, 3), "device": CPU, "dtype": dtypes.float32, "requires_grad": False})],
    "CHECK_BOOL_CONVERSION": lambda: [((n(1), True), {})],
    "CHECK_EMPTY": lambda: [(((),), {})],
    "CHECK_INSTANCE": lambda: [((AnyProxy(3), (int,)), {})],
    "CHECK_NONE": lambda: [((AnyProxy(None),), {})],
    "CHECK_SLICE_VALUE": lambda: [((AnyProxy(slice(1, 2)), slice(1, 2)), {})],
    "CHECK_TYPE": lambda: [((AnyProxy(3), int), {})],
    "COMMENT": lambda: [(("a comment",), {})],
    "CONSTRUCT_TUPLE": lambda: [(((t(2), n(3)),), {})],
    "COPY_WITH_SETITEM": lambda: [((t(4, 3), n(1), t(3)), {})],
    "DATACLASS_NEW": lambda: [((SimpleNamespace,), {"x": 1})],
    "DEL": lambda: [((t(2),), {})],
    "DEVICE_PUT": lambda: [((t(2, 3), CPU), {})],
    "EMBEDDING": lambda: [((t(4, 5, dtype=dtypes.int64), t(10, 3)), {"padding_idx": 0}), ((t(7, dtype=dtypes.int64), t(6, 2)), {})],
    "EMBEDDING_BACKWARD": lambda: [((t(4, 5, 3), t(4, 5, dtype=dtypes.int64), n(10), -1, False, False), {})],
    "EXOGENOUS_LIKE": lambda: [(([t(2, 3), t(4)],), {})],
    "FLIP": lambda: [((t(2, 3, 4), (0, 2)), {}), ((t(5), ()), {})],
    "GET_AND_UPDATE_RNG_STATE": lambda: [((n(7), n(4), CPU), {})],
    "MULTINOMIAL": lambda: [((t(3, 5), n(2), False), {"seed": None})],
    "NUMPY_ARRAY_TO_TORCH_TENSOR": lambda: [((t(2, 3),), {})],
    "PACK_ATTR": lambda: [((AnyProxy(SimpleNamespace()), "k", t(2)), {})],
    "PACK_BUFFER": lambda: [((AnyProxy(SimpleNamespace()), "k", t(2)), {})],
    "PACK_LIST": lambda: [((t(2), n(3)), {})],
    "PACK_SETITEM": lambda: [((AnyProxy({}), "k", t(2)), {})],
    "PRINT": lambda: [((n(3),), {})],
    "PYTHON_VARS": lambda: [((), {})],
    "PY_ABS": lambda: [((n(-3),), {}), ((4,), {})],
    "REAL": lambda: [((t(2, 3, dtype=dtypes.complex64),), {})],
    "SINK": lambda: [((t(2), n(3)), {})],
    "STRIDE_ORDER": lambda: [((t(2, 3, 4), (2, 0, 1)), {})],
    "TENSOR_FROM_SEQUENCE": lambda: [(([[n(1), 2], [3, n(4)]],), {"dtype": None, "device": CPU}), (([1.5, 2.5],), {"dtype": dtypes.float32, "device": CPU})],
    "UNIFORM_PHILOX": lambda: [(((n(2), 3), 0.0, 1.0), {"device": CPU, "dtype": dtypes.float32, "seed": n(5), "offset": n(8)})],
    "UNPACK_ATTR": lambda: [((AnyProxy(SimpleNamespace(k=1)), "k"), {})],
    "UNPACK_BUFFER": lambda: [((AnyProxy(torch.nn.BatchNorm1d(3)), "running_mean"), {})],
    "UNPACK_CACHE_INFO": lambda: [((AnyProxy({}),), {})],
    "UNPACK_DICT_KEY": lambda: [(({"a": t(2)}, "a"), {})],
    "UNPACK_EMPTY_DICT": lambda: [(({},), {})],
    "UNPACK_FUNCTION_OBJ": lambda: [((AnyProxy(len),), {})],
    "UNPACK_GETITEM": lambda: [((AnyProxy([1, 2]), 0), {})],
    "UNPACK_ITER": lambda: [((AnyProxy([1, 2]),), {})],
    "UNPACK_KEY": lambda: [(({"a": t(2)}, "a"), {})],
    "UNPACK_LIST": lambda: [(([t(2), n(3)],), {})],
    "UNPACK_NEXT": lambda: [((AnyProxy(iter([1, 2])),), {})],
    "UNPACK_PARAMETER": lambda: [((AnyProxy(torch.nn.Linear(2, 3)), "weight"), {})],
    "UNPACK_SUBMODULE": lambda: [((AnyProxy(torch.nn.Sequential(torch.nn.Linear(2, 3))), "0"), {})],
    "UNPACK_THUNDER_MODULE": lambda: [((AnyProxy(None),), {})],
    "UNPACK_TUPLE": lambda: [(((t(2), n(3)),), {})],
    "UPDATE_ALIASES": lambda: [(((t(2, 3), t(4)),), {})],
    "VIEW": lambda: [((t(2, 6), (n(3), 4)), {}), ((t(4, 3), (12,)), {})],
    "_GROUPED_MM": lambda: [((t(8, 4), t(3, 4, 5), t(3, dtype=dtypes.int32)), {}), ((t(4, 8), t(8, 5), t(3, dtype=dtypes.int32)), {})],
}
