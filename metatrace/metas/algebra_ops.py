"""The operations of the guard algebra and the kinds of its values, typed.

An :class:`Op` member is one operation of the guard algebra (``metatrace.guards.simplify``): one
per row of ``metatrace.metas.number_ops.BY_OP`` (``Op.FLOORDIV`` is the row of ``"//"``), whose
properties it reads (``divides``, ``finite``, ``boolean``, how it prints), plus the algebra's two
structural nodes, :attr:`Op.LEAF` (an input number or size) and :attr:`Op.CONST` (a constant that
is no int). :class:`NumberKind` is what a guard expression holds: an int (or bool), a float, or
anything else. Both are ``str`` enums whose values are the names the algebra has always used
(``Op.FLOORDIV == "//"``, ``NumberKind.INT == "int"``), so a node's key, its ordering and its
hash are those of the strings, and ``explain`` prints the same; code that decides on an operation
compares members, not strings (issue 39, as :class:`metatrace.metas.relations.Relation`).

The enum is checked against the table at import: a row added to ``BY_OP`` without its member here
(or a member left after its row went) fails ``import metatrace``.

A leaf module: it imports the number-op table and the standard library only.
"""

from __future__ import annotations

import enum
from typing import Callable

from metatrace.metas import number_ops


class Op(enum.StrEnum):
    # arithmetic on ints (the polynomial ring and its divisions)
    ADD = "+"
    SUB = "-"
    MUL = "*"
    FLOORDIV = "//"
    MOD = "%"
    POW = "**"
    DIV = "div"  # thunder's number division: C-style (truncating) on ints
    NEG = "neg"
    ABS = "abs"
    TABS = "tabs"  # thunder's abs of a number: keeps a bool a bool
    MAX = "max"
    MIN = "min"
    # bitwise
    BITAND = "&"
    BITOR = "|"
    BITXOR = "^"
    # comparisons: a node's operation is its relation's Python symbol (how it prints)
    EQ = "=="
    NE = "!="
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="
    # on floats
    CEIL = "ceil"
    FLOOR = "floor"
    TRUNC = "trunc"
    SQRT = "sqrt"
    FMOD = "fmod"
    SIGNBIT = "signbit"
    CONVERT = "convert"
    # of the algebra only: what ``convert`` becomes, and the conditions operations need
    INT = "int"
    FLOAT = "float"
    BOOL = "bool"
    ISFINITE = "isfinite"
    ISINT = "isint"
    # structural: an input (``(name, index)``) and a constant that is no int (``(value,)``)
    LEAF = "leaf"
    CONST = "const"

    @property
    def structural(self) -> bool:
        """A leaf or a constant: no operation, no row of the table."""
        return self in _STRUCTURAL

    @property
    def row(self) -> number_ops.NumberOp:
        """Its row of the number-op table (KeyError for :attr:`LEAF` and :attr:`CONST`)."""
        return number_ops.BY_OP[self.value]

    @property
    def evaluate(self) -> Callable:
        """Its value on Python numbers, as the prologue computes it."""
        return self.row.evaluate

    @property
    def divides(self) -> bool:
        """It raises where its second argument is 0 (``//``, ``%``, ``div``, ``fmod``)."""
        return not self.structural and self.row.divides

    @property
    def finite(self) -> bool:
        """It raises where its first argument is an infinite float (``int``, ``ceil``...)."""
        return not self.structural and self.row.finite

    @property
    def boolean(self) -> bool:
        """Its value is a bool: 0 or 1 (comparisons, ``signbit``, ``isfinite``...)."""
        return not self.structural and self.row.boolean

    @property
    def relation(self) -> str | None:
        """The relation name (``"lt"``) a comparison computes, None for any other operation."""
        return None if self.structural else self.row.compare

    @staticmethod
    def of(op: str) -> Op:
        """The member of an operation's name, or the member itself (a dict lookup: nodes call it)."""
        return _BY_VALUE[op]

    @staticmethod
    def comparing(relation: str) -> Op:
        """The comparison of a relation (``Relation.LT`` or ``"lt"`` -> ``Op.LT``)."""
        return _BY_VALUE[number_ops.SYMBOLS[relation]]


class NumberKind(enum.StrEnum):
    """What a guard expression holds (a node's ``typ``)."""

    INT = "int"  # ints and bools: such a node only appears inside a polynomial
    FLOAT = "float"
    OTHER = "other"  # complex, a dtype, a value of unknown type

    @staticmethod
    def of(kind: str) -> NumberKind:
        """The member of a kind's name, or the member itself."""
        return _KIND_BY_VALUE[kind]


_STRUCTURAL = frozenset({Op.LEAF, Op.CONST})
_BY_VALUE: dict[str, Op] = {op.value: op for op in Op}  # a member finds itself: it hashes as its value
_KIND_BY_VALUE: dict[str, NumberKind] = {kind.value: kind for kind in NumberKind}


def check_against_table() -> None:
    """The enum is built from the table: its operations are exactly ``BY_OP``'s keys."""
    members = {op.value for op in Op if not op.structural}
    missing, extra = set(number_ops.BY_OP) - members, members - set(number_ops.BY_OP)
    if missing or extra:
        raise TypeError(f"metatrace.metas.algebra_ops.Op differs from number_ops.BY_OP: rows without a member "
                        f"{sorted(missing)}, members without a row {sorted(extra)}")


check_against_table()

# Sets of operations, read off the table: what a decision on an operation asks.
DIVIDING = frozenset(op for op in Op if op.divides)  # need a divisor != 0
FINITE = frozenset(op for op in Op if op.finite)  # need a finite float: int(x), ceil(x)
BOOLEAN = frozenset(op for op in Op if op.boolean)  # 0 or 1: comparisons, signbit...
COMPARISONS = frozenset(op for op in Op if op.relation)
