"""PyTorch's C code that thunder has no symbol for, handed a traced tensor: a clear error.

thunder's interpreter runs a C-implemented callable that has no lookaside on the unwrapped
arguments, so C code meets a ``TensorProxy`` (a tensor with no data) where it expects a
``torch.Tensor``. Falcon's masks (``transformers.masking_utils.sdpa_mask``) call ``torch.vmap``,
whose ``torch._C._functorch._add_batch_dim`` then failed with pybind11's "incompatible function
arguments ... Invoked with: <TensorProxy ...>", naming neither the call nor where it came from
(stock thunder fails the same way). While metatrace compiles, such a call raises
:class:`TracedTensorInCCodeError` instead, naming the C function, the line of the library or
user code that reached it (the innermost frame outside torch and thunder) and what to do.
Only torch's own C functions are checked (``torch._C``...): builtins that move objects
(``id``, ``isinstance``, a list's ``append``) take a proxy as any object, correctly.
"""

from __future__ import annotations

from thunder.core.interpreter import is_opaque, unwrap
from thunder.core.proxies import TensorProxy

from metatrace.errors import MetatraceError
from metatrace.guards.collect import interpreted_line
from metatrace.interpret.interpreted_frames import package_dir

_OUTSIDE = tuple(package_dir(__import__(name)) for name in ("torch", "thunder", "metatrace"))


class TracedTensorInCCodeError(MetatraceError, TypeError):
    """PyTorch C code that thunder cannot trace (no symbol, no lookaside) was given a traced
    tensor: thunder would hand it a proxy with no data (``torch.vmap`` and functorch transforms,
    for one)."""


def _torch_c_function(fn) -> bool:
    module = getattr(fn, "__module__", None) or getattr(getattr(fn, "__self__", None), "__name__", None)
    return isinstance(module, str) and module.startswith("torch._C")


def _tensor_proxy(x) -> bool:
    if isinstance(x, TensorProxy):
        return True
    return type(x) in (list, tuple) and len(x) <= 64 and any(isinstance(e, TensorProxy) for e in x)


def _caller_line() -> str:
    """The innermost line outside torch, thunder and metatrace that thunder's interpreter runs."""
    return interpreted_line(_OUTSIDE) or "?"


def error(fn, args: tuple, kwargs: dict) -> TracedTensorInCCodeError | None:
    """The error for a call of torch's C function ``fn`` (unwrapped) with a traced tensor among
    its arguments (or in a list or tuple argument), else None."""
    if not is_opaque(fn) or not _torch_c_function(fn):
        return None
    if not any(_tensor_proxy(unwrap(a)) for a in args) and not any(_tensor_proxy(unwrap(v)) for v in kwargs.values()):
        return None
    name = f"{getattr(fn, '__module__', '') or ''}.{getattr(fn, '__name__', fn)}"
    return TracedTensorInCCodeError(
        f"{name}() is PyTorch C code that thunder cannot trace, and it was given a traced tensor (a proxy with "
        f"no data), reached from {_caller_line()}. thunder has no symbol for it (torch.vmap and other functorch "
        "transforms are not traceable; stock thunder fails here too). Take a code path that avoids it (for "
        "Hugging Face masks: another attn_implementation), or call that part outside the jitted function.")
