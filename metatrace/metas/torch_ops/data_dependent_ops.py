"""The operators of thunder's torch executor whose output sizes are read from tensor data.

thunder 0.2.6 cannot trace ``torch.nonzero``, ``bincount``, ``unique`` or ``repeat_interleave``
with tensor repeats: its automatic registration asks fake tensors for the output shape and gets
``DynamicOutputShapeException``. While metatrace is enabled each is one operator here, declared in
one table (:data:`OPERATORS`), whose meta returns its tensors with a new unbacked size
(``metatrace.metas.unbacked``: no trace-time value, nonnegative, bounded by the element count of
the input where the op counts elements) and that size itself as a number output, so the generated
Python binds it when the computation runs (``(t1, i2) = metatrace_nonzero(t0)``) and every later
size symbol has a producer. None of them carries a gradient (integer indices and counts; eager
torch has no derivative for ``bincount`` or ``unique`` either).

One more operator, ``metatrace_check``, is a check inside the computation trace where the prologue
cannot see the value (``narrow`` past the end by a length read from data): it returns its first
operand, so dead-code elimination keeps it wherever that operand is used.

The lookasides that build torch functions from these operators are in
``metatrace.metas.torch_ops.data_dependent``.
"""

from __future__ import annotations


from dataclasses import dataclass
from typing import Callable

import thunder.core.dtypes as dtypes
import torch
from thunder.core.proxies import TensorProxy
from thunder.core.transforms import nondifferentiable_vjp_symbols

from metatrace.state import compile_context
from metatrace.metas import unbacked
from metatrace.patching import Patch, item, member
from metatrace.state.object_tables import BOUND_SIZES, DATA_DEPENDENT_OPERATORS


# an operator's output size for its first operand: state.object_tables.BOUND_SIZES
def remember(bsym) -> None:
    """Called for every bound symbol made: remembers an operator's size for its first operand."""
    if bsym.sym.id not in _BY_NAME or not bsym.args or not isinstance(bsym.output, tuple):
        return
    a, size = bsym.args[0], bsym.output[-1]
    BOUND_SIZES.get(a)[bsym.sym.id] = size


def _size_for(name: str, a, counting: tuple | None):
    """The output size of operator ``name`` on first operand ``a``. Outside a compile (thunder's
    ``check_trace`` runs every bound symbol's meta again and compares output shapes) it is the
    size the bound symbol being re-run outputs for this very operand: a size read from tensor data
    has no value to recompute, only its symbol. During a compile every call makes a new size (a
    proxy written in place between two reads is still the same proxy there)."""
    if not compile_context.interpreting():
        known = BOUND_SIZES.get(a, create=False)
        if known is not None and name in known:
            return known[name]
    return unbacked.new_size(counting=counting, op=name, source=a if counting is not None else None)


# --- metas (proxies in, proxies out) and implementations (tensors in, tensors and ints out) ---


def _nonzero_meta(a: TensorProxy, /):
    count = _size_for("metatrace_nonzero", a, counting=a.shape)
    return TensorProxy(like=a, shape=(count, a.ndim), dtype=dtypes.int64, requires_grad=False), count


def _nonzero_impl(a: torch.Tensor, /):
    indices = torch.nonzero(a)
    return indices, indices.shape[0]


def _repeat_indices_meta(repeats: TensorProxy, /):
    total = _size_for("metatrace_repeat_indices", repeats, counting=repeats.shape)
    return TensorProxy(like=repeats, shape=(total,), dtype=dtypes.int64, requires_grad=False), total


def _repeat_indices_impl(repeats: torch.Tensor, /):
    """``i`` repeated ``repeats[i]`` times for each ``i`` (torch checks repeats >= 0)."""
    indices = torch.repeat_interleave(repeats)
    return indices, indices.shape[0]


def bincount_dtype(weights) -> dtypes.dtype:
    """eager's result dtype: int64 counts, or the weights' floating dtype, float64 for others."""
    if weights is None:
        return dtypes.int64
    return weights.dtype if dtypes.is_float_dtype(weights.dtype) else dtypes.float64


