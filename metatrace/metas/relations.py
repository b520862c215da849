"""The six relations between numbers (``a == b``, ``a < b``, ...), typed.

A :class:`Relation` member reads what it does from its row of the number-op table
(``metatrace.metas.number_ops.BY_RELATION``: thunder's comparison prims): its value on Python
numbers, its negation, the relation with the operands swapped, its Python symbol. It is a
``str`` enum whose values are the table's relation names (``Relation.LT == "lt"``), so a relation
prints, hashes and compares as the name the guard collector, the guard programs and ``explain``
have always used; code that decides on relations compares members, not strings.
"""

from __future__ import annotations

import enum
from typing import Any

from metatrace.metas import number_ops


class Relation(enum.StrEnum):
    EQ = "eq"
    NE = "ne"
    LT = "lt"
    LE = "le"
    GT = "gt"
    GE = "ge"

    def evaluate(self, a: Any, b: Any) -> bool:
        """``a <self> b`` on Python numbers."""
        return number_ops.BY_RELATION[self.value].evaluate(a, b)

    def negated(self) -> Relation:
        """The relation that holds exactly where this one does not (``lt`` -> ``ge``)."""
        return Relation(number_ops.NEGATION[self.value])

    def swapped(self) -> Relation:
        """The relation with the operands swapped (``lt`` -> ``gt``: ``a < b`` is ``b > a``)."""
        return Relation(number_ops.MIRROR[self.value])

    @property
    def symbol(self) -> str:
        """Its Python operator (``"<"``)."""
        return number_ops.SYMBOLS[self.value]

    @property
    def reflexive(self) -> bool:
        """It holds between an int and itself (``eq``, ``le``, ``ge``)."""
        return number_ops.REFLEXIVE[self.value]

    @property
    def ordered(self) -> bool:
        """It orders its operands (not ``eq``/``ne``)."""
        return self not in (Relation.EQ, Relation.NE)

    @staticmethod
    def of_symbol(symbol: str) -> Relation:
        """The relation of a Python operator (``"<="`` -> ``le``)."""
        return Relation(number_ops.RELATIONS[symbol])
