"""Stores into closure cells that existed before the call (``nonlocal count; count += 1`` in
the jitted function or in any function object it was given or reads), recorded and replayed by
the epilogue on every call like any other mutation of a pre-existing object.

thunder's ``STORE_DEREF`` handler writes the traced value into the real cell and records
nothing: the cell kept a proxy after the compile (the next call's prologue then failed on it)
and no later call repeated the store. A cell made during the call (a closure the traced code
creates) is the trace's own: thunder runs its stores as before.
"""

from __future__ import annotations

import functools

import thunder.core.interpreter as interpreter
from thunder.core.interpreter import WrappedValue

from metatrace.mutations.record import current_log, run_recorded, source
from metatrace.patching import Patch, item


def set_cell_contents(cell, value, /) -> None:
    """The store ``STORE_DEREF`` makes, as the replay repeats it."""
    cell.cell_contents = value


def _unbound(name: str) -> NameError:
    return NameError(f"cannot access free variable {name!r} where it is not associated with a value in enclosing "
                     "scope")


def _is_empty(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return True
    return False


def delete_cell_contents(cell, name: str, /) -> None:
    """``del v`` of a nonlocal, as the replay repeats it: on an empty cell it raises eager's
    NameError (deleting ``cell_contents`` of an empty cell raises nothing)."""
    if _is_empty(cell):
        raise _unbound(name)
    del cell.cell_contents


def _store_deref(original):
    @functools.wraps(original)
    def store_deref(inst, /, stack, co, frame, **kwargs):
        cell = frame.localsplus[inst.arg]  # (3.11+: the cell's index in localsplus is the argument)
        log = current_log()
        if log is None or not isinstance(cell, WrappedValue) or source(log, cell) is None:
            return original(inst, stack=stack, co=co, frame=frame, **kwargs)
        value = stack.getitem_wrapped(-1)  # what thunder's handler pops and stores
        return run_recorded(log, set_cell_contents, cell, (value,), {},
                            lambda: original(inst, stack=stack, co=co, frame=frame, **kwargs), attributes=False)

    return store_deref


def _delete_deref(original):
    @functools.wraps(original)
    def delete_deref(inst, /, stack, co, frame, **kwargs):
        cell = frame.localsplus[inst.arg]
        if isinstance(cell, WrappedValue) and _is_empty(cell.value):  # (thunder's handler deletes silently)
            return interpreter.do_raise(_unbound(inst.argval))
        log = current_log()
        if log is None or not isinstance(cell, WrappedValue) or source(log, cell) is None:
            return original(inst, stack=stack, co=co, frame=frame, **kwargs)
        return run_recorded(log, delete_cell_contents, cell, (interpreter.wrap_const(inst.argval),), {},
                            lambda: original(inst, stack=stack, co=co, frame=frame, **kwargs), attributes=False)

    return delete_deref


def patches() -> list[Patch]:
    label = "thunder.core.interpreter._default_opcode_handler_map"
    return [item(interpreter._default_opcode_handler_map, "STORE_DEREF", _store_deref,
                 "a store into a closure cell that existed before the call is undone after tracing and replayed "
                 "by the epilogue on every call", wrap=True, label=label),
            item(interpreter._default_opcode_handler_map, "DELETE_DEREF", _delete_deref,
                 "``del`` of a nonlocal: replayed like a store, and eager's NameError for an empty cell", wrap=True,
                 label=label)]
