"""Torch functions whose output size is read from tensor data, built from the operators of
``metatrace.metas.torch_ops.data_dependent_ops`` and thunder ops while metatrace is enabled.

thunder 0.2.6 raises on each (``boolean advanced indexing is not implemented``, its automatic
registration's ``DynamicOutputShapeException``, ``Unsupported for NumberProxy.value=None``).
Each size read from data is an unbacked size (``metatrace.metas.unbacked``) that an operator of
the computation trace outputs, so every later size symbol has a producer.

- ``torch.nonzero(x)``, ``torch.argwhere(x)`` (and the methods): the indices;
  ``nonzero(x, as_tuple=True)`` and ``torch.where(cond)`` with one argument: one 1-d index
  tensor per dimension (``indices[:, d]``);
- ``x[mask]`` (a bool tensor of ``x``'s shape or of its leading sizes), and one mask beside
  slices, ``None`` and ``...``: the mask's dimensions flattened, ``index_select`` by the 1-d
  indices of the flattened mask, so the gradient is thunder's rule for ``take`` (``index_add``);
- ``masked_select(x, mask)``: both broadcast to their common shape, flattened, then as ``x[mask]``;
- slices, ``narrow`` and ``topk`` with a bound read from data (``x[:n.item()]``): a mask over the
  dimension's positions, so no decision on the bound is asked; where eager raises for a bound out
  of range, ``metatrace_check`` raises at run time;
- ``repeat_interleave`` with tensor repeats (``index_select`` by the repeated indices),
  ``bincount``, ``unique`` and ``unique_consecutive``: their operators.

Anything else (``out=``, ``unique(dim=)``, a mask beside integer or tensor indices) keeps
thunder's path.
"""

from __future__ import annotations



import thunder.clang as clang
import thunder.core.dtypes as dtypes
from thunder.clang.utils import compute_broadcast_shape
import thunder.torch as ltorch
import torch
from thunder.core.proxies import TensorProxy

from metatrace.metas import runtime, unbacked
from metatrace.metas.torch_ops import data_dependent_ops, torch_lookasides
from metatrace.patching import Patch
from metatrace.state.object_tables import SHARED_INDICES


def _nonzero_op(a: TensorProxy):
    """``(indices, count)`` of ``a`` (``metatrace_nonzero``)."""
    return data_dependent_ops.call("metatrace_nonzero", a)


def _shared(a: TensorProxy, flat: bool) -> TensorProxy:
    """The indices of ``a`` (``flat``: of ``a`` flattened, 1-d), made once per tensor proxy."""
    known = SHARED_INDICES.get(a)
    if flat in known:
        return known[flat]
    if flat:
        indices = ltorch.squeeze(_indices(ltorch.flatten(a) if a.ndim != 1 else a), 1)
        unbacked.counts_elements_of(indices.shape[0], a)  # (the count of the flattened mask is a's)
    else:
        indices, _count = _nonzero_op(a)
    known[flat] = indices
    return indices


def _indices(a: TensorProxy) -> TensorProxy:
    return _shared(a, flat=False)


def sharing() -> bool:
    """Some tensor's indices are shared (the in-place check is skipped otherwise)."""
    return len(SHARED_INDICES) > 0


def written_in_place() -> None:
    """An in-place op was traced: no tensor's indices are shared past it."""
    SHARED_INDICES.clear()


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
    if _is_tensor(a) and (data_slices := _slices_read_from_data(a, key)) is not None:
        return _getitem_with_data_slices(a, key, data_slices)
    if _is_tensor(a) and (found := _mask_among_slices(a, key)) is not None:
        return _select_by_mask_at(a, key, *found)
    return ltorch.getitem(a, key)


