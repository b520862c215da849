"""A class's own ``__getattribute__`` is honoured when thunder interprets an attribute read.

thunder's ``getattr`` lookaside emulates ``object.__getattribute__`` for every object, so a class
that defines ``__getattribute__`` in Python is read as if it did not. Hugging Face's
``PretrainedConfig`` maps names through ``attribute_map`` there (``GPT2Config.num_hidden_layers``
is ``n_layer``): transformers' ``DynamicCache(config=...)``, built by every decoder's forward
with the default ``use_cache=True``, raised ``AttributeError: num_hidden_layers`` under thunder
(stock thunder too) and ran in eager.

Here the class's ``__getattribute__`` is interpreted (its own reads go through thunder's
``object.__getattribute__`` emulation, ``super().__getattribute__``), and the result is given the
provenance of the attribute read itself (``LOAD_ATTR(obj, name)``): the prologue replays a read
with Python's ``getattr``, which calls the same ``__getattribute__``, so a value that becomes an
input is unpacked as the user's code read it. The result is not cached on the object's wrapper:
an aliased name (``num_hidden_layers`` for ``n_layer``) would otherwise keep a value after a store
through the other name.
"""

from __future__ import annotations

import functools
import types

import thunder.core.interpreter as interpreter
from thunder.core.interpreter import (
    INTERPRETER_SIGNALS,
    ProvenanceRecord,
    PseudoInst,
    WrappedValue,
    _interpret_call,
    get_interpretercompilectx,
    get_interpreterruntimectx,
    unwrap,
    wrap,
    wrap_const,
)

from metatrace.patching import Patch, item


def own_getattribute(cls: type):
    """The ``__getattribute__`` a class defines in Python (a function in its MRO before
    ``object``), or None where the lookup is the builtin one."""
    for klass in cls.__mro__:
        found = klass.__dict__.get("__getattribute__")
        if found is not None:
            return found if isinstance(found, types.FunctionType) else None
    return None


def _attribute_read(obj: WrappedValue, name: WrappedValue, value):
    if not get_interpretercompilectx()._with_provenance_tracking:
        return value
    return wrap(unwrap(value), provenance=ProvenanceRecord(PseudoInst.LOAD_ATTR, inputs=[obj.provenance, name.provenance]))


def _honouring_getattribute(original):
    @functools.wraps(original)
    def getattr_lookaside(obj, name, *maybe_default):
        uobj = unwrap(obj)
        if isinstance(uobj, type):
            return original(obj, name, *maybe_default)
        custom = own_getattribute(type(uobj))
        if custom is None or not isinstance(unwrap(name), str):
            return original(obj, name, *maybe_default)
        if type(obj) is not WrappedValue:
            obj = wrap_const(obj)
        if type(name) is not WrappedValue:
            name = wrap_const(name)
        result = _interpret_call(custom, obj, name)
        ctx = get_interpreterruntimectx()
        if result is not INTERPRETER_SIGNALS.EXCEPTION_RAISED:
            return _attribute_read(obj, name, result)
        if not isinstance(ctx.curexc, AttributeError):
            return result
        # As Python's slot_tp_getattr_hook: __getattr__ after __getattribute__ failed, then the default.
        fallback = getattr(type(uobj), "__getattr__", None)
        if fallback is not None:
            ctx.curexc = None
            result = _interpret_call(fallback, obj, name)
            if result is not INTERPRETER_SIGNALS.EXCEPTION_RAISED:
                return _attribute_read(obj, name, result)
        if isinstance(ctx.curexc, AttributeError) and maybe_default:
            ctx.curexc = None
            return maybe_default[0]
        return result

    return getattr_lookaside


def patches() -> list[Patch]:
    return [item(interpreter._default_lookaside_map, getattr, _honouring_getattribute,
                 "a class's own __getattribute__ (transformers' config attribute_map) is honoured",
                 wrap=True, label="thunder.core.interpreter._default_lookaside_map")]
