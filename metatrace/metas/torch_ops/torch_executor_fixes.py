"""Implementations of thunder's torch executor that fail where eager torch does not.

- ``prims.pad`` of a tensor with an empty dimension: thunder's ``torch_pad_prim_impl`` calls
  ``torch.nn.functional.pad``, which refuses a constant pad of a 0-length dimension ("The input
  size 0, plus negative padding 0 and 0 resulted in a negative output size"). The pad is the
  gradient of a slice (``x[:, 1:]``), so the backward of any slice of a tensor with an empty
  dimension failed, stock thunder too. Sizes read from data make empty dimensions common (an
  expert that receives no token, an all-False mask). Here an empty input pads to a tensor of
  the padding value of the padded shape (there is no element to place); any other input takes
  thunder's implementation.
- ``nll_loss_backward`` (the gradient of ``nll_loss`` and of ``cross_entropy``), two faults of
  ``_nll_loss_backward_impl``, stock thunder too: with ``reduction="sum"`` or ``"none"`` thunder's
  forward keeps no total weight and the implementation passes aten a float64 ``tensor(0.0)`` in
  its place, which aten refuses for any other input dtype ("expected scalar type Float but found
  Double": every float32 ``cross_entropy(..., reduction="sum")`` backward); and for an input of 3
  or more than 4 dimensions (a sequence's ``(N, C, T)`` logits) it reshaped the input to 4 as
  eager's ``nll_loss_nd`` does but never reshaped the gradient back (ThunderFunction returned
  ``[N, C, 1, T]``), nor the cotangent of ``"none"`` (it compared the reduction's number with the
  string ``"none"``). Here the placeholder has the input's dtype (aten reads the total weight for
  ``"mean"`` only, which always has one) and the 4-d reshapes are undone.
"""

from __future__ import annotations

import thunder.core.prims as prims
import thunder.torch as ltorch
import torch
from torch.nn import _reduction

from metatrace.patching import Patch, item

PAD = "metatrace_pad"
NLL_LOSS_BACKWARD = "metatrace_nll_loss_backward"


def _pad_impl(a: torch.Tensor, padding_value, padding_config) -> torch.Tensor:
    from thunder.executors.torchex import _pad_prim_impl

    if a.numel() != 0:
        return _pad_prim_impl(a, padding_value, padding_config)
    shape = [lo + hi + length + max(0, length - 1) * interior for length, (lo, hi, interior) in zip(a.shape, padding_config)]
    return torch.full(shape, padding_value, dtype=a.dtype, device=a.device)


def _pad_meta(a, padding_value, padding_config):
    return prims.pad.meta(a, padding_value, padding_config)  # (the rewritten meta while enabled)


def _for_2d_kernel(t: torch.Tensor, n: int, *lead: int) -> torch.Tensor:
    """``t`` as eager's ``nll_loss_nd`` passes it to the 2-d kernel: ``(n, *lead, 1, rest)``, the
    input's ``lead`` its classes (an empty tensor ``(n, *lead, 0, 0)``: ``-1`` would be ambiguous)."""
    return t.reshape(n, *lead, 1, -1) if t.numel() > 0 else t.reshape(n, *lead, 0, 0)


def _nll_loss_backward_impl(g, a, /, target, weight, reduction, ignore_index, total_weight):
    code = _reduction.get_enum(reduction)
    if total_weight is None:  # (read by aten for "mean" only, which always has one)
        total_weight = torch.zeros((), dtype=a.dtype, device=a.device)
    total_weight = total_weight.to(a.dtype)
    if a.ndim <= 2:
        return torch.ops.aten.nll_loss_backward(g, a, target, weight, code, ignore_index, total_weight)
    if a.ndim == 4:
        return torch.ops.aten.nll_loss2d_backward(g, a, target, weight, code, ignore_index, total_weight)
    n, c = a.shape[0], a.shape[1]
    g = _for_2d_kernel(g, n) if reduction == "none" else g  # (shaped as the target)
    result = torch.ops.aten.nll_loss2d_backward(g, _for_2d_kernel(a, n, c), _for_2d_kernel(target, n), weight, code,
                                                ignore_index, total_weight)
    return result.reshape(a.shape)


def _nll_loss_backward_meta(g, a, /, target, weight, reduction, ignore_index, total_weight):
    return ltorch.nll_loss_backward.meta(g, a, target, weight, reduction, ignore_index, total_weight)


# (operator name, the implementation key it takes over, its meta, its function)
FIXES = (
    (PAD, prims.PrimIDs.PAD, _pad_meta, _pad_impl, "pad of a tensor with an empty dimension"),
    (NLL_LOSS_BACKWARD, ltorch.nll_loss_backward.id, _nll_loss_backward_meta, _nll_loss_backward_impl,
     "nll_loss's gradient for every dtype, reduction and input rank"),
)


def _operator(name, meta, fn):
    def register(previous):
        from thunder.executors.torchex import ex

        assert previous is None, f"{name} is already registered on the torch executor"
        return ex.register_operator(name, meta=meta, fn=fn)

    return register


def _implementation(name):
    def implementation(previous):
        from thunder.executors.torchex import ex
        from thunder.extend import ImplInfo

        return ImplInfo(symbol=ex.opmap[name], checker=previous.checker,
                        execution_transform=previous.execution_transform, grad_transform=previous.grad_transform)

    return implementation


def patches() -> list[Patch]:
    from thunder.executors.torchex import ex

    rows = []
    for name, key, meta, fn, why in FIXES:
        rows += [
            item(ex.opmap, name, _operator(name, meta, fn), why, wrap=True, label="executor torch.opmap"),
            item(ex.implmap, key, _implementation(name), why, wrap=True, label="executor torch.implmap"),
        ]
    return rows
