"""Relations: a guard as ``P >= 0``, ``P == 0`` or ``P != 0`` over a canonical polynomial, and the
conditions (a divisor's ``!= 0``) that a guard checks by raising."""

from __future__ import annotations

import math
from dataclasses import dataclass

from metatrace.guards.simplify.expressions import (
    DIVIDING,
    FINITE,
    MIRROR_SYMBOL,
    ZERO,
    Expr,
    Poly,
    float_source,
    int_of,
    node_const,
    build,
    padd,
    pconst,
    pscale,
)
from metatrace.metas.number_ops import RELATIONS, SYMBOLS

@dataclass
class Rel:
    """A canonical relation. ``op`` "ge"/"eq"/"ne": ``poly op 0``, poly's non-constant
    coefficients coprime (and the first positive for eq/ne); "raw": ``lhs rop rhs``."""

    op: str
    poly: Poly | None = None
    lhs: Expr | None = None
    rop: str = ""
    rhs: Expr | None = None
    implicit: bool = False  # a divisor's ``!= 0``: dropped where a kept guard divides by it
    order: int = 0
    solved: str | None = None  # "eq" solved for this leaf (substituted everywhere else)
    strict: bool = False  # a "ge" written as > or < (flag > 5 shows as it was written)

    def key(self):
        if self.op == "raw":
            return ("raw", self.lhs.key, self.rop, self.rhs.key)
        return (self.op, self.poly.key)

    def exprs(self) -> list[Expr]:
        return [self.poly] if self.op != "raw" else [self.lhs, self.rhs]


_TO_GE = {"ge": (1, 0), "gt": (1, -1), "le": (-1, 0), "lt": (-1, -1)}
_SYM = SYMBOLS  # relation name -> symbol: "lt" -> "<"
FROM_SYM = RELATIONS  # "<" -> "lt"


def canonical(op: str, p: Poly) -> Rel | bool:
    """``p op 0`` as a canonical relation, or True/False when it always/never holds."""
    strict = op in ("gt", "lt")
    if op in _TO_GE:
        sign, shift = _TO_GE[op]
        p, op = padd(pscale(p, sign), pconst(shift)), "ge"
    lin, c = p.linear(), p.const
    if not lin.terms:
        return {"ge": c >= 0, "eq": c == 0, "ne": c != 0}[op]
    g = math.gcd(*(k for _, k in lin.terms))
    if op == "ge":
        return Rel("ge", padd(Poly({m: k // g for m, k in lin.terms}), pconst(c // g)), strict=strict and g == 1)
    if c % g:
        return op == "ne"
    sign = 1 if lin.terms[0][1] > 0 else -1
    return Rel(op, Poly({m: sign * k // g for m, k in p.terms}))


def relation(op: str, lhs: Expr, rhs: Expr) -> Rel | bool:
    """``lhs op rhs`` (op: eq, ne, lt, le, gt, ge) as a canonical relation."""
    pl, pr = int_of(lhs), int_of(rhs)
    if pl is not None and pr is not None:
        return canonical(op, padd(pl, pr, -1))
    for p, other, o in ((pl, rhs, op), (pr, lhs, FROM_SYM[MIRROR_SYMBOL[_SYM[op]]])):
        v = node_const(other)
        if p is not None and type(v) is float and math.isfinite(v):  # int p against a fractional float
            if o in ("eq", "ne"):
                return o == "ne"
            bound = {"ge": math.ceil(v), "gt": math.floor(v) + 1, "le": math.floor(v), "lt": math.ceil(v) - 1}[o]
            return canonical("ge" if o in ("ge", "gt") else "le", padd(p, pconst(bound), -1))
    sym = _SYM[op]
    if lhs.key > rhs.key:
        lhs, rhs, sym = rhs, lhs, MIRROR_SYMBOL[sym]
    if lhs == rhs and lhs.typ == "int":
        return sym in ("==", "<=", ">=")
    return Rel("raw", lhs=lhs, rop=sym, rhs=rhs)


def collect_covered(e: Expr, out: set) -> None:
    """Keys of the conditions that a guard evaluating ``e`` checks by raising where they fail:
    ``d != 0`` for each divisor ``d``, ``isfinite(x)`` for ``int(x)`` of a float ``x``."""
    if isinstance(e, Poly):
        for m, _ in e.terms:
            for n in m:
                collect_covered(n, out)
        return
    if e.op in ("leaf", "const"):
        return
    needs = []
    if e.op in DIVIDING:
        needs.append(e.args[1])
    if e.op in FINITE and float_source(e.args[0]):
        needs.append(build("isfinite", [e.args[0]]))
    for x in needs:
        r = relation("ne", x, ZERO)
        if isinstance(r, Rel):
            out.add(r.key())
    for a in e.args:
        collect_covered(a, out)


def never_relation() -> Rel:
    """A relation that never holds (not expected: every guard held when the entry was traced)."""
    return Rel("raw", lhs=ZERO, rop="!=", rhs=ZERO)


def add_relation(rels: list, r, order: int, implicit: bool = False) -> None:
    if r is True:
        return
    r = never_relation() if r is False else r
    r.order, r.implicit = order, implicit
    rels.append(r)
