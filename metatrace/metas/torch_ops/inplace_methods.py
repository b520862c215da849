"""In-place writes eager PyTorch has and thunder 0.2.6 lacks, as thunder's own in-place writes.

- ``Tensor.fill_(value)``: thunder has no ``fill_`` (a tensor proxy raised "Unknown attribute
  fill_"). A number or a 0-dimensional tensor, as eager (which refuses a tensor of more
  dimensions), written with ``copy_`` like thunder's ``zero_``: the value's gradient is the sum of
  the destination's, as eager's.
- ``out=`` of a torch function (``torch.add(a, b, out=d)``): thunder's symbols take no ``out``
  and raised a TypeError. Eager's rules: under grad mode an argument that requires grad raises;
  the result must be castable to ``out``'s dtype; ``out`` itself is returned, written with
  ``copy_``. Eager resizes an ``out`` of another shape (with a deprecation warning); that raises
  a MetatraceError here (a tensor proxy cannot change its shape).
"""

from __future__ import annotations

import thunder.torch as ltorch
import torch
from numbers import Number
from thunder.core.compile_data import get_compile_data
from thunder.core.proxies import NumberProxy, TensorProxy
from thunder.core.pytree import tree_iter

from metatrace.errors import MetatraceError
from metatrace.metas.torch_ops import torch_lookasides
from metatrace.patching import Patch


def _fill_(a, value):
    if isinstance(value, TensorProxy):
        if value.ndim != 0:
            raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with {value.ndim} dimensions.")
        return ltorch.copy_(a, ltorch.expand(ltorch.to(value, a.dtype), a.shape))
    if not isinstance(value, (Number, NumberProxy)):
        raise TypeError(f"fill_(): argument 'value' must be Number, not {type(value).__name__}")
    return ltorch.copy_(a, ltorch.full_like(a, value))


def call_with_out(symbol, call, args: tuple, kwargs: dict):
    """``symbol(*args, **kwargs)`` whose ``kwargs`` hold a tensor ``out`` (``call`` runs the
    symbol without it), by eager's rules for ``out=``."""
    kwargs = dict(kwargs)
    out = kwargs.pop("out")
    name = symbol.name
    if not isinstance(out, TensorProxy):
        raise MetatraceError(f"{name}(out=...): out= with a {type(out).__name__} (several outputs) is not supported")
    cd = get_compile_data()
    if cd is not None and cd.is_grad_enabled and any(
        isinstance(t, TensorProxy) and t.requires_grad for t in tree_iter((args, kwargs, out))
    ):
        raise RuntimeError(f"{name}(): functions with out=... arguments don't support automatic differentiation, "
                           "but one of the arguments requires grad.")
    result = call(*args, **kwargs)
    if not isinstance(result, TensorProxy):
        raise MetatraceError(f"{name}(out=...): out= of a function returning {type(result).__name__} is not supported")
    have, want = ltorch.to_torch_dtype(result.dtype), ltorch.to_torch_dtype(out.dtype)
    if not torch.can_cast(have, want):
        raise RuntimeError(f"result type {_short(have)} can't be cast to the desired output type {_short(want)}")
    if len(out.shape) != len(result.shape) or any(o != r for o, r in zip(out.shape, result.shape)):
        raise MetatraceError(f"{name}(out=...): out has shape {tuple(out.shape)} and the result {tuple(result.shape)}: "
                             "eager resizes out, which metatrace does not support; pass an out of the result's shape")
    ltorch.copy_(out, result)
    return out


def _short(dtype: torch.dtype) -> str:
    """torch's name in its messages: ``Float`` for float32, ``Long`` for int64."""
    return {torch.float32: "Float", torch.float64: "Double", torch.float16: "Half", torch.bfloat16: "BFloat16",
            torch.int64: "Long", torch.int32: "Int", torch.int16: "Short", torch.int8: "Char", torch.uint8: "Byte",
            torch.bool: "Bool", torch.complex64: "ComplexFloat", torch.complex128: "ComplexDouble"}.get(dtype, str(dtype))


def patches() -> list[Patch]:
    why = "in-place writes eager has and thunder lacks, as thunder's copy_"
    return torch_lookasides.rows(((None, torch.Tensor.fill_, "fill_", _fill_),), why, add_method=True)
