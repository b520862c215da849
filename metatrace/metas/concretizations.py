"""Where concretizations of symbolic numbers are reported while tracing.

The runtime reports two kinds of events: a relation that a branch or check decided
(``lhs <op> rhs`` was ``value``) and a value that was baked in (``x == value``). A collector is
installed for the duration of one trace (see ``metatrace.guards.collect``); with none installed the
events are dropped, which is thunder's own behaviour.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any, Protocol


class Collector(Protocol):
    def relation(self, op: str, lhs: Any, rhs: Any, value: bool) -> None: ...

    def static(self, x: Any, value: Any, why: str) -> None: ...

    def produced(self, bsym: Any) -> None: ...


# ``why`` texts that ``explain`` shows before any other reason next to the equality they pinned
# (``a.shape[0] == 2 (torch.einsum's contraction order ...)``): added by the modules that pin for
# a reason of thunder's (metatrace.proxies.float_numbers).
SHOWN_WHY: set[str] = set()

COLLECTOR: ContextVar[Collector | None] = ContextVar("metatrace_guard_collector", default=None)


def relation(op: str, lhs: Any, rhs: Any, value: bool) -> None:
    collector = COLLECTOR.get()
    if collector is not None:
        collector.relation(op, lhs, rhs, value)


def static(x: Any, value: Any, why: str) -> None:
    collector = COLLECTOR.get()
    if collector is not None:
        collector.static(x, value, why)


def produced(bsym: Any) -> None:
    """A recorded op: the collector keeps it so guards can be projected even if it is pruned."""
    collector = COLLECTOR.get()
    if collector is not None:
        collector.produced(bsym)