def _bincount_meta(a: TensorProxy, weights, minlength: int, /):
    length = _size_for("metatrace_bincount", a, counting=None)
    out = TensorProxy(like=a, shape=(length,), dtype=bincount_dtype(weights), requires_grad=False)
    return out, length


def _bincount_impl(a: torch.Tensor, weights, minlength: int, /):
    out = torch.bincount(a, weights, minlength)
    return out, out.shape[0]


def _unique_meta(a: TensorProxy, sorted: bool, consecutive: bool, /):
    count = _size_for("metatrace_unique", a, counting=a.shape)
    values = TensorProxy(like=a, shape=(count,), requires_grad=False)
    inverse = TensorProxy(like=a, dtype=dtypes.int64, requires_grad=False)
    counts = TensorProxy(like=a, shape=(count,), dtype=dtypes.int64, requires_grad=False)
    return values, inverse, counts, count


def _unique_impl(a: torch.Tensor, sorted: bool, consecutive: bool, /):
    if consecutive:
        values, inverse, counts = torch.unique_consecutive(a, return_inverse=True, return_counts=True)
    else:
        values, inverse, counts = torch.unique(a, sorted=sorted, return_inverse=True, return_counts=True)
    return values, inverse, counts, values.shape[0]


def _check_meta(a: TensorProxy, ok: TensorProxy, message: str, /):
    return TensorProxy(like=a)


def _check_impl(a: torch.Tensor, ok: torch.Tensor, message: str, /):
    if not bool(ok):
        raise RuntimeError(message)
    return a


@dataclass(frozen=True)
class Operator:
    """One operator of thunder's torch executor: its name in traces, meta and implementation."""

    name: str
    meta: Callable
    impl: Callable
    why: str


OPERATORS = (
    Operator("metatrace_nonzero", _nonzero_meta, _nonzero_impl,
             "torch.nonzero: (indices, count), count in [0, numel]"),
    Operator("metatrace_repeat_indices", _repeat_indices_meta, _repeat_indices_impl,
             "repeat_interleave with tensor repeats: (indices, sum of repeats)"),
    Operator("metatrace_bincount", _bincount_meta, _bincount_impl,
             "torch.bincount: (counts, length), length read from the largest value"),
    Operator("metatrace_unique", _unique_meta, _unique_impl,
             "torch.unique and unique_consecutive: (values, inverse, counts, count), count in [0, numel]"),
    Operator("metatrace_check", _check_meta, _check_impl,
             "a check inside the computation trace on a value read from tensor data"),
)
_BY_NAME = {op.name: op for op in OPERATORS if op.name != "metatrace_check"}
NAMES = frozenset(_BY_NAME)



def symbol(name: str):
    """The registered operator ``name`` (a Symbol), or None while metatrace is disabled."""
    return DATA_DEPENDENT_OPERATORS.get(name)


def call(name: str, *args):
    return DATA_DEPENDENT_OPERATORS[name](*args)


def _register(op: Operator):
    def register(previous):
        from thunder.executors.torchex import ex

        assert previous is None, f"{op.name} is already registered on the torch executor"
        # register_operator stores the new symbol in ex.opmap itself; the row stores the same object
        return ex.register_operator(op.name, meta=op.meta, fn=op.impl)

    return register


def patches() -> list[Patch]:
    from thunder.executors.torchex import ex

    rows = []
    for op in OPERATORS:
        rows += [
            item(ex.opmap, op.name, _register(op), op.why, wrap=True, label="executor torch.opmap"),
            item(DATA_DEPENDENT_OPERATORS, op.name, lambda _, name=op.name: ex.opmap[name], "(symbol finds it)", wrap=True,
                 label="metatrace.metas.torch_ops.data_dependent_ops"),
            member(nondifferentiable_vjp_symbols, op.name,
                   "integer indices, counts and checks carry no gradient",
                   label="thunder.core.transforms.nondifferentiable_vjp_symbols"),
        ]
    return rows
