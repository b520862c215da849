"""``torch.histc`` traced in thunder ops, so that its input's sizes stay symbolic.

thunder only auto-registers ``histc`` (``default_torch_ops.py``): its meta runs torch on a fake
tensor of the input's trace-time sizes, so every size of the input is pinned (an equality guard,
a compile per sequence length). transformers 5's Mixture-of-Experts layers count the tokens of
each expert with it (``grouped_mm_experts_forward``: ``torch.histc(expert_ids.float(),
bins=num_experts, min=0, max=num_experts - 1)``, a size ``batch * length * top_k``). The output's
size is ``bins``, a number of the call, so nothing about it is read from data.

While metatrace is enabled ``torch.histc(x, bins, min, max)`` (and ``Tensor.histc``) with
``min < max`` (numbers with trace-time values; ``bins``, the output's size, is guarded by
equality, ``min < max`` by its relation) is, as torch's CPU kernel computes it: each element in
``[min, max]`` falls in bin ``floor((x - min) * bins / (max - min))``, ``x == max`` in the last
bin, elements outside (and NaN) in none; the counts are ``sum`` over a one-hot comparison with
``arange(bins)``, in ``x``'s dtype. ``min >= max`` (torch then reads the data's own range),
``out=`` and integer inputs keep thunder's registration. histc has no gradient in torch either.
"""

from __future__ import annotations

from numbers import Number

import thunder.core.dtypes as dtypes
import thunder.torch as ltorch
import torch
from thunder.core.proxies import NumberProxy, TensorProxy

from metatrace.metas.torch_ops import torch_lookasides
from metatrace.patching import Patch


def _known(v) -> bool:
    """A number with a trace-time value (a size read from data has none)."""
    if isinstance(v, NumberProxy):
        return v.value is not None
    return isinstance(v, Number) and not isinstance(v, bool)


def _histc(input, bins=100, min=0, max=0, *, out=None):
    if (
        out is not None
        or not isinstance(input, TensorProxy)
        or not dtypes.is_float_dtype(input.dtype)
        or not all(_known(v) for v in (bins, min, max))
        or not min < max
    ):
        return ltorch.histc(input, bins, min, max) if out is None else ltorch.histc(input, bins, min, max, out=out)
    bins = int(bins)  # the output's size (a module's constant in MoE layers): guarded by equality
    flat = ltorch.flatten(input) if input.ndim != 1 else input
    if input.ndim == 0:
        flat = ltorch.reshape(input, (1,))
    position = ltorch.floor((flat - min) * bins / (max - min))
    position = ltorch.where(flat == max, bins - 1, position)
    inside = ltorch.logical_and(flat >= min, flat <= max)
    edges = ltorch.arange(bins, device=input.device, dtype=input.dtype)
    hits = ltorch.logical_and(ltorch.unsqueeze(position, 1) == ltorch.unsqueeze(edges, 0), ltorch.unsqueeze(inside, 1))
    return ltorch.sum(ltorch.to(hits, input.dtype), 0)


def patches() -> list[Patch]:
    why = "torch.histc in thunder ops: its input's sizes stay symbolic"
    return torch_lookasides.rows(((torch.histc, torch.Tensor.histc, "histc", _histc),), why)
