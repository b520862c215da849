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

NAME = "metatrace_guards"
STRUCTURE_NAME = "metatrace_structure"


def _meta(program_id: str, *leaves) -> None:
    return None


def _structure_meta(structure_id: str, value, *aliased) -> None:
    return None


def register() -> None:
    from thunder.executors.pythonex import ex

    for name in (NAME, STRUCTURE_NAME):
        assert name not in ex.opmap, f"{name} is already registered on the python executor"
    registry.set_symbols(
        ex.register_operator(NAME, meta=_meta, fn=check_guards, tags=[OpTags.DONT_DCE]),
        ex.register_operator(STRUCTURE_NAME, meta=_structure_meta, fn=check_structure, tags=[OpTags.DONT_DCE]),
    )


def unregister() -> None:
    from thunder.executors.pythonex import ex

    ex.opmap.pop(NAME, None)
    ex.opmap.pop(STRUCTURE_NAME, None)
    registry.set_symbols(None, None)
