"""Autograd rules thunder 0.2.6 lacks for prims its torch layer emits: without one the grad
transform raised "Failed to find a gradient transform" where eager differentiates.

- ``prims.lerp(start, end, weight)`` (``torch.lerp``, ``Tensor.lerp_``: an optimizer's or an
  exponential moving average's update under grad): ``start + weight * (end - start)`` (eager
  computes ``end - (end - start) * (1 - weight)`` for weights from 0.5: equal within rounding), so the
  gradients are ``g * (1 - weight)``, ``g * weight`` and ``g * (end - start)``. The prim's
  arguments have one shape (``clang.lerp`` broadcasts first); ``weight`` may be a number.
"""

from __future__ import annotations

import thunder.core.prims as prims
import thunder.core.transforms as transforms
from thunder.core.langctxs import Languages, langctx
from thunder.core.proxies import TensorProxy
from thunder.core.transforms import get_grad, put_grad

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


RULES = {prims.PrimIDs.LERP: _lerp_grad}


def patches() -> list[Patch]:
    return [item(transforms._grad_fn_map, key, langctx(Languages.TORCH)(rule),
                 "a prim thunder has no autograd rule for gets one", label="thunder.core.transforms._grad_fn_map")
            for key, rule in RULES.items() if key not in transforms._grad_fn_map]
