"""Polynomials over int atoms (:class:`Poly`) and the nodes they do not absorb (:class:`Node`):
the data of guard expressions. Their arithmetic (``padd``, ``pmul``, which fold identities) and
operations (``build``) are in :mod:`metatrace.guards.simplify.expressions`."""

from __future__ import annotations

from metatrace.guards.simplify.rendering import render


class Node:
    """A leaf, a constant that is not an int, or an operation the polynomials do not absorb.

    ``typ``: ``"int"`` (ints and bools: such a node only appears inside a :class:`Poly`),
    ``"float"`` or ``"other"``."""

    __slots__ = ("op", "args", "typ", "key", "_hash")

    def __init__(self, op: str, args: tuple, typ: str):
        self.op, self.args, self.typ = op, args, typ
        if op == "leaf":
            self.key = (0, args[1], args[0])  # (name, index): ordered by input position
        elif op == "const":
            self.key = (1, type(args[0]).__name__, repr(args[0]))
        else:
            self.key = (2, op, tuple(a.key for a in args))
        self._hash = hash(self.key)

    def __eq__(self, other):
        return isinstance(other, Node) and self.key == other.key

    def __hash__(self):
        return self._hash

    def __repr__(self):
        return render(self)[0]


class Poly:
    """sum(coefficient * product of int atoms) + constant, integer coefficients, canonical order."""

    __slots__ = ("terms", "key", "_hash")
    typ = "int"

    def __init__(self, terms: dict):
        items = [(m, c) for m, c in terms.items() if c]
        items.sort(key=lambda mc: (not mc[0], tuple(n.key for n in mc[0])))
        self.terms: tuple = tuple(items)
        self.key = (3, tuple((tuple(n.key for n in m), c) for m, c in items))
        self._hash = hash(self.key)

    def __eq__(self, other):
        return isinstance(other, Poly) and self.key == other.key

    def __hash__(self):
        return self._hash

    def __repr__(self):
        return render(self)[0]

    @property
    def const(self) -> int:
        return self.terms[-1][1] if self.terms and not self.terms[-1][0] else 0

    def is_const(self) -> bool:
        return not self.terms or (len(self.terms) == 1 and not self.terms[0][0])

    def atom(self) -> Node | None:
        """The node if this is ``1 * node``."""
        if len(self.terms) == 1 and len(self.terms[0][0]) == 1 and self.terms[0][1] == 1:
            return self.terms[0][0][0]
        return None

    def linear(self) -> Poly:
        return Poly({m: c for m, c in self.terms if m})


Expr = Poly | Node


def pconst(c: int) -> Poly:
    return Poly({(): int(c)})


ZERO, ONE = pconst(0), pconst(1)


def patom(n: Node) -> Poly:
    return Poly({(n,): 1})


def node_const(e: Expr):
    """The Python value of a constant expression, else None."""
    if isinstance(e, Poly):
        return e.const if e.is_const() else None
    return e.args[0] if e.op == "const" else None


def const(v) -> Expr:
    if type(v) in (int, bool):
        return pconst(v)
    return Node("const", (v,), "float" if type(v) is float else "other")


def wrap_node(n: Node) -> Expr:
    return patom(n) if n.typ == "int" else n
