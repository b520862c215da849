"""Numbers in user code seen as text, hashes and types: the number itself, not its proxy.

thunder's interpreter runs Python builtins opaquely on the unwrapped values. Under
``cache="symbolic values"`` that bakes in whatever the builtin returned: ``str(n)`` of a number
proxy was ``'i1=2'``, ``type(n)`` was ``IntegerProxy``. While metatrace is enabled, in user code
``str``, ``repr``, ``ascii``, ``format`` (and so f-strings) and ``hash`` of a number proxy (and
``set``/``frozenset`` of numbers: a proxy hashes by identity) see the number itself: its value is
baked in with an equality guard (a string has no symbolic form). ``type(n)`` is the number's
Python type (the prologue checks input number types; a derived number's type follows from them).

Which code is calling (:func:`calling_file`, :data:`OWN_CODE`) decides it: thunder's and
metatrace's own interpreted code asks ``type(x)`` of a proxy for its dunder methods and sees the
proxy's type.
"""

from __future__ import annotations

import os

import thunder.core.jit_ext as jit_ext
from thunder.core.interpreter import interpreter_needs_wrap, wrap, wrap_const
from thunder.core.proxies import NumberProxy

from metatrace.state import compile_context
from metatrace import patching
from metatrace.guards import provenance
from metatrace.metas import concretizations
from metatrace.patching import Patch


def _concrete(x, why: str):
    """``x`` with every number proxy in it replaced by its value, each guarded by equality."""
    if isinstance(x, NumberProxy):
        concretizations.bake_in(x, x.value, why)
        return x.value
    if type(x) in (list, tuple):
        return type(x)(_concrete(e, why) for e in x)
    if type(x) is dict:
        return {k: _concrete(v, why) for k, v in x.items()}
    return x


def _has_number_proxy(x) -> bool:
    if isinstance(x, NumberProxy):
        return True
    if type(x) in (list, tuple):
        return any(_has_number_proxy(e) for e in x)
    if type(x) is dict:
        return any(_has_number_proxy(e) for e in x.values())
    return False


def _as_value_lookaside(fn, why: str, fallback):
    """``fn(x, ...)`` on the numbers' values (guarded) when an argument holds a number proxy."""

    def lookaside(*args, **kwargs):
        if compile_context.collector() is not None and any(_has_number_proxy(a.value) for a in args):
            uargs = [_concrete(a.value, why) for a in args]
            ukwargs = {k: _concrete(v.value, why) for k, v in kwargs.items()}
            res = fn(*uargs, **ukwargs)
            pr = provenance.opaque_record([wrap_const(fn).provenance, *(a.provenance for a in args)])
            return wrap(res, provenance=pr)
        return fallback(*args, **kwargs)

    lookaside.__name__ = f"metatrace_{getattr(fn, '__name__', 'fn')}_lookaside"
    return lookaside


def _type_fallback(typ):  # str, set: types, which without a lookaside the interpreter calls through type.__call__
    from thunder.core.interpreter import _type_call_lookaside

    return lambda *args, **kwargs: _type_call_lookaside(wrap_const(typ), *args, **kwargs)


def calling_file() -> str | None:
    """The file of the interpreted frame that is running, None outside the interpreter."""
    from thunder.core.interpreter import get_interpreterruntimectx

    try:
        return get_interpreterruntimectx().frame_stack[-1].code.co_filename
    except (LookupError, IndexError, AttributeError):
        return None


def _called_from_thunder() -> bool:
    """The interpreted frame calling is thunder's (its interpreter's own Python implementations
    of builtins ask ``type(x)`` of a proxy for its dunder methods) or metatrace's."""
    filename = calling_file()
    return filename is None or filename.startswith(OWN_CODE)


def package_dir(module) -> str:
    """The directory of a package's ``__init__``, ending in a separator (a prefix of its files)."""
    return os.path.dirname(module.__file__) + os.sep


OWN_CODE = (package_dir(__import__("thunder")), package_dir(__import__("metatrace")))


def _type_lookaside(default):
    """``default``: the interpreter's own lookaside for ``type``."""

    def type_lookaside(*args, **kwargs):
        if len(args) == 1 and not kwargs and isinstance(args[0].value, NumberProxy) and not _called_from_thunder():
            python_type = getattr(args[0].value, "python_type", None)
            if python_type in (bool, int, float, complex):
                pr = provenance.opaque_record([wrap_const(type).provenance, args[0].provenance])
                return wrap(python_type, provenance=pr)
        return default(*args, **kwargs)

    return type_lookaside


_AS_VALUE = {str: "str()", repr: "repr()", ascii: "ascii()", format: "format()", hash: "hash()", set: "set()",
             frozenset: "frozenset()"}  # a set of sizes decides by value (a proxy hashes by identity)
_LOOKASIDES = "thunder.core.jit_ext._general_jit_lookaside_map"


def patches() -> list[Patch]:
    from thunder.core.interpreter import _default_lookaside_map

    lookasides = jit_ext._general_jit_lookaside_map
    return [
        *(patching.item(lookasides, fn,
                        _as_value_lookaside(fn, why, _type_fallback(fn) if isinstance(fn, type) else interpreter_needs_wrap(fn)),
                        "str/repr/ascii/format/hash/set see a number's value", label=_LOOKASIDES)
          for fn, why in _AS_VALUE.items()),
        patching.item(lookasides, type, _type_lookaside(_default_lookaside_map[type]),
                      "type() of a number is its Python type", label=_LOOKASIDES),
    ]
