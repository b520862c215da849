"""A number's methods and attributes that its proxy lacks (``n.bit_length()``, ``f.is_integer()``,
``n.real``): answered from the number's value, guarded by equality, except the few whose result is
the proxy itself or a constant (:data:`_SYMBOLIC_ATTRIBUTES`); a dunder the number's type lacks
(``f.__xor__`` on a float) raises AttributeError as in eager. The attribute read's one wrapper
(:mod:`metatrace.interpret.reads.attribute_reads`) calls these.
"""

from __future__ import annotations

import thunder.core.interpreter as interpreter
from thunder.core.interpreter import INTERPRETER_SIGNALS, WrappedValue, do_raise, unwrap, wrap_const
from thunder.core.proxies import NumberProxy

from metatrace.errors import MetatraceError
from metatrace.metas import concretizations
from metatrace.metas.proxy_edits import set_attribute_wrapper

# Attributes of a number whose value needs no guard: (python type, name) -> from the proxy.
_SYMBOLIC_ATTRIBUTES = {
    (int, "real"): lambda n: n, (int, "numerator"): lambda n: n, (int, "imag"): lambda n: 0,
    (int, "denominator"): lambda n: 1, (float, "real"): lambda f: f, (float, "imag"): lambda f: 0.0,
    (int, "conjugate"): lambda n: (lambda: n), (float, "conjugate"): lambda f: (lambda: f),
}


def number_attribute(obj, name):
    """``n.bit_length``, ``f.is_integer``, ``n.real`` on a number proxy: from the number's value
    (guarded by equality), or symbolic where :data:`_SYMBOLIC_ATTRIBUTES` has it. NotImplemented
    when ``obj`` is no number proxy or its number has no such attribute."""
    if not isinstance(obj, NumberProxy) or not isinstance(name, str):
        return NotImplemented
    python_type = getattr(obj, "python_type", None)
    if python_type not in (bool, int, float, complex) or not hasattr(python_type, name):
        return NotImplemented
    symbolic = _SYMBOLIC_ATTRIBUTES.get((int if python_type is bool else python_type, name))
    if symbolic is not None and python_type is not bool:
        return symbolic(obj)
    concretizations.bake_in(obj, obj.value, f"the attribute {python_type.__name__}.{name} (C code reads the value)")
    return getattr(obj.value, name)


# The dunders of Python's numbers (a proxy's ``__dict__`` is read by the interpreter itself).
_NUMBER_DUNDERS = frozenset(name for typ in (int, float, complex) for name in dir(typ) if name.startswith("__"))


def _missing_dunder(n: NumberProxy, name) -> AttributeError | None:
    """``f.__xor__`` on a float: the proxy class has every number dunder, the float has not."""
    python_type = getattr(n, "python_type", None)
    if (not isinstance(name, str) or not name.startswith("__") or python_type not in (bool, int, float, complex)
            or name not in _NUMBER_DUNDERS or name in dir(python_type)):  # (dir: ``type.__or__`` is no float's)
        return None
    return AttributeError(f"'{python_type.__name__}' object has no attribute '{name}'")


def missing_dunder_error(obj, name):
    """The AttributeError eager raises for a dunder that ``obj``'s number type lacks, or None."""
    return _missing_dunder(unwrap(obj), unwrap(name))


def from_value(obj, name, result):
    """``result`` of thunder's attribute read of a number proxy, or, where that raised
    AttributeError, the attribute answered from the number's value."""
    runtimectx = interpreter.get_interpreterruntimectx()
    if result is not INTERPRETER_SIGNALS.EXCEPTION_RAISED or not isinstance(runtimectx.curexc, AttributeError):
        return result
    try:
        found = number_attribute(unwrap(obj), unwrap(name))
    except MetatraceError as e:
        runtimectx.curexc = None
        return do_raise(e)
    if found is NotImplemented:
        return result
    runtimectx.curexc = None
    # thunder wraps an attribute as read from its object, which the prologue would unpack
    # (an input's ``.real``); the value known here is a constant or the number itself
    if type(obj) is WrappedValue and interpreter.get_interpretercompilectx()._with_provenance_tracking:
        set_attribute_wrapper(obj, unwrap(name), obj if found is unwrap(obj) else wrap_const(found))
    return found
