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
"""

from __future__ import annotations

import thunder.core.jit_ext as jit_ext
import thunder.torch as ltorch
import torch
from thunder.core.proxies import TensorProxy

from metatrace.patching import Patch, item


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


def _lookaside(fn):
    return jit_ext.ensure_recursive_proxies(
        jit_ext.interpreter_needs_wrap(jit_ext.record_source_loc_in_symbol_header(fn))
    )


def patches() -> list[Patch]:
    why = "auto-registered torch functions traced as thunder ops (symbolic sizes, grad by their rules)"
    general = "thunder.core.jit_ext._general_jit_lookaside_map"
    return [
        item(jit_ext._general_jit_lookaside_map, fn, _lookaside(_addmm), why, label=general)
        for fn in (torch.addmm, torch.Tensor.addmm)
    ]
