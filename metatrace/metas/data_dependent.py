"""Ops whose output size is read from tensor data: ``torch.nonzero``, ``argwhere``,
``torch.where(cond)``, ``x[mask]`` and ``masked_select``.

thunder 0.2.6 raises on each (``boolean advanced indexing is not implemented``, its automatic
registration's ``DynamicOutputShapeException``). While metatrace is enabled they are traced with
one new operator of thunder's torch executor, ``metatrace_nonzero(a) -> (indices, count)``:
``indices`` is ``torch.nonzero(a)`` of shape ``(count, a.ndim)`` and ``count`` its row count as a
number output, an unbacked size (``metatrace.metas.unbacked``: no trace-time value, in
``[0, numel]``), so the generated Python binds ``count`` when the computation runs
(``(t1, i2) = metatrace_nonzero(t0)``) and every later size symbol has a producer. The operator
carries no gradient (integer indices).

The torch functions are lookasides built on it with thunder ops:

- ``torch.nonzero(x)``, ``torch.argwhere(x)`` (and the methods): the indices;
  ``nonzero(x, as_tuple=True)`` and ``torch.where(cond)`` with one argument: one 1-d index
  tensor per dimension (``indices[:, d]``);
- ``x[mask]`` (a bool tensor of ``x``'s shape or of its leading sizes): ``x`` flattened over
  the mask's dimensions, ``index_select`` by the 1-d indices of the flattened mask, so the
  gradient with respect to ``x`` is thunder's rule for ``take`` (``index_add`` into ``x``'s own
  sizes);
- ``masked_select(x, mask)``: both broadcast to their common shape, flattened, then as ``x[mask]``.

Anything else (``x[mask] = v``, a mask beside other indices, ``out=``) keeps thunder's path.
"""

from __future__ import annotations

import importlib
import weakref

import thunder.clang as clang
import thunder.core.dtypes as dtypes
import thunder.core.jit_ext as jit_ext
from thunder.clang.utils import compute_broadcast_shape
import thunder.torch as ltorch
import torch
from thunder.core.proxies import TensorProxy
from thunder.core.transforms import nondifferentiable_vjp_symbols

from metatrace.metas import record_state, runtime, unbacked
from metatrace.patching import Patch, item, member

NAME = "metatrace_nonzero"


def _nonzero_meta(a: TensorProxy, /):
    count = _count_bound_for(a) if not record_state.INTERPRETING.get() else None
    if count is None:
        count = unbacked.new_size(counting=a.shape)
    indices = TensorProxy(like=a, shape=(count, a.ndim), dtype=dtypes.int64, requires_grad=False)
    return indices, count


# id(input tensor proxy) -> (a weak reference to it, the count a bound symbol of the operator
# outputs for it): every such bound symbol is remembered as it is made (BoundSymbol.__post_init__,
# metatrace.proxies.number_methods), including the copies executor passes make with renamed inputs.
_BOUND: dict[int, tuple] = {}


def remember(bsym) -> None:
    """Called for every bound symbol made: remembers an operator's count for its input."""
    if bsym.sym.id != NAME or not bsym.args or not isinstance(bsym.output, tuple) or len(bsym.output) != 2:
        return
    a, count = bsym.args[0], bsym.output[1]
    key = id(a)
    _BOUND[key] = (weakref.ref(a, lambda _, key=key, table=_BOUND: table.pop(key, None)), count)


def _count_bound_for(a):
    """Outside a compile (thunder's ``check_trace`` runs every bound symbol's meta again and
    compares the output shapes), the count the bound symbol being re-run outputs for this very
    input proxy: a size read from tensor data has no value to recompute, only its symbol. During
    a compile every call makes a new count (a proxy written to in place between two reads is
    still the same proxy there)."""
    entry = _BOUND.get(id(a))
    if entry is None or entry[0]() is not a:
        return None
    return entry[1]


def _nonzero_impl(a: torch.Tensor, /):
    indices = torch.nonzero(a)
    return indices, indices.shape[0]


_symbols: dict = {}


def nonzero_symbol():
    """The registered operator (a Symbol), or None while metatrace is disabled."""
    return _symbols.get("nonzero")


# id(tensor proxy) -> (a weak reference to it, its indices): ``x[m] - y[m]`` reads the indices of
# ``m`` once, so both results have the same length symbol (two calls would have two counts, and
# broadcasting them would ask whether they are equal). Emptied by every in-place op (thunder keeps
# the proxy of a tensor written in place, or of its alias, until its functionalization pass).
_SHARED: dict[int, tuple] = {}


def _shared(a: TensorProxy, flat: bool) -> TensorProxy:
    """The indices of ``a`` (``flat``: of ``a`` flattened, 1-d), made once per tensor proxy."""
    key = (id(a), flat)
    entry = _SHARED.get(key)
    if entry is not None and entry[0]() is a:
        return entry[1]
    if flat:
        indices = ltorch.squeeze(_indices(ltorch.flatten(a) if a.ndim != 1 else a), 1)
    else:
        indices, _count = nonzero_symbol()(a)
    _SHARED[key] = (weakref.ref(a, lambda _, key=key, table=_SHARED: table.pop(key, None)), indices)
    return indices


def _indices(a: TensorProxy) -> TensorProxy:
    return _shared(a, flat=False)


def sharing() -> bool:
    """Some tensor's indices are shared (the in-place check is skipped otherwise)."""
    return bool(_SHARED)


def written_in_place() -> None:
    """An in-place op was traced: no tensor's indices are shared past it."""
    _SHARED.clear()


