"""Implementations of thunder's torch executor that fail where eager torch does not.

- ``prims.pad`` of a tensor with an empty dimension: thunder's ``torch_pad_prim_impl`` calls
  ``torch.nn.functional.pad``, which refuses a constant pad of a 0-length dimension ("The input
  size 0, plus negative padding 0 and 0 resulted in a negative output size"). The pad is the
  gradient of a slice (``x[:, 1:]``), so the backward of any slice of a tensor with an empty
  dimension failed, stock thunder too. Sizes read from data make empty dimensions common (an
  expert that receives no token, an all-False mask). Here an empty input pads to a tensor of
  the padding value of the padded shape (there is no element to place); any other input takes
  thunder's implementation.
"""

from __future__ import annotations

import torch
import thunder.core.prims as prims

from metatrace.patching import Patch, item

PAD = "metatrace_pad"


def _pad_impl(a: torch.Tensor, padding_value, padding_config) -> torch.Tensor:
    from thunder.executors.torchex import _pad_prim_impl

    if a.numel() != 0:
        return _pad_prim_impl(a, padding_value, padding_config)
    shape = [lo + hi + length + max(0, length - 1) * interior for length, (lo, hi, interior) in zip(a.shape, padding_config)]
    return torch.full(shape, padding_value, dtype=a.dtype, device=a.device)


def _pad_meta(a, padding_value, padding_config):
    return prims.pad.meta(a, padding_value, padding_config)  # (the rewritten meta while enabled)


def _operator(previous):
    from thunder.executors.torchex import ex

    assert previous is None, f"{PAD} is already registered on the torch executor"
    return ex.register_operator(PAD, meta=_pad_meta, fn=_pad_impl)


def patches() -> list[Patch]:
    from thunder.executors.torchex import ex
    from thunder.extend import ImplInfo

    def implementation(previous):
        return ImplInfo(symbol=ex.opmap[PAD], checker=previous.checker,
                        execution_transform=previous.execution_transform, grad_transform=previous.grad_transform)

    return [
        item(ex.opmap, PAD, _operator, "pad of a tensor with an empty dimension", wrap=True,
             label="executor torch.opmap"),
        item(ex.implmap, prims.PrimIDs.PAD, implementation, "pad of a tensor with an empty dimension", wrap=True,
             label="executor torch.implmap"),
    ]