def _mask_among_slices(a: TensorProxy, key) -> tuple | None:
    """(position of the mask in the key, the result dimension its dimensions start at) where the
    key is one bool tensor beside slices, ``None`` and ``...`` (``x[:, m]``, ``x[..., m, 1:]``),
    else None. With one advanced index the result's count dimension stays in the mask's place."""
    if not isinstance(key, tuple):
        return None
    masks = [i for i, k in enumerate(key) if _is_tensor(k) and k.dtype is dtypes.bool8]
    if len(masks) != 1 or masks[0] == 0 and len(key) == 1:
        return None
    if not all(isinstance(k, slice) or k is None or k is Ellipsis for i, k in enumerate(key) if i != masks[0]):
        return None
    if any(_valueless(x) for k in key if isinstance(k, slice) for x in (k.start, k.stop, k.step)):
        return None
    mask = key[masks[0]]
    consuming = sum(1 for k in key if isinstance(k, slice)) + mask.ndim
    if mask.ndim == 0 or consuming > a.ndim:
        return None
    out_dim = 0
    for k in key[: masks[0]]:
        out_dim += (a.ndim - consuming) if k is Ellipsis else 1
    return masks[0], out_dim


def _select_by_mask_at(a: TensorProxy, key: tuple, position: int, dim: int) -> TensorProxy:
    """``a[key]`` for :func:`_mask_among_slices`' keys: the other indices first, then the mask's
    dimensions (each size a guarded equality) flattened and selected by the mask's indices."""
    mask = key[position]
    static = key[:position] + (slice(None),) * mask.ndim + key[position + 1:]
    y = ltorch.getitem(a, static)
    for offset, size in enumerate(mask.shape):
        if not runtime.truth(runtime.eq(size, y.shape[dim + offset])):
            raise IndexError(f"The shape of the mask {tuple(mask.shape)} does not match the shape of the indexed tensor")
    flat = ltorch.flatten(y, dim, dim + mask.ndim - 1) if mask.ndim > 1 else y
    return ltorch.index_select(flat, dim, _flat_indices(mask))


# --- slices, narrow and topk with a bound read from tensor data (``x[:n.item()]``) ---
#
# Each keeps the elements of one dimension where a mask over that dimension's positions holds
# (``arange(L) < n``): the mask's true positions are the result's (unbacked) length, so no
# decision on ``n`` is asked, and the gradient is index_select's. Where eager raises for a bound
# out of range (``narrow``, ``topk``), ``metatrace_check`` raises the same at run time.


def _valueless(x) -> bool:
    return unbacked.is_unbacked(x)


def _is_data_slice(k) -> bool:
    return isinstance(k, slice) and (_valueless(k.start) or _valueless(k.stop)) and not _valueless(k.step)


def _is_partial(k) -> bool:
    return isinstance(k, slice) and not (k.start is None and k.stop is None and k.step is None)


def _slices_read_from_data(a: TensorProxy, key) -> dict | None:
    """{position in the key: output dimension} of the key's slices with a bound read from tensor
    data, or of a dimension whose length is (``counts[:4]`` of a ``bincount``), or None where
    there is none (or the key has tensor indices: thunder's path)."""
    elements = key if isinstance(key, tuple) else (key,)
    if any(_is_tensor(k) or isinstance(k, (bool, list)) or (isinstance(k, slice) and _valueless(k.step))
           for k in elements):
        return None
    consuming = sum(1 for k in elements if k is not None and k is not Ellipsis)
    if consuming > a.ndim:
        return None
    positions, out_dim, in_dim = {}, 0, 0
    for i, k in enumerate(elements):
        if k is Ellipsis:
            out_dim += a.ndim - consuming
            in_dim += a.ndim - consuming
        elif k is None:
            out_dim += 1
        elif isinstance(k, slice):
            if _is_data_slice(k) or (_is_partial(k) and unbacked.is_unbacked(a.shape[in_dim])):
                positions[i] = out_dim
            out_dim += 1
            in_dim += 1
        else:  # an integer index
            in_dim += 1
    return positions or None


def _getitem_with_data_slices(a: TensorProxy, key, positions: dict) -> TensorProxy:
    elements = key if isinstance(key, tuple) else (key,)
    static = tuple(slice(None) if i in positions else k for i, k in enumerate(elements))
    whole = not any(_is_partial(k) or not isinstance(k, slice) for k in static)
    y = a if whole else ltorch.getitem(a, static)
    for i, dim in positions.items():
        y = _slice_dim(y, dim, elements[i])
    return y


