"""torch functions that thunder only auto-registers, traced as thunder ops with symbolic sizes.

thunder registers some torch functions without a thunder definition (``thunder/torch/
default_torch_ops.py``, tag ``AUTO_REGISTERED``): their meta runs torch on fake tensors made with
``torch.empty(proxy.shape)``, which turns every symbolic size into its value (an equality guard)
and gives outputs static sizes; their backward does the same. Under symbolic values that pins the
entry to one shape.

While metatrace is enabled, these are traced as their definition in thunder ops (the sizes
propagate through ported prims, the grad transform uses those ops' rules):

- ``torch.addmm(input, mat1, mat2, *, beta=1, alpha=1)`` (and ``Tensor.addmm``) is
  ``beta * input + alpha * (mat1 @ mat2)``. ``beta == 0`` (torch does not read ``input``'s
  values then, nan included), ``out=`` and non-2-d matrices keep thunder's registration.
  Hugging Face's ``Conv1D`` (GPT-2) calls it on ``x.view(-1, x.size(-1))``.
- ``torch.diff(input, n, dim, prepend, append)`` (and ``Tensor.diff``) is ``cat`` then ``n`` times
  ``x[..., 1:] - x[..., :-1]`` along ``dim`` (``!=`` for bool, as torch); prepend and
  append as numbers, and n < 0, keep thunder's registration. Hugging Face's masks call it on
  position ids (``find_packed_sequence_indices``).
- ``Tensor.new_ones/new_zeros/new_full(size, ...)`` are ``full(size, value)`` and
  ``Tensor.new_empty(size)`` is ``empty(size)``, with the tensor's dtype and device unless given
  (``requires_grad=True``, layouts, pinned memory keep thunder's registration, whose meta guards
  every number it bakes in: metatrace.proxies.float_numbers): thunder's fake-tensor meta read
  the sizes' values, and the result carries no gradient to the tensor it is called on.

A registered function eager PyTorch accepts more of than thunder's definition:

- ``torch.cat(tensors, dim)`` skips 1-d empty tensors (shape ``(0,)``) beside tensors of more
  dimensions, as eager's legacy rule does (thunder's ``cat`` raised "Expected dimension in
  inclusive range"): transformers' ``DynamicLayer`` starts its key/value cache as
  ``torch.tensor([])`` and concatenates the first keys to it along ``dim=-2``, in every decoder's
  forward with the default ``use_cache=True``.

- ``torch.clamp`` (``clamp_``, ``clip``: thunder's one definition) with one number bound that is
  NaN: eager keeps the tensor (``x.clamp(min=nan)`` is ``x``; its one-bound kernel compares
  ``x < min``), thunder's ``where(a > min, a, min)`` gave NaN everywhere, and under grad mode
  (where thunder traces its definition instead of calling torch) a jitted ``x.clamp_(min=max(r,
  0.5))`` returned NaN for ``r = nan`` (stock thunder too). One number bound on a floating tensor
  is ``where(a >= min, a, where(a < min, min, a))`` (``<=``, ``>`` for max), the same values for
  every other bound and no decision on a symbolic bound, the gradient eager's (it flows where
  ``a >= min`` only: the inner ``a`` is detached); two bounds, or tensor bounds, keep thunder's (eager
  propagates a NaN bound there).

- ``F.embedding(idx, w, padding_idx=p)`` with ``p < 0`` is ``p + w.shape[0]``, as eager
  normalizes it: thunder passed ``-1`` on, its "no padding index" sentinel, and the weight's
  gradient at row ``-1`` was not zeroed (stock thunder too).

The functions are lookasides of the torch functions and entries of thunder's method table for
tensor proxies (``thunder.torch.langctx._method_name_to_fn_map``); what they do not cover calls
thunder's symbol, as before.
"""

from __future__ import annotations

import thunder.core.dtypes as dtypes
import thunder.core.utils as utils
import thunder.torch as ltorch
import torch
from thunder.core.proxies import TensorProxy

from metatrace.metas.torch_ops import torch_lookasides
from metatrace.patching import SYMBOL_METAS, Patch, attribute


def _addmm(input, mat1, mat2, *, beta=1, alpha=1, out=None):
    """torch.addmm in thunder ops; anything this does not cover goes to thunder's registration."""
    if (
        out is not None
        or not all(isinstance(t, TensorProxy) for t in (input, mat1, mat2))
        or mat1.ndim != 2
        or mat2.ndim != 2
        or beta == 0
    ):
        return ltorch.addmm(input, mat1, mat2, beta=beta, alpha=alpha, out=out)
    product = ltorch.matmul(mat1, mat2)
    if alpha != 1:
        product = ltorch.mul(product, alpha)
    if beta != 1:
        input = ltorch.mul(input, beta)
    return ltorch.add(input, product)


def _diff(input, n=1, dim=-1, prepend=None, append=None):
    parts = [t for t in (prepend, input, append) if t is not None]
    if (
        not all(isinstance(t, TensorProxy) for t in parts)
        or not isinstance(n, int)
        or n < 0
        or input.ndim == 0
        or not isinstance(dim, int)
        or not -input.ndim <= dim < input.ndim  # (thunder's registration raises as torch does)
    ):
        return ltorch.diff(input, n=n, dim=dim, prepend=prepend, append=append)
    x = ltorch.cat(parts, dim) if len(parts) > 1 else input
    d = dim % input.ndim
    later = (slice(None),) * d + (slice(1, None),)
    earlier = (slice(None),) * d + (slice(None, -1),)
    for _ in range(n):  # an empty or 1-long dimension gives empty differences, as in torch
        a, b = ltorch.getitem(x, later), ltorch.getitem(x, earlier)
        x = ltorch.ne(a, b) if x.dtype is dtypes.bool8 else ltorch.sub(a, b)
    return x


