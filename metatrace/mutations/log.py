"""What one compile records of the mutations of pre-existing objects, kept on its CompileSession."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass(eq=False)
class Mutation:
    fn: Callable  # what the user called, unbound: list.append, dict.__setitem__, setattr, ...
    target: Any  # the object mutated (the real one, which the trace mutated too)
    args: tuple  # the other arguments, as the interpreter's WrappedValues
    kwargs: dict  # name -> WrappedValue
    line: str  # the user's line, for errors


@dataclass(eq=False)
class MutationLog:
    mutations: list = field(default_factory=list)
    # id(object) -> (object, the provenance record the prologue reads it by): every pre-existing
    # object the trace mutated or stored, as first seen (a list's record changes as it is appended to)
    sources: dict = field(default_factory=dict)
    # id(object) -> (object, restore()): the state before the first mutation, in first-touch order
    snapshots: dict = field(default_factory=dict)
    # >0 while an outermost mutation runs: what it does inside is its own business (replaying
    # the outer call repeats it), so only snapshots are taken
    depth: int = 0
    # the replay operator's id once the epilogue has it
    plan_id: str | None = None

    def undo(self) -> None:
        """Puts every object the trace mutated back as it was before the call (last touched first)."""
        for obj, restore in reversed(list(self.snapshots.values())):
            restore(obj)
        self.snapshots.clear()
