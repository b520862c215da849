"""Where concretizations of symbolic numbers are reported while tracing.

The runtime reports two kinds of events: a relation that a branch or check decided
(``lhs <op> rhs`` was ``value``) and a value that was baked in (``x == value``). A collector is
installed for the duration of one trace (see ``metatrace.guards.collect``); with none installed the
events are dropped, which is thunder's own behaviour.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from metatrace.metas.relations import Relation
from metatrace.state import compile_context


class ReasonKind(enum.Enum):
    """What made a guard: the program builder and ``explain`` decide by the kind, never by text."""

    BRANCH = "a branch or check"  # a relation that a branch or a check decided
    BAKED_IN = "a value baked in"  # int(), an index, range(), a fallback prim's input
    # a value pinned for a reason of thunder's that explain names before any other (torch.einsum's
    # contraction order, a fake-tensor argument: metatrace.proxies.float_numbers)
    NAMED = "a value thunder decides by"
    # |n| <= 2**53, what float(n) needs to be exact: left out where it cannot be projected onto
    # the inputs (no guard expressed in the inputs can contain that n, so none relies on it)
    FLOAT_RANGE = "float(n) exact"
    PINNED = "every input pinned"  # a guard no input expression states: the entry takes only these values


@dataclass(frozen=True)
class Reason:
    """Why a guard exists: its kind and the text ``explain`` shows (``int()``, ``einsum's order``)."""

    kind: ReasonKind
    text: str

    def __str__(self) -> str:
        return self.text


BRANCH = Reason(ReasonKind.BRANCH, "branch")
FLOAT_RANGE = Reason(ReasonKind.FLOAT_RANGE, "float(n) exact: |n| <= 2**53")


def baked_in(why: "str | Reason") -> Reason:
    """A reason given as text is a value baked in (the runtime's ``concretize(x, "int()")``)."""
    return why if isinstance(why, Reason) else Reason(ReasonKind.BAKED_IN, why)


def relation(op: Relation | str, lhs: Any, rhs: Any, value: bool) -> None:
    collector = compile_context.collector()
    if collector is not None:
        collector.relation(op, lhs, rhs, value)


def bake_in(x: Any, value: Any, why: "str | Reason") -> None:
    """``x`` was used as its value ``value`` (an index, ``int(x)``, C code's argument): the trace
    holds for that value only, guarded ``x == value``."""
    collector = compile_context.collector()
    if collector is not None:
        collector.bake_in(x, value, why)


def producer_of(x: Any) -> Any:
    """The bound symbol the compile recorded as computing number ``x``, or None (no compile)."""
    collector = compile_context.collector()
    return None if collector is None or not hasattr(x, "name") else collector.producer_of(x.name)


def produced(bsym: Any) -> None:
    """A recorded op: the collector keeps it so guards can be projected even if it is pruned."""
    collector = compile_context.collector()
    if collector is not None:
        collector.produced(bsym)
