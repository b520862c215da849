"""What the prologue's guard operators look up at run time, in a leaf module.

A prologue bound symbol carries a printable id (``metatrace_guards('g3', ...)``,
``metatrace_structure('s7', ...)``); the id names a :class:`metatrace.guards.compiled_program.GuardProgram` in
``PROGRAMS`` or an expected argument structure in ``EXPECTED`` (:mod:`metatrace.guards.structure`). The
operators themselves are registered on thunder's python executor by :mod:`metatrace.guards.prologue_op`
while metatrace is enabled. Kept apart so that guards, structure, guard_op and explain each
import this module and none of them imports another to reach the shared state.

Lifetime: everything metatrace keeps for one jitted function lives in its :class:`FunctionRecord`,
weakly keyed by thunder's ``CompileStats`` of it (which the jitted function holds with its cache
entries). An id made by :func:`new_id` while thunder compiles is owned by that record: when the
jitted function is collected, its programs, structures and replays leave the tables by id. Ids come
from a counter, so a released id is never made again (one entry can never run another's program).
"""

from __future__ import annotations

import itertools
import weakref
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from thunder.core.compile_data import _compile_data

from metatrace.state.weak_tables import WeakTable

# Guard programs by id (metatrace.guards.compiled_program.GuardProgram).
PROGRAMS: dict[str, Any] = {}
# Expected argument structures by id (metatrace.guards.structure).
EXPECTED: dict[str, Any] = {}
# The epilogue's replays of stores into pre-existing objects by id (metatrace.mutations.replay).
REPLAYS: dict[str, Any] = {}

_counters: defaultdict[str, itertools.count] = defaultdict(itertools.count)


@dataclass
class FunctionRecord:
    """What metatrace keeps for one jitted function, beside thunder's ``CompileStats`` of it."""

    ids: list[str] = field(default_factory=list)  # made while compiling for it: its entries in the tables above
    pending_grad: Any = None  # the guard program reserved for its grad transform (guards.grad_program)
    rejections: tuple[int, dict[str, str]] = (-1, {})  # (call count, {check id: why it failed}) (guards.explain)
    # numbers read from the jitted module's state, by provenance key: the value its first compile
    # saw, or CHANGED once a later compile saw another (interpret.module_state: symbolic from then on)
    state_numbers: dict = field(default_factory=dict)
    # the code objects the last compile interpreted (interpret.jit_hooks; read by metatrace.entry_cache
    # when that compile's entry is stored)
    interpreted_codes: set = field(default_factory=set)
    # the last compile's module calls stamped from a first block, and those interpreted with why
    # (interpret.modules.repeated_blocks: (path, first block's path, None or why); read by explain)
    stamped_blocks: list = field(default_factory=list)


_RECORDS = WeakTable(FunctionRecord)  # CompileStats -> FunctionRecord


def compile_stats():
    """thunder's ``CompileStats`` of the jitted function compiling or called now, or None."""
    try:
        return _compile_data.get()[1]
    except LookupError:
        return None


def function_record(cs=None) -> FunctionRecord | None:
    """The record of ``cs`` (default: the jitted function compiling or called now), or None."""
    cs = compile_stats() if cs is None else cs
    if cs is None:
        return None
    record = _RECORDS.get(cs, create=False)
    if record is None:
        record = _RECORDS.get(cs)
        weakref.finalize(cs, _release, record.ids)
    return record


def new_id(prefix: str, record: FunctionRecord | None = None) -> str:
    """A fresh id (``g12``, ``s7``), owned by ``record`` (default: the jitted function being
    compiled), if any: its entries in the tables above go when that function's compile stats are
    collected."""
    ident = f"{prefix}{next(_counters[prefix])}"
    record = function_record() if record is None else record
    if record is not None:
        record.ids.append(ident)
    return ident


def fill_program(program_id: str, program: Any) -> None:
    """The guard program reserved under ``program_id`` by the function compiling now (its
    prologue already names the id) becomes ``program``."""
    record = function_record()
    if record is None or program_id not in record.ids or program_id not in PROGRAMS:
        raise RuntimeError(f"guard program {program_id} was not reserved by the function compiling now")
    PROGRAMS[program_id] = program


def _release(ids: list[str]) -> None:
    for ident in ids:
        PROGRAMS.pop(ident, None)
        EXPECTED.pop(ident, None)
        REPLAYS.pop(ident, None)


def compiled_by_this_call() -> bool:
    """Whether the prologue running now is thunder's check right after a compile: thunder stamps
    ``last_trace_cache_start`` as a call begins and ``last_trace_cache_stop`` only when no entry
    matched, before it compiles (thunder/__init__.py, ``get_computation_and_inputs``)."""
    cs = compile_stats()
    return cs is not None and cs.last_trace_cache_stop >= cs.last_trace_cache_start >= 0


# The prologue operators registered on the python executor (metatrace.guards.prologue_op), None while disabled.
_symbols: dict[str, Any] = {"guards": None, "structure": None, "replay": None}


def guard_symbol():
    if _symbols["guards"] is None:
        raise RuntimeError("metatrace is not enabled: the prologue guard operation is not registered")
    return _symbols["guards"]


def structure_symbol():
    if _symbols["structure"] is None:
        raise RuntimeError("metatrace is not enabled: the prologue structure check is not registered")
    return _symbols["structure"]
