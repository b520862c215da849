"""``F.cross_entropy`` and ``F.nll_loss`` as eager computes them, where thunder's definitions differ.

- A class-index loss (``nll_loss``, and ``cross_entropy``, which calls it) with a ``weight`` that
  requires grad, grad mode on: eager raises "The function 'nll_loss_forward' is not differentiable
  with respect to argument 'weight'" on the forward (its autograd has no derivative for the
  weight; ``nll_loss2d_forward`` for inputs of more than 2 dimensions). thunder differentiated the
  input only and returned no gradient for the weight, silently (stock thunder too). Here the
  forward raises eager's error. Probability targets (``target.shape == input.shape``) do not
  reach ``nll_loss``: eager and thunder differentiate the weight there, and nothing changes.
- ``cross_entropy(..., label_smoothing=s)`` with class-index targets and ``reduction="mean"``:
  thunder's ``_cross_entropy_loss_label_smoothing`` summed the smoothing term over every target,
  the ignored ones (``ignore_index``) included, where eager's (aten's
  ``cross_entropy_loss_label_smoothing``) masks them out before the sum; and with a ``weight`` it
  gathered the weight at the raw targets (an ignored target of -100 indexes out of range) and
  squeezed every dimension of 1 from them (logits ``(N, C, 1)`` broadcast them against the
  targets' mask). Stock thunder too. Here the term follows aten's code: masked, then
  reduced, divided by the ignored-free target weights (or count).
- ``F.nll_loss`` called without ``ignore_index``: thunder's definition takes ``None`` for it and
  uses -1 in the forward (eager's default is -100: a -100 target indexed out of range), and its
  grad rule gets the ``None`` and fails ("None had an unexpected type"); stock thunder too. Here
  the function is eager's signature, its default -100 and the legacy ``size_average``/``reduce``
  resolved as eager resolves them, calling thunder's symbol.
"""

from __future__ import annotations

import functools

import thunder.torch as ltorch
import torch.nn.functional as F
from torch.nn import _reduction
from thunder.core.compile_data import get_compile_data
from thunder.core.proxies import TensorProxy

from metatrace.metas.torch_ops import torch_lookasides
from metatrace.patching import SYMBOL_METAS, Patch, attribute


def _refuse_weight_gradient(original):
    """``ltorch.nll_loss``'s meta, raising eager's error for a weight that requires grad."""

    @functools.wraps(original)
    def nll_loss(a, /, target, weight=None, ignore_index=None, reduction="mean"):
        cd = get_compile_data()
        if isinstance(weight, TensorProxy) and weight.requires_grad and cd is not None and cd.is_grad_enabled:
            function = "nll_loss_forward" if isinstance(a, TensorProxy) and a.ndim <= 2 else "nll_loss2d_forward"
            raise RuntimeError(f"The function '{function}' is not differentiable with respect to argument "
                               "'weight'. This input cannot have requires_grad True.")
        return original(a, target, weight, ignore_index, reduction)

    return nll_loss


def _nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """``F.nll_loss`` with eager's defaults, as thunder's symbol."""
    if size_average is not None or reduce is not None:
        reduction = _reduction.legacy_get_string(size_average, reduce)
    return ltorch.nll_loss(input, target, weight, ignore_index, reduction)


def _label_smoothing(a, /, target, weight, ignore_index, reduction, label_smoothing):
    """aten's ``cross_entropy_loss_label_smoothing`` in thunder ops (class-index targets)."""
    class_dim = 1 if a.ndim >= 2 else 0
    num_class = a.shape[class_dim]
    log_probs = ltorch.log_softmax(a, dim=class_dim)
    # (first: its refusal of a weight requiring grad comes before anything else, as in eager)
    nll = ltorch.nll_loss(log_probs, target, weight, ignore_index, reduction)
    ignored = ltorch.eq(target, ignore_index)
    per_class = log_probs
    if weight is not None:
        per_class = ltorch.mul(log_probs, ltorch.reshape(weight, [num_class] + [1] * (a.ndim - 2)))
    # (eager: -(input * weight).sum(class_dim), then masked_fill_(ignore_mask, 0))
    smooth = ltorch.where(ignored, 0, ltorch.neg(ltorch.sum(per_class, class_dim)))
    if reduction == "none":
        term = smooth
    elif reduction == "sum":
        term = ltorch.sum(smooth)
    else:  # mean: over the targets not ignored, weighted as nll_loss's mean is
        if weight is not None:
            picked = ltorch.index_select(weight, 0, ltorch.flatten(ltorch.where(ignored, 0, target)))
            total = ltorch.sum(ltorch.where(ltorch.flatten(ignored), 0, picked))
        else:
            total = ltorch.sum(ltorch.logical_not(ignored))
        term = ltorch.true_divide(ltorch.sum(smooth), total)
    return ltorch.add(ltorch.mul(nll, 1.0 - label_smoothing), ltorch.mul(term, label_smoothing / num_class))


def patches() -> list[Patch]:
    return [
        attribute(ltorch.nll_loss, "meta", _refuse_weight_gradient,
                  "a class-index loss refuses a weight that requires grad, as eager", wrap=True, label=SYMBOL_METAS),
        attribute(ltorch, "_cross_entropy_loss_label_smoothing", _label_smoothing,
                  "label smoothing leaves ignored targets out of the mean, as eager"),
        *torch_lookasides.rows(((F.nll_loss, None, None, _nll_loss),), "F.nll_loss's default ignore_index is -100"),
    ]