def _flat_indices(mask: TensorProxy) -> TensorProxy:
    """The 1-d indices of the true elements of ``mask`` flattened (``mask.ndim >= 1``)."""
    return _shared(mask, flat=True)


def _is_tensor(x) -> bool:
    return isinstance(x, TensorProxy)


def _nonzero(input, *, out=None, as_tuple=False):
    if out is not None or not _is_tensor(input):
        return ltorch.nonzero(input, out=out, as_tuple=as_tuple) if out is not None else ltorch.nonzero(input)
    if as_tuple:
        return _as_tuple(input)
    return _indices(input)


def _argwhere(input):
    if not _is_tensor(input):
        return ltorch.argwhere(input)
    return _indices(input)


def _as_tuple(cond: TensorProxy) -> tuple:
    if cond.ndim == 0:  # torch treats a 0-d condition as 1-d
        cond = ltorch.reshape(cond, (1,))
    if cond.ndim == 1:
        return (_flat_indices(cond),)
    indices = _indices(cond)
    # column d of the (count, ndim) indices: a slice of the constant dimension (basic indexing
    # would ask whether count is 0, which no value of count decides)
    return tuple(ltorch.squeeze(clang.slice_in_dim(indices, d, d + 1, dim=1), 1) for d in range(cond.ndim))


def _where(condition, input=None, other=None, *args, **kwargs):
    if input is None and other is None and not args and not kwargs and _is_tensor(condition):
        return _as_tuple(condition)
    return ltorch.where(condition, input, other, *args, **kwargs)


def _is_mask_of(x, key) -> bool:
    """``key`` is a bool tensor whose shape is ``x``'s leading sizes (each a guarded equality)."""
    return (
        _is_tensor(x)
        and _is_tensor(key)
        and key.dtype is dtypes.bool8
        and 1 <= key.ndim <= x.ndim
        and all(runtime.truth(runtime.eq(k, s)) for k, s in zip(key.shape, x.shape))
    )


def _select_by_mask(x: TensorProxy, mask: TensorProxy) -> TensorProxy:
    """``x[mask]``, the mask of ``x``'s leading ``mask.ndim`` sizes."""
    flat = ltorch.flatten(x, 0, mask.ndim - 1) if mask.ndim > 1 else x
    return ltorch.index_select(flat, 0, _flat_indices(mask))


def _getitem(a, key):
    if isinstance(key, tuple) and len(key) == 1:
        key = key[0] if _is_tensor(key[0]) else key
    if _is_tensor(key) and key.dtype is dtypes.bool8 and _is_mask_of(a, key):
        return _select_by_mask(a, key)
    return ltorch.getitem(a, key)


def _masked_select(input, mask, *, out=None):
    if out is not None or not (_is_tensor(input) and _is_tensor(mask)) or mask.dtype is not dtypes.bool8:
        return ltorch.masked_select(input, mask) if out is None else ltorch.masked_select(input, mask, out=out)
    # (thunder's broadcast_tensors is auto-registered: its fake-tensor meta pins every size; its
    # clang shape rule decides with guarded relations, ``n == 1`` size-obliviously)
    shape = tuple(compute_broadcast_shape(input.shape, mask.shape))
    input, mask = (t if tuple(t.shape) == shape else ltorch.expand(t, shape) for t in (input, mask))
    if input.ndim == 0:
        input, mask = ltorch.reshape(input, (1,)), ltorch.reshape(mask, (1,))
    return _select_by_mask(ltorch.flatten(input), ltorch.flatten(mask))


def _lookaside(fn):
    return jit_ext.ensure_recursive_proxies(
        jit_ext.interpreter_needs_wrap(jit_ext.record_source_loc_in_symbol_header(fn))
    )


def _operator(previous):
    from thunder.executors.torchex import ex

    assert previous is None, f"{NAME} is already registered on the torch executor"
    # register_operator stores the new symbol in ex.opmap itself; the row stores the same object
    return ex.register_operator(NAME, meta=_nonzero_meta, fn=_nonzero_impl)


def patches() -> list[Patch]:
    from thunder.executors.torchex import ex

    why = "ops with a size read from tensor data (an unbacked size)"
    general = "thunder.core.jit_ext._general_jit_lookaside_map"
    methods_module = importlib.import_module("thunder.torch.langctx")
    methods = "thunder.torch.langctx._method_name_to_fn_map"
    rows = [
        item(ex.opmap, NAME, _operator, why, wrap=True, label="executor torch.opmap"),
        item(_symbols, "nonzero", lambda _: ex.opmap[NAME], "(nonzero_symbol finds it)", wrap=True,
             label="metatrace.metas.data_dependent"),
        member(nondifferentiable_vjp_symbols, NAME, "integer indices carry no gradient",
               label="thunder.core.transforms.nondifferentiable_vjp_symbols"),
    ]
    table = (
        (torch.nonzero, torch.Tensor.nonzero, "nonzero", _nonzero),
        (torch.argwhere, torch.Tensor.argwhere, "argwhere", _argwhere),
        (torch.where, None, None, _where),  # (Tensor.where(cond, y) always has three operands)
        (torch.masked_select, torch.Tensor.masked_select, "masked_select", _masked_select),
        (None, torch.Tensor.__getitem__, "getitem", _getitem),
    )
    for function, method, method_name, decomposition in table:
        for fn in (function, method, decomposition):
            if fn is not None:
                rows.append(item(jit_ext._general_jit_lookaside_map, fn, _lookaside(decomposition), why, label=general))
        if method_name is not None and method_name in methods_module._method_name_to_fn_map:
            rows.append(item(methods_module._method_name_to_fn_map, method_name, decomposition, why, label=methods))
    return rows