def _as_tensor(n, like: TensorProxy) -> TensorProxy:
    return ltorch.full((), n, dtype=dtypes.int64, device=like.device)


def _normalized(n, length, like: TensorProxy):
    """A bound ``n`` of a dimension of ``length``, negative ones counted from the end: a 0-d
    tensor where ``n`` was read from data (no decision on it), else ``n`` itself."""
    if not _valueless(n):
        return n if n >= 0 else n + length  # (a decision on a size with a value is guarded)
    t = _as_tensor(n, like)
    return ltorch.where(ltorch.lt(t, 0), ltorch.add(t, length), t)


def _positions(y: TensorProxy, dim: int) -> TensorProxy:
    """``0, 1, ..., L - 1`` for dimension ``dim`` of length L, as a cumulative sum of ones:
    thunder's ``arange`` asks ``L == 0``, and its iota meta gives ``arange(0)`` shape ``()``
    where torch's is ``(0,)``."""
    ones = ltorch.ones((y.shape[dim],), dtype=dtypes.int64, device=y.device)
    return ltorch.sub(ltorch.cumsum(ones, 0), 1)


def _select_positions(y: TensorProxy, dim: int, mask: TensorProxy) -> TensorProxy:
    return ltorch.index_select(y, dim, _flat_indices(mask))


def _slice_dim(y: TensorProxy, dim: int, key: slice) -> TensorProxy:
    length = y.shape[dim]
    step = 1 if key.step is None else key.step
    if step <= 0:
        raise ValueError("step must be greater than zero")
    start = 0 if key.start is None else _normalized(key.start, length, y)
    stop = length if key.stop is None else _normalized(key.stop, length, y)
    positions = _positions(y, dim)
    mask = ltorch.logical_and(ltorch.ge(positions, start), ltorch.lt(positions, stop))
    if step != 1:
        first = ltorch.clamp(start, min=0) if _is_tensor(start) else max(start, 0)
        mask = ltorch.logical_and(mask, ltorch.eq(ltorch.remainder(ltorch.sub(positions, first), step), 0))
    return _select_positions(y, dim, mask)


def _checked(mask: TensorProxy, ok: TensorProxy, message: str) -> TensorProxy:
    return data_dependent_ops.call("metatrace_check", mask, ok, message)


def _narrow(input, dim, start, length):
    if not _is_tensor(input) or not (_valueless(start) or _valueless(length)):
        return ltorch.narrow(input, dim, start, length)
    dim = dim if dim >= 0 else dim + input.ndim
    size = input.shape[dim]
    start = _normalized(start, size, input)
    start_t = start if _is_tensor(start) else _as_tensor(start, input)
    length_t = length if _is_tensor(length) else _as_tensor(length, input)
    stop_t = ltorch.add(start_t, length_t)
    positions = _positions(input, dim)
    mask = ltorch.logical_and(ltorch.ge(positions, start_t), ltorch.lt(positions, stop_t))
    ok = ltorch.logical_and(
        ltorch.logical_and(ltorch.ge(start_t, 0), ltorch.ge(length_t, 0)), ltorch.le(stop_t, size)
    )
    message = f"narrow(): start + length exceeds the size of dimension {dim}, or start or length is out of range"
    return _select_positions(input, dim, _checked(mask, ok, message))


def _topk(input, k, dim=-1, largest=True, sorted=True, *, out=None):
    if out is not None or not _is_tensor(input) or not _valueless(k):
        kwargs = {} if out is None else {"out": out}
        return torch.return_types.topk(ltorch.topk(input, k, dim, largest, sorted, **kwargs))
    dim = dim if dim >= 0 else dim + max(input.ndim, 1)
    size = input.shape[dim]
    values, indices = ltorch.topk(input, size, dim, largest, True)
    k_t = _as_tensor(k, input)
    mask = ltorch.lt(_positions(input, dim), k_t)
    ok = ltorch.logical_and(ltorch.ge(k_t, 0), ltorch.le(k_t, size))
    mask = _checked(mask, ok, f"topk(): selected index k out of range of dimension {dim}")
    # (torch's named pair: ``.values``, ``.indices``; thunder's own topk returns a plain tuple)
    return torch.return_types.topk((_select_positions(values, dim, mask), _select_positions(indices, dim, mask)))


