"""Python-executor implementations for the number prims that recorded arithmetic uses.

thunder's python executor runs ``prims.add``/``prims.sub``/... on numbers, but not
``prims.maximum``/``minimum`` (recorded for ``max``/``min``) nor ``ceil``/``floor``/``trunc``/
``bitwise_not``. They are registered on enable, for numbers only, and removed on disable.
"""

from __future__ import annotations

import builtins
import math
import operator
from numbers import Number

import thunder.core.prims as prims
from thunder.core.proxies import NumberProxy

_IMPLS = (
    (prims.maximum, "metatrace_max", builtins.max),
    (prims.minimum, "metatrace_min", builtins.min),
    (prims.ceil, "metatrace_ceil", math.ceil),
    (prims.floor, "metatrace_floor", math.floor),
    (prims.trunc, "metatrace_trunc", math.trunc),
    (prims.bitwise_not, "metatrace_invert", operator.invert),
)


def _numbers_only(*args) -> bool:
    return all(isinstance(a, (Number, NumberProxy)) for a in args)


def register() -> list:
    """Registers the implementations; returns what ``unregister`` needs to undo it exactly."""
    from thunder.executors.pythonex import ex

    undo = []
    for sym, name, fn in _IMPLS:
        previous = ex.implmap.get(sym.id)
        op = ex.register_operator(name, like=sym, fn=fn)
        ex.register_implementation(sym, op, checker=_numbers_only)
        undo.append((sym.id, name, previous))
    return undo


def unregister(undo: list) -> None:
    from thunder.executors.pythonex import ex

    for sym_id, name, previous in reversed(undo):
        ex.opmap.pop(name, None)
        if previous is None:
            ex.implmap.pop(sym_id, None)
        else:
            ex.implmap[sym_id] = previous
