"""What the prologue's guard operators look up at run time, in a leaf module.

A prologue bound symbol carries a printable id (``metatrace_guards('g3', ...)``,
``metatrace_structure('s7', ...)``); the id names a :class:`metatrace.guards.program.GuardProgram` in
``PROGRAMS`` or an expected argument structure in ``EXPECTED`` (:mod:`metatrace.guards.structure`). The
operators themselves are registered on thunder's python executor by :mod:`metatrace.guards.prologue_op`
while metatrace is enabled. Kept apart so that guards, structure, guard_op and explain each
import this module and none of them imports another to reach the shared state.

Lifetime: an id made by :func:`new_id` while thunder compiles belongs to that compile's
``thunder.compile_stats`` object, which the jitted function holds with its cache entries: when
the jitted function is collected, its programs and structures leave the tables. Ids come from a
counter, so a released id is never made again (one entry can never run another's program).
"""

from __future__ import annotations

import itertools
import weakref
from collections import defaultdict
from typing import Any

from thunder.core.compile_data import _compile_data

# Guard programs by id (metatrace.guards.program.GuardProgram).
PROGRAMS: dict[str, Any] = {}
# Expected argument structures by id (metatrace.guards.structure).
EXPECTED: dict[str, Any] = {}

_counters: defaultdict[str, itertools.count] = defaultdict(itertools.count)
# compile stats of a jitted function -> the ids made while compiling for it
_owned: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def new_id(prefix: str) -> str:
    """A fresh id (``g12``, ``s7``), owned by the jitted function being compiled, if any: its
    entries in PROGRAMS and EXPECTED go when that function's compile stats are collected."""
    ident = f"{prefix}{next(_counters[prefix])}"
    try:
        _, owner = _compile_data.get()
    except LookupError:
        owner = None
    if owner is not None:
        ids = _owned.get(owner)
        if ids is None:
            ids = _owned[owner] = []
            weakref.finalize(owner, _release, ids)
        ids.append(ident)
    return ident


def _release(ids: list[str]) -> None:
    for ident in ids:
        PROGRAMS.pop(ident, None)
        EXPECTED.pop(ident, None)


def compiled_by_this_call() -> bool:
    """Whether the prologue running now is thunder's check right after a compile: thunder stamps
    ``last_trace_cache_start`` as a call begins and ``last_trace_cache_stop`` only when no entry
    matched, before it compiles (thunder/__init__.py, ``get_computation_and_inputs``)."""
    try:
        _, cs = _compile_data.get()
    except LookupError:
        return False
    return cs is not None and cs.last_trace_cache_stop >= cs.last_trace_cache_start >= 0


# The prologue operators registered on the python executor (metatrace.guards.prologue_op), None while disabled.
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
