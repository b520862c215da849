"""Autograd rules thunder 0.2.6 lacks, or gets wrong, for ops its torch layer emits: without one the grad
transform raised "Failed to find a gradient transform" where eager differentiates, or lost a gradient.

- ``prims.lerp(start, end, weight)`` (``torch.lerp``, ``Tensor.lerp_``: an optimizer's or an
  exponential moving average's update under grad): ``start + weight * (end - start)`` (eager
  computes ``end - (end - start) * (1 - weight)`` for weights from 0.5: equal within rounding), so the
  gradients are ``g * (1 - weight)``, ``g * weight`` and ``g * (end - start)``. The prim's
  arguments have one shape (``clang.lerp`` broadcasts first); ``weight`` may be a number.
- ``prims.index_add(a, index, value, dim)`` (``index_add_``, scatter-accumulation): ``a``'s gradient
  passes through, ``value``'s is the gradient's rows at ``index`` (``take``).
- ``prims.index_put(a, indices, values, accumulate)`` (``index_put_``, ``a[idx] = v`` with a tensor
  index): thunder's rule for ``torch.index_put`` matched its backward's gradients to the
  arguments by position, the indices' place included, so ``values`` got none (stock too: silently
  lost); a rule for the torch symbol and one for the prim, which take precedence: ``values``' is the gradient at ``indices`` (summed where ``values`` was broadcast), ``a``'s
  the gradient with those positions zeroed unless accumulating.
"""

from __future__ import annotations

import thunder.core.prims as prims
import thunder.core.transforms as transforms
from thunder.core.langctxs import Languages, langctx
from thunder.core.proxies import TensorProxy
from thunder.core.transforms import get_grad, put_grad

import thunder.torch as ltorch

from metatrace.patching import Patch, item


def _lerp_grad(start, end, weight):
    # (the forward as its formula: no executor runs prims.lerp itself once the grad transform
    # has flattened ltorch.lerp, which the torch executor runs)
    fwd = start + weight * (end - start)
    g = get_grad(fwd)
    if isinstance(start, TensorProxy):
        put_grad(start, g * (1 - weight))
    if isinstance(end, TensorProxy):
        put_grad(end, g * weight)
    if isinstance(weight, TensorProxy):
        put_grad(weight, g * (end - start))
    return fwd


def _index_add_grad(a, index, value, dim):
    fwd = prims.index_add(a, index, value, dim)
    g = get_grad(fwd)
    put_grad(a, g)
    put_grad(value, prims.take(g, index, dim))
    return fwd


def _index_put_grad(a, indices, values, accumulate=False):
    return _index_put_rule(prims.index_put, a, indices, values, accumulate)


def _torch_index_put_grad(a, indices, values, accumulate=False):
    return _index_put_rule(ltorch.index_put, a, indices, values, accumulate)


def _index_put_rule(index_put, a, indices, values, accumulate):
    fwd = index_put(a, indices, values, accumulate)
    g = get_grad(fwd)
    g_values = ltorch.getitem(g, tuple(indices))
    if len(g_values.shape) != len(values.shape) or any(p != q for p, q in zip(g_values.shape, values.shape)):
        g_values = transforms.sum_to(g_values, values.shape)  # values broadcast to the indexed shape
    put_grad(values, g_values)
    put_grad(a, g if accumulate else index_put(g, indices, ltorch.zeros_like(values), False))
    return fwd


RULES = {prims.PrimIDs.LERP: _lerp_grad, prims.PrimIDs.INDEX_ADD: _index_add_grad,
         prims.PrimIDs.INDEX_PUT: _index_put_grad, "torch.index_put": _torch_index_put_grad}


def patches() -> list[Patch]:
    return [item(transforms._grad_fn_map, key, langctx(Languages.TORCH)(rule),
                 "an op whose autograd rule thunder lacks or gets wrong gets one",
                 label="thunder.core.transforms._grad_fn_map")
            for key, rule in RULES.items()]
