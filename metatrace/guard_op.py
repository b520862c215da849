"""The prologue's guard operation, registered on thunder's python executor while enabled.

thunder executes a prologue with its python executor; a bare new prim there fails with "Failed
to find an executor", so the guard is an operator of that executor. It is tagged DONT_DCE (it
has no output anyone uses) and raises :class:`metatrace.guards.GuardFailure` when the relation
does not hold.
"""

from __future__ import annotations

from thunder.core.prims import OpTags

from metatrace.guards import check_guards

NAME = "metatrace_guards"
_symbol = None


def _meta(program_id: str, *leaves) -> None:
    return None


def register() -> None:
    global _symbol
    from thunder.executors.pythonex import ex

    assert NAME not in ex.opmap, f"{NAME} is already registered on the python executor"
    _symbol = ex.register_operator(NAME, meta=_meta, fn=check_guards, tags=[OpTags.DONT_DCE])


def unregister() -> None:
    global _symbol
    from thunder.executors.pythonex import ex

    ex.opmap.pop(NAME, None)
    _symbol = None


def guard_symbol():
    if _symbol is None:
        raise RuntimeError("metatrace is not enabled: the prologue guard operation is not registered")
    return _symbol
