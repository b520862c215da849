"""In-place arithmetic keeps eager's cast check: the result's dtype must cast to the tensor's.

thunder writes an in-place operator as ``_copy_(a, op(a, b))``, and ``_copy_`` converts the
result to ``a``'s dtype, so ``int_tensor.add_(1.5)`` returned a truncated integer tensor where
eager raises ``result type Float can't be cast to the desired output type Long`` (and
``int_tensor.sqrt_()``, ``.div_(2)``, ``bool_tensor.add_(1)`` the same). The operators in
:data:`CHECKED` are those eager checks (its elementwise in-place arithmetic: the result type is
computed, then cast under ``torch.can_cast``); ``copy_``, ``fill_``, ``masked_fill_``, the index and
scatter operators and setitem convert their value as eager does and are not checked.

While a checked operator's meta runs, thunder's ``_copy_`` raises eager's error where
``torch.can_cast(result, a.dtype)`` is False; the dtypes are the entry's constants (the prologue
checks every input's dtype), so the error is the same on every call.
"""

from __future__ import annotations

import functools

import thunder.torch as ltorch
import torch
from thunder.core.dtypes import to_torch_dtype
from thunder.core.proxies import TensorProxy

from metatrace.state.compile_context import INPLACE_CHECKING
from metatrace.patching import SYMBOL_METAS, Patch, attribute

CHECKED = (
    # binary and ternary arithmetic
    "add_", "sub_", "mul_", "div_", "true_divide_", "floor_divide_", "fmod_", "remainder_", "pow_", "atan2_",
    "nextafter_", "copysign_", "addcmul_", "addcdiv_", "lerp_", "clamp_", "bitwise_and_", "bitwise_or_",
    "bitwise_xor_",
    # unary: the floating functions of an integer tensor are floating
    "abs_", "neg_", "sign_", "square_", "ceil_", "floor_", "round_", "trunc_", "reciprocal_", "sqrt_", "rsqrt_",
    "exp_", "exp2_", "expm1_", "log_", "log10_", "log1p_", "log2_", "sin_", "sinh_", "asin_", "asinh_", "cos_",
    "cosh_", "acos_", "acosh_", "tan_", "tanh_", "atan_", "atanh_", "erf_", "erfc_", "erfinv_", "digamma_",
    "lgamma_", "polygamma_",
)

# torch's ScalarType names, as eager's message spells them
_NAMES = {
    torch.float64: "Double", torch.float32: "Float", torch.float16: "Half", torch.bfloat16: "BFloat16",
    torch.complex64: "ComplexFloat", torch.complex128: "ComplexDouble", torch.int64: "Long", torch.int32: "Int",
    torch.int16: "Short", torch.int8: "Char", torch.uint8: "Byte", torch.bool: "Bool",
}



def _checked_meta(name: str):
    def wrap(original):
        @functools.wraps(original)
        def meta(*args, **kwargs):
            with INPLACE_CHECKING.set_to(name):
                return original(*args, **kwargs)

        return meta

    return wrap


def _checked_copy(original):
    @functools.wraps(original)
    def _copy_(a, b, /):
        if INPLACE_CHECKING.get() is not None and isinstance(a, TensorProxy) and isinstance(b, TensorProxy):
            result, out = to_torch_dtype(b.dtype), to_torch_dtype(a.dtype)
            if not torch.can_cast(result, out):
                raise RuntimeError(
                    f"result type {_NAMES.get(result, result)} can't be cast to the desired output type "
                    f"{_NAMES.get(out, out)} (in {INPLACE_CHECKING.get()})"
                )
        return original(a, b)

    return _copy_


def patches() -> list[Patch]:
    rows = [attribute(ltorch, "_copy_", _checked_copy,
                      "the result of a checked in-place operator must cast to the tensor's dtype", wrap=True)]
    for name in CHECKED:
        sym = getattr(ltorch, name, None)
        if sym is not None:  # (thunder versions differ in the operators they have)
            rows.append(attribute(sym, "meta", _checked_meta(name),
                                  "an in-place operator eager checks the cast of", wrap=True, label=SYMBOL_METAS))
    return rows