# --- repeat_interleave with tensor repeats, bincount, unique: metatrace.metas.torch_ops.data_dependent_ops ---


def _repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    if repeats is None and _is_tensor(input):  # torch.repeat_interleave(repeats)
        indices, _total = data_dependent_ops.call("metatrace_repeat_indices", input)
        return indices
    if not (_is_tensor(input) and _is_tensor(repeats)):
        return ltorch.repeat_interleave(input, repeats, dim, output_size=output_size) if output_size is not None \
            else ltorch.repeat_interleave(input, repeats, dim)
    if dim is None:
        input, dim = ltorch.flatten(input), 0
    dim = dim if dim >= 0 else dim + input.ndim
    size = input.shape[dim]
    if repeats.ndim > 1:
        raise RuntimeError("repeat_interleave: repeats must be 0-dim or 1-dim tensor")
    if repeats.ndim == 0 or runtime.truth(runtime.eq(repeats.shape[0], 1)):
        repeats = ltorch.expand(ltorch.reshape(repeats, (1,)), (size,))
    elif not runtime.truth(runtime.eq(repeats.shape[0], size)):
        raise RuntimeError("repeats must have the same size as input along dim")
    indices, _total = data_dependent_ops.call("metatrace_repeat_indices", repeats)
    return ltorch.index_select(input, dim, indices)


def _bincount(input, weights=None, minlength=0):
    if not _is_tensor(input):
        return ltorch.bincount(input, weights, minlength)
    counts, _length = data_dependent_ops.call("metatrace_bincount", input, weights, minlength)
    return counts


def _unique_results(input, sorted, consecutive, return_inverse, return_counts):
    values, inverse, counts, _count = data_dependent_ops.call("metatrace_unique", input, sorted, consecutive)
    results = (values,) + ((inverse,) if return_inverse else ()) + ((counts,) if return_counts else ())
    return results[0] if len(results) == 1 else results


def _unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    if not _is_tensor(input) or dim is not None:
        raise NotImplementedError("torch.unique with dim= is not supported under metatrace (a size read from data)")
    return _unique_results(input, sorted, False, return_inverse, return_counts)


def _unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    if not _is_tensor(input) or dim is not None:
        raise NotImplementedError(
            "torch.unique_consecutive with dim= is not supported under metatrace (a size read from data)")
    return _unique_results(input, True, True, return_inverse, return_counts)


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


def patches() -> list[Patch]:
    why = "ops with a size read from tensor data (an unbacked size)"
    table = (
        (torch.nonzero, torch.Tensor.nonzero, "nonzero", _nonzero),
        (torch.argwhere, torch.Tensor.argwhere, "argwhere", _argwhere),
        (torch.where, None, None, _where),  # (Tensor.where(cond, y) always has three operands)
        (torch.masked_select, torch.Tensor.masked_select, "masked_select", _masked_select),
        (None, torch.Tensor.__getitem__, "getitem", _getitem),
        (torch.narrow, torch.Tensor.narrow, "narrow", _narrow),
        (torch.topk, torch.Tensor.topk, "topk", _topk),
        (torch.repeat_interleave, torch.Tensor.repeat_interleave, "repeat_interleave", _repeat_interleave),
        (torch.bincount, torch.Tensor.bincount, "bincount", _bincount),
        (torch.unique, torch.Tensor.unique, "unique", _unique),
        (torch.unique_consecutive, torch.Tensor.unique_consecutive, "unique_consecutive", _unique_consecutive),
    )
    return torch_lookasides.rows(table, why)
