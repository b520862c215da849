"""thunder's torch-level metas that refuse symbolic numbers, wrapped to accept them.

While metatrace is enabled:

- ``torch.tensor(n)`` is ``full((), n)``, as thunder does for a Python number (its argument check
  refuses a number proxy). ``torch.tensor([n, n])``'s numbers are baked in (equality guards; the
  prim's meta accepts Python numbers only), see :func:`concrete_numbers`.
- ``torch.randint``'s bounds are baked in (its prim wants ints).
- ``torch.arange`` with a float bound makes the default float dtype (torch's rule).
- ``torch.numel(t)`` is the number of elements, not the deferred function thunder leaves under
  symbolic values.
- ``torch.linalg.multi_dot``: thunder's function refuses symbolic sizes (it picks the
  multiplication order from their values). Its inputs' sizes are baked in (equality guards,
  ``multi_dot: thunder chooses the multiplication order from the sizes``) and it runs on views
  of them with those static sizes: one entry per shape, never an error.
- ``torch.set_grad_enabled(flag)``: a symbolic flag is baked in.
- ``x.detach()``: a tensor like ``x`` (thunder registers it automatically, pinning every size).
"""

from __future__ import annotations

import functools
from typing import Any

import thunder.core.prims as prims
import thunder.torch as ltorch
import torch
from thunder.core.proxies import IntegerProxy, NumberProxy, TensorProxy
from thunder.core.pytree import tree_flatten, tree_unflatten
from thunder.core.trace import get_tracectx
from thunder.core.transforms import nondifferentiable_vjp_symbols

from metatrace.metas import concretizations, python_executor
from metatrace.metas.torch_ops.auto_registered import thunder_symbols_of
from metatrace.patching import SYMBOL_METAS, Patch, attribute, member


def tracing() -> bool:
    """A trace records here: not a meta (the runtime handles those), not plain Python."""
    trace = get_tracectx()
    return trace is not None and not (trace.scopes and trace.scopes[-1] is None)


def concrete_numbers(x: Any, why: str = "an element of torch.tensor's data") -> Any:
    """``x`` with every number proxy among its leaves replaced by its value, guarded by equality."""
    leaves, spec = tree_flatten(x)
    if not any(isinstance(leaf, NumberProxy) for leaf in leaves):
        return x
    out = []
    for leaf in leaves:
        if isinstance(leaf, NumberProxy):
            concretizations.bake_in(leaf, leaf.value, why)
            leaf = leaf.value
        out.append(leaf)
    return tree_unflatten(out, spec)


def unfolded_times_one(n: IntegerProxy) -> IntegerProxy:
    """``1 * n`` as thunder records it (a new number), bypassing the identity fold of
    ``metatrace.proxies.number_concretizations`` (whose operator keeps thunder's as ``__wrapped__``)."""
    rmul = NumberProxy.__dict__["__rmul__"]
    return getattr(rmul, "__wrapped__", rmul)(n, 1)


def numel_number(t: TensorProxy, n):
    """A 1-d tensor's product of sizes is its size (safety_net folds ``1 * n``): as numel it is a
    new number (``1 * n`` recorded), which a symbol may return and a caller may make callable."""
    if isinstance(n, IntegerProxy) and any(n is s for s in t._shape):
        return unfolded_times_one(n)
    return n


def _multi_dot_meta(original):
    """``ltorch.multi_dot`` on tensors with symbolic sizes: sizes guarded by value, static views."""

    @functools.wraps(original)
    def meta(tensors, *, out=None):
        if not tracing() or not any(isinstance(s, NumberProxy) for t in tensors for s in t._shape):
            return original(tensors, out=out)
        why = "multi_dot: thunder chooses the multiplication order from the sizes"
        static = []
        for t in tensors:
            for s in t._shape:
                if isinstance(s, NumberProxy):
                    concretizations.bake_in(s, s.value, why)
            # prims.reshape, not clang's: that returns the tensor itself when the sizes compare equal
            static.append(prims.reshape(t, tuple(s.value if isinstance(s, NumberProxy) else s for s in t._shape)))
        return original(static, out=out)

    return meta


