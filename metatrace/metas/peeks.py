"""Evaluating an operand early, for its value only where it decides nothing.

``runtime.settled_first`` looks at the right operand of ``a or b`` before the left one's truth is
taken: if ``b`` is True without a guard, ``a``'s relation need not be guarded. Evaluating ``b``
early must not report anything Python would not have evaluated: a comparison of two shapes
compares their sizes and reports those relations. Here the operand runs with a probe in place of
the guard collector; a value whose evaluation reported a decision is not used (and its reports
are dropped: Python's order evaluates it again where it must, and reports then).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from metatrace.state import compile_context

UNDECIDED = object()  # what :func:`value_deciding_nothing` returns where it cannot answer


class _Probe:
    """Stands for the guard collector: remembers that a decision was reported, keeps none."""

    def __init__(self, outer: Any) -> None:
        self.outer, self.decided = outer, False

    def relation(self, op, lhs, rhs, value) -> None:
        self.decided = True

    def bake_in(self, x, value, why) -> None:
        self.decided = True

    def float_range(self, x, bound) -> None:
        self.decided = True

    def produced(self, bsym) -> None:
        if self.outer is not None:
            self.outer.produced(bsym)

    def producer_of(self, name: str) -> Any:
        return None if self.outer is None else self.outer.producer_of(name)

    def __getattr__(self, name: str) -> Any:  # any other report: a decision too
        self.decided = True
        return lambda *args, **kwargs: None


def value_deciding_nothing(thunk: Callable[[], Any]) -> Any:
    """``thunk()`` where evaluating it reported no decision, else :data:`UNDECIDED` (it raised,
    or it decided something that would need a guard)."""
    outer = compile_context.collector()
    probe = _Probe(outer)
    try:
        if outer is None:  # nothing collects decisions: none needs a guard
            return thunk()
        with compile_context.collecting(probe):
            value = thunk()
    except Exception:  # noqa: BLE001 - raised again where Python evaluates it
        return UNDECIDED
    return UNDECIDED if probe.decided else value