def _is_legacy_empty(t) -> bool:
    return isinstance(t, TensorProxy) and t.ndim == 1 and t.shape[0] == 0


def _cat(tensors, dim=0, *, out=None):
    """torch.cat, with eager's skipping of ``(0,)``-shaped tensors beside higher-dimensional ones
    (their shape is static: a symbolic first size reaches the comparison, which guards it)."""
    if out is None and isinstance(tensors, (tuple, list)) and any(
        isinstance(t, TensorProxy) and t.ndim > 1 for t in tensors
    ):
        kept = [t for t in tensors if not _is_legacy_empty(t)]
        if len(kept) < len(tensors):
            tensors = kept
    if out is not None:
        return ltorch.cat(tensors, dim, out=out)
    return ltorch.cat(tensors, dim)


def _embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
               sparse=False):
    if padding_idx is not None and isinstance(weight, TensorProxy) and weight.ndim >= 1:
        n = weight.shape[0]
        # eager's check, before the normalized index could become thunder's sentinel again (-6 of 5 rows)
        utils.check(-n <= padding_idx < n, lambda: "Padding_idx must be within num_embeddings",
                    exception_type=AssertionError)
        if padding_idx < 0:
            padding_idx = padding_idx + n
    return ltorch.embedding(input, weight, padding_idx=padding_idx, max_norm=max_norm, norm_type=norm_type,
                            scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


# new_empty's "fill": its values are unspecified, so thunder's empty
_EMPTY = object()


def _new_filled(name: str, value):
    """``Tensor.<name>(size, ...)`` as ``full(size, value)`` (``empty(size)`` for new_empty),
    ``size`` a sequence or the sizes as separate arguments (litgpt's LoRA calls
    ``x.new_zeros(*x.shape[:-1], n)``); ``value`` None: new_full's fill is the last argument."""

    def new(self, *size, dtype=None, device=None, requires_grad=False, layout=None, pin_memory=False, **kwargs):
        fill = kwargs.pop("fill_value", value) if value is None else value
        if value is None and fill is None and size:  # new_full(size, fill_value)
            size, fill = size[:-1], size[-1]
        if len(size) == 1 and isinstance(size[0], (tuple, list)):
            size = tuple(size[0])
        original = getattr(ltorch, name)
        if (
            not isinstance(self, TensorProxy)
            or kwargs
            or requires_grad
            or pin_memory
            or layout not in (None, torch.strided)
            or fill is None
        ):
            args = (*size, fill) if value is None else size
            return original(self, *args, dtype=dtype, device=device, requires_grad=requires_grad,
                            layout=layout, pin_memory=pin_memory, **kwargs)
        device = device if device is not None else self.device
        dtype = dtype if dtype is not None else self.dtype
        if fill is _EMPTY:
            return ltorch.empty(tuple(size), device=device, dtype=dtype)
        return ltorch.full(tuple(size), fill, device=device, dtype=dtype)

    new.__name__ = name
    return new


_new_ones = _new_filled("new_ones", 1)
_new_zeros = _new_filled("new_zeros", 0)
_new_full = _new_filled("new_full", None)
_new_empty = _new_filled("new_empty", _EMPTY)


def _clamp_meta(original):
    def clamp(a, /, min=None, max=None):
        bound = max if min is None else min
        if (min is None) == (max is None) or not isinstance(a, TensorProxy) or not dtypes.is_float_dtype(a.dtype) \
                or isinstance(bound, TensorProxy):
            return original(a, min, max)
        within, beyond = (ltorch.ge(a, bound), ltorch.lt(a, bound)) if max is None else \
            (ltorch.le(a, bound), ltorch.gt(a, bound))
        # eager's gradient flows where ``a`` is within the bound only (none for a NaN bound or a)
        return ltorch.where(within, a, ltorch.where(beyond, bound, ltorch.detach(a)))

    return clamp


def patches() -> list[Patch]:
    why = "auto-registered torch functions traced as thunder ops (symbolic sizes, grad by their rules)"
    table = (
        (torch.addmm, torch.Tensor.addmm, "addmm", _addmm),
        (torch.diff, torch.Tensor.diff, "diff", _diff),
        (torch.cat, None, None, _cat),
        (torch.nn.functional.embedding, None, None, _embedding),
        (None, torch.Tensor.new_ones, "new_ones", _new_ones),
        (None, torch.Tensor.new_zeros, "new_zeros", _new_zeros),
        (None, torch.Tensor.new_full, "new_full", _new_full),
        (None, torch.Tensor.new_empty, "new_empty", _new_empty),
    )
    return [*torch_lookasides.rows(table, why),
            attribute(ltorch.clamp, "meta", _clamp_meta(ltorch.clamp.meta),
                      "clamp with one NaN number bound keeps the tensor, as eager", label=SYMBOL_METAS)]
