"""Which values the user's code holds as a ``torch.Size`` in eager: a tensor's shape and what
slicing, ``+`` and ``*`` make of it.

thunder's ``TensorProxy.shape`` (and ``x.size()``) is a plain tuple of sizes, so C code given it
printed ``(2, 3)`` where eager prints ``torch.Size([2, 3])`` (``str(x.shape)``, ``f"{x.shape}"``,
``"%s" % (x.shape,)``, stock thunder too), and ``isinstance(x.shape, torch.Size)`` was False. The
tuple must stay a tuple of proxies for thunder's operators, so the value keeps its type; what
changes is how C code and the user's type checks see it. While metatrace compiles, the wrapper of
each such value is noted in the compile's session (:func:`is_size`):

- the wrapper of ``x.shape`` read from a tensor proxy (thunder's attribute wrapper, one per
  tensor) and of ``x.size()``;
- a slice of a noted value, and ``+``/``*`` with one (eager's ``torch.Size`` operators return a
  ``torch.Size`` on either side: ``(1,) + x.shape`` too).

:mod:`metatrace.interpret.calls.c_code.eager_views` gives C code a noted value as a ``torch.Size`` (its numbers'
values guarded as for any number C code reads); ``isinstance`` here and ``type``
(:mod:`metatrace.interpret.calls.c_code.values_as_text`) answer for it as eager does, so code branching on
``isinstance(size, torch.Size)`` takes eager's arm.
"""

from __future__ import annotations

import types

import thunder.core.jit_ext as jit_ext
import thunder.torch as ltorch
import torch
from thunder.core.interpreter import (
    INTERPRETER_SIGNALS, ProvenanceRecord, PseudoInst, WrappedValue, _interpret_call, wrap, wrap_const,
)
from thunder.core.proxies import TensorProxy

from metatrace.patching import Patch, item
from metatrace.state import compile_context
from metatrace.state.compile_session import session


def _sizes() -> set | None:
    """The compile's noted wrappers, None outside a compile that collects guards."""
    if compile_context.collector() is None:
        return None
    try:
        return session(jit_ext.get_jit_ctx()).sizes
    except LookupError:
        return None


def is_size(w) -> bool:
    """``w`` (a wrapper) holds what eager holds as a ``torch.Size``."""
    if type(w) is not WrappedValue or type(w.value) is not tuple:
        return False
    sizes = _sizes()
    return sizes is not None and w in sizes


def _note(w) -> None:
    sizes = _sizes()
    if sizes is not None and type(w) is WrappedValue and type(w.value) is tuple:
        sizes.add(w)


def note_shape_read(result, plain_result, obj, name) -> None:
    """thunder's attribute wrapper ``result`` of ``x.shape`` (made once per tensor wrapper) is
    noted: a step of metatrace's one wrapper of ``wrap_attribute`` (:mod:`metatrace.grad.requires_grad`)."""
    if type(plain_result) is tuple and getattr(name, "value", None) == "shape" and isinstance(
            getattr(obj, "value", None), TensorProxy):
        _note(result)


# thunder's ``ltorch.size``, interpreted under a function object no lookaside is keyed by
_SIZE = types.FunctionType(ltorch.size.__code__, ltorch.size.__globals__, "size", ltorch.size.__defaults__)


def _size_lookaside(*args, **kwargs):
    """``x.size()``: thunder's function, its whole shape noted (``x.size(0)`` is an int)."""
    result = _interpret_call(_SIZE, *args, **kwargs)
    if result is not INTERPRETER_SIGNALS.EXCEPTION_RAISED:
        _note(result)
    return result


def note_result(result, operands: tuple) -> None:
    """A tuple operator's result is noted where one of ``operands`` is a noted value: eager's
    ``torch.Size`` operators return a ``torch.Size``."""
    if result is not INTERPRETER_SIGNALS.EXCEPTION_RAISED and any(is_size(a) for a in operands):
        _note(result)


def sliced(args) -> tuple:
    """The operand of ``s[a:b]`` (not ``s[i]``, a number) whose kind the result keeps."""
    return args[:1] if len(args) == 2 and type(getattr(args[1], "value", None)) is slice else ()


def isinstance_of_size(obj, cls):
    """``isinstance(x.shape, torch.Size)``: eager's answer; None for any other object."""
    if not is_size(obj):
        return None
    try:
        answer = issubclass(torch.Size, cls.value)
    except TypeError:
        return None
    pr = ProvenanceRecord(PseudoInst.LOOKASIDE, inputs=[wrap_const(isinstance).provenance, obj.provenance, cls.provenance])
    return wrap(answer, provenance=pr)


def patches() -> list[Patch]:
    general = "thunder.core.jit_ext._general_jit_lookaside_map"
    return [
        item(jit_ext._general_jit_lookaside_map, ltorch.size, _size_lookaside,
             "x.size() is noted as eager's torch.Size", label=general),
    ]