def _tensor_meta(original):
    """``ltorch.tensor``: a number proxy takes thunder's own path for a number (``full((), n)``),
    which its argument check (``isinstance(x, (Number, Sequence))``) refuses for a proxy."""

    @functools.wraps(original)
    def meta(seq_or_number, *, device=None, dtype=None, requires_grad=False, pin_memory=False):
        if not isinstance(seq_or_number, NumberProxy) or requires_grad or pin_memory:
            return original(seq_or_number, device=device, dtype=dtype, requires_grad=requires_grad, pin_memory=pin_memory)
        import thunder.core.dtypes as dtypes
        import thunder.torch as ltorch

        if dtype is None:
            dtype = dtypes.numbertype_to_dtype(dtypes.to_dtype(seq_or_number))
        return ltorch.full((), seq_or_number, dtype=dtype, device=device)

    return meta


def _arange_meta(original):
    """``ltorch.arange``: a float bound makes the default float dtype (torch's rule); thunder asks
    ``isinstance(x, float)``, which a float number proxy is not: ``torch.arange(n * 1.5)`` was
    int64 in the trace (and in the result, under grad)."""

    @functools.wraps(original)
    def meta(start, end=None, step=1, *, device=None, dtype=None):
        if dtype is None and any(
            isinstance(x, NumberProxy) and python_executor.number_type(x) is float for x in (start, end, step)
        ):
            dtype = ltorch.maybe_get_default_dtype(None)
        return original(start, end, step, device=device, dtype=dtype)

    return meta


def _randint_meta(original):
    """``ltorch.randint``: ``prims.randint``'s meta accepts int bounds only: they are baked in."""

    @functools.wraps(original)
    def meta(*args, **kwargs):
        args = list(args)
        bounds = (0,) if len(args) == 2 and isinstance(args[1], (tuple, list)) else (0, 1)
        for i in bounds:
            if i < len(args) and isinstance(args[i], NumberProxy):
                concretizations.bake_in(args[i], args[i].value, "a bound of torch.randint")
                args[i] = args[i].value
        return original(*args, **kwargs)

    return meta


def _numel_meta(original):
    """``torch.numel(t)`` (``ltorch.numel``) is the product too, not the deferred function."""

    @functools.wraps(original)
    def meta(a, /):
        n = original(a)
        if callable(n) and not isinstance(n, (int, NumberProxy)) and tracing():
            a.shape  # noqa: B018 - the sizes numel multiplies are bound when the product uses them
            return numel_number(a, n())
        return n

    return meta


def _set_grad_enabled_meta(original):
    """``torch.set_grad_enabled(flag)``: thunder stores the flag in its compile data and passes it
    to ``torch._C._set_grad_enabled`` after the call, which takes a bool only: a symbolic flag
    (a bool read from a closure, an argument) is baked in, guarded by value. Anything but a bool
    raises eager's TypeError (thunder's symbol stored ``True * True``, an int, as the mode)."""

    @functools.wraps(original)
    def meta(*args, **kwargs):
        args = concrete_numbers(args, "torch.set_grad_enabled")
        flag = args[0] if args else kwargs.get("enabled")
        if type(flag) is not bool:
            raise TypeError(f"set_grad_enabled(): argument 'enabled' (position 1) must be bool, not {type(flag).__name__}")
        return original(*args, **kwargs)

    return meta


def _detach_meta(original):
    """``torch.detach`` / ``Tensor.detach`` (registered automatically: torch's meta on a fake
    tensor of the sizes' values, each guarded by equality): a tensor like its input, without
    grad, its sizes the input's symbols."""

    @functools.wraps(original)
    def meta(a, *args, **kwargs):
        if isinstance(a, TensorProxy) and not args and not kwargs:
            return TensorProxy(like=a, requires_grad=False)
        return original(a, *args, **kwargs)

    return meta


def patches() -> list[Patch]:
    why = "ltorch tensor/randint/arange/numel/multi_dot/set_grad_enabled/detach metas accept symbols"
    detach_syms = thunder_symbols_of(torch.detach, torch.Tensor.detach)
    detach = [(sym, _detach_meta) for sym in detach_syms]
    # its automatic grad rule runs torch's on fake tensors of the sizes' values: detach has none
    no_grad = [
        member(nondifferentiable_vjp_symbols, sym.id, "detach carries no gradient",
               label="thunder.core.transforms.nondifferentiable_vjp_symbols")
        for sym in detach_syms
    ]
    return no_grad + [
        attribute(sym, "meta", wrap, why, wrap=True, label=SYMBOL_METAS)
        for sym, wrap in (
            (ltorch.tensor, _tensor_meta),
            (ltorch.randint, _randint_meta),
            (ltorch.arange, _arange_meta),
            (ltorch.numel, _numel_meta),
            (ltorch.multi_dot, _multi_dot_meta),
            (ltorch._set_grad_enabled_with_warning, _set_grad_enabled_meta),
            *detach,
        )
    ]
