"""The prologue's guard operation, registered on thunder's python executor while enabled.

thunder executes a prologue with its python executor; a bare new prim there fails with "Failed
to find an executor", so the guard is an operator of that executor. It is tagged DONT_DCE (it
has no output anyone uses) and raises :class:`metatrace.guards.collect.GuardFailure` when the relation
does not hold.
"""

from __future__ import annotations

from thunder.core.prims import OpTags

from metatrace.guards import registry
from metatrace.guards.program import check_guards
from metatrace.guards.registry import guard_symbol, structure_symbol  # noqa: F401  (where callers look for them)
from metatrace.guards.structure import check_structure
from metatrace.patching import Patch, item

NAME = "metatrace_guards"
STRUCTURE_NAME = "metatrace_structure"


def _meta(program_id: str, *leaves) -> None:
    return None


def _structure_meta(structure_id: str, value, *aliased) -> None:
    return None


def _operator(name: str, meta, fn):
    def register(previous):
        from thunder.executors.pythonex import ex

        assert previous is None, f"{name} is already registered on the python executor"
        # register_operator stores the new symbol in ex.opmap itself; the row stores the same object
        return ex.register_operator(name, meta=meta, fn=fn, tags=[OpTags.DONT_DCE])

    return register


def patches() -> list[Patch]:
    from thunder.executors.pythonex import ex

    why = "the prologue operators metatrace_guards/metatrace_structure"
    opmap = "executor python.opmap"
    return [
        item(ex.opmap, NAME, _operator(NAME, _meta, check_guards), why, wrap=True, label=opmap),
        item(ex.opmap, STRUCTURE_NAME, _operator(STRUCTURE_NAME, _structure_meta, check_structure), why, wrap=True,
             label=opmap),
        # where the prologue builder finds them (None while disabled)
        item(registry._symbols, "guards", lambda _: ex.opmap[NAME], why, wrap=True, label="metatrace.guards.registry"),
        item(registry._symbols, "structure", lambda _: ex.opmap[STRUCTURE_NAME], why, wrap=True,
             label="metatrace.guards.registry"),
    ]
