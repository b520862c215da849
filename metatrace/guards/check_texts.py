"""A check's text as ``explain`` shows it, and what the check says, in structured form.

A guard program keeps the texts of its checks (a failing check names its text);
:mod:`metatrace.guards.explain` lists them beside thunder's own prologue checks and sums up the
checks of the jitted module's own state. What a check is about (its subject, relation, reason)
is carried here from the guard records that made it; explain reads these fields, never the text.
"""

from __future__ import annotations

from typing import Any

from metatrace.metas.relations import Relation

# ``value`` of a check that compares its subject with no one value (a range, metadata, a structure).
class _NoValue:
    def __repr__(self) -> str:
        return "NO_VALUE"

    def __reduce__(self) -> str:
        return "NO_VALUE"  # (pickled by name: one sentinel per process, stored entries included)


NO_VALUE: Any = _NoValue()


class CheckText(str):
    """The text of one check, as shown. ``subject``: the value it reads, as explain names it
    (``T``, ``x.shape[0]``, ``len(self.h)``; None: several values, or a whole structure);
    ``relation`` and ``value``: the check is ``subject <relation> value`` (None and
    :data:`NO_VALUE` for a range, metadata or a structure); ``reason``: why it is checked, as
    shown after the check ("": none shown); ``tensor``: the name of the tensor whose metadata it
    checks (rank, dtype, device or one size), else None; ``own_state``: it reads the jitted
    module's (or function's) own state (``self....``), not the call's arguments or globals.

    It is a ``str`` (its text), so that everything that shows or compares texts reads it as one."""

    subject: str | None
    relation: Relation | None
    value: Any
    reason: str
    tensor: str | None
    own_state: bool

    def __new__(cls, text: str, subject: str | None = None, relation: Relation | None = None, value: Any = NO_VALUE,
                reason: str = "", tensor: str | None = None, own_state: bool = False) -> CheckText:
        self = super().__new__(cls, text)
        self.subject, self.relation, self.value = subject, relation, value
        self.reason, self.tensor, self.own_state = reason, tensor, own_state
        return self

    def compares(self) -> tuple | None:
        """``(subject, relation, shown value)`` of a check of one value against one constant
        (``x.shape[0] == 3``), else None: two checks with the same check the same."""
        if self.subject is None or self.relation is None or self.value is NO_VALUE:
            return None
        return (self.subject, self.relation, repr(self.value))
