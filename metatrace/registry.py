"""What the prologue's guard operators look up at run time, in a leaf module.

A prologue bound symbol carries a printable id (``metatrace_guards('g3', ...)``,
``metatrace_structure('s7', ...)``); the id names a :class:`metatrace.guards.GuardProgram` in
``PROGRAMS`` or an expected argument structure in ``EXPECTED`` (:mod:`metatrace.structure`). The
operators themselves are registered on thunder's python executor by :mod:`metatrace.guard_op`
while metatrace is enabled. Kept apart so that guards, structure, guard_op and explain each
import this module and none of them imports another to reach the shared state.
"""

from __future__ import annotations

from typing import Any

# Guard programs by id (metatrace.guards.GuardProgram).
PROGRAMS: dict[str, Any] = {}
# Expected argument structures by id (metatrace.structure).
EXPECTED: dict[str, Any] = {}

# The prologue operators registered on the python executor (metatrace.guard_op), None while disabled.
_symbols: dict[str, Any] = {"guards": None, "structure": None}


def set_symbols(guards: Any, structure: Any) -> None:
    _symbols["guards"], _symbols["structure"] = guards, structure


def guard_symbol():
    if _symbols["guards"] is None:
        raise RuntimeError("metatrace is not enabled: the prologue guard operation is not registered")
    return _symbols["guards"]


def structure_symbol():
    if _symbols["structure"] is None:
        raise RuntimeError("metatrace is not enabled: the prologue structure check is not registered")
    return _symbols["structure"]
