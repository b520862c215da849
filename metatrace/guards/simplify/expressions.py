"""Guard expressions: polynomials over int atoms (:class:`Poly`) and nodes (:class:`Node`), built
through :func:`build`, which folds constants and identities per operation.

The algebra apart from the decision procedure (``reduction``), as JAX's ``shape_poly.py`` beside
``shape_poly_decision.py``: what an operation *is* lives here, what a set of guards *implies* there.
"""

from __future__ import annotations

import contextvars
import math
from typing import Any, Callable

import thunder.core.dtypes as dtypes
from thunder.core.proxies import NumberProxy

from metatrace.guards.record import Guard, is_static_value
from metatrace.guards.simplify.rendering import render
from metatrace.metas import number_ops
from metatrace.metas.relations import Relation
from metatrace.guards.simplify.polynomials import (  # noqa: F401  (re-exported: the algebra's data)
    ONE,
    ZERO,
    Node,
    Poly,
    Expr,
    pconst,
    patom,
    node_const,
    const,
    wrap_node,
)

def padd(a: Poly, b: Poly, k: int = 1) -> Poly:
    """a + k * b"""
    d = dict(a.terms)
    for m, c in b.terms:
        d[m] = d.get(m, 0) + k * c
    return _fold_poly(d)


def pscale(a: Poly, k: int) -> Poly:
    return Poly({m: c * k for m, c in a.terms})


def pmul(a: Poly, b: Poly) -> Poly:
    d: dict = {}
    for m1, c1 in a.terms:
        for m2, c2 in b.terms:
            m = tuple(sorted(m1 + m2, key=lambda n: n.key))
            d[m] = d.get(m, 0) + c1 * c2
    return _fold_poly(d)


def _floorfix_args(n: Node):
    """(a, b) if ``n`` is thunder's sign fix of int floor division:
    ``(signbit(a) != signbit(b)) & (int(fmod(a, b)) != 0)``, which trunc division minus it makes ``a // b``."""
    if n.op != "&":
        return None
    atom = lambda e: e.atom() if isinstance(e, Poly) else None  # noqa: E731
    for first, second in ((0, 1), (1, 0)):
        x, y = atom(n.args[first]), n.args[second]
        if x is None or x.op != Relation.NE.symbol:
            continue
        lhs, rhs = x.args
        inner = atom(lhs) if rhs == ZERO else atom(rhs) if lhs == ZERO else None
        if inner is None or inner.op != "int" or not isinstance(inner.args[0], Node) or inner.args[0].op != "fmod":
            continue
        a, b = inner.args[0].args
        if isinstance(a, Poly) and isinstance(b, Poly) and y == build(Relation.NE.symbol, [build("signbit", [a]), build("signbit", [b])]):
            return a, b
    return None


def _fold_poly(d: dict) -> Poly:
    """Identities a sum of terms can show: trunc division minus its sign fix is floor division,
    ``n * (a // n)`` is ``a - a % n``."""
    d = {m: c for m, c in d.items() if c}
    changed = True
    while changed:
        changed = False
        for m, c in list(d.items()):
            for i, n in enumerate(m):
                rest = m[:i] + m[i + 1:]
                ab = _floorfix_args(n)
                if ab is not None:
                    twin = tuple(sorted(rest + (Node("div", ab, "int"),), key=lambda x: x.key))
                    if d.get(twin) == -c:
                        del d[m], d[twin]
                        _merge(d, pmul(Poly({rest: -c}), build("//", list(ab))))
                        changed = True
                        break
                if n.op == "//" and isinstance(n.args[1], Poly):
                    div = n.args[1]
                    if len(div.terms) == 1 and div.terms[0][0] and c % div.terms[0][1] == 0:
                        dm, dc = div.terms[0]
                        left = list(rest)
                        if all(x in left and (left.remove(x) or True) for x in dm):
                            a = n.args[0]
                            del d[m]
                            # c * rest * (a // div) = (c / dc) * rest' * (a - a % div)
                            _merge(d, pmul(Poly({tuple(left): c // dc}), padd(a, build("%", [a, div]), -1)))
                            changed = True
                            break
            if changed:
                break
    return Poly(d)


def _merge(d: dict, p: Poly) -> None:
    for m, c in p.terms:
        d[m] = d.get(m, 0) + c
        if not d[m]:
            del d[m]


# What the prologue runs (as GuardProgram compiles them): used to fold constants.
_EVAL: dict[str, Callable] = {op: row.evaluate for op, row in number_ops.BY_OP.items()}
# The producers the prologue replays, as operations of this algebra.
FROM_PRIM = {sym_id: row.op for sym_id, row in number_ops.REPLAYABLE.items()}
_COMPARE = tuple(rel.symbol for rel in Relation)  # the comparison operations: "==", "!=", "<", ...
DIVIDING = tuple(op for op, row in number_ops.BY_OP.items() if row.divides)  # need a divisor != 0
FINITE = tuple(op for op, row in number_ops.BY_OP.items() if row.finite)  # need a finite float: int(x), ceil(x)
BOOLEAN = frozenset(op for op, row in number_ops.BY_OP.items() if row.boolean)  # 0 or 1: comparisons, signbit...


def _target(to) -> type | None:
    """The Python type ``convert(x, to)`` produces."""
    if isinstance(to, type):
        return to
    try:
        return dtypes.dtype_to_numbertype(to)
    except Exception:
        return None


def _is_float_of_int(e: Expr) -> bool:
    return isinstance(e, Node) and e.op == "float" and isinstance(e.args[0], Poly)


def as_float(e: Expr) -> Expr:
    """``float(e)`` as a value: the same number (the 2**53 assumption)."""
    if isinstance(e, Node):
        return e
    if e.is_const():
        return const(float(e.const))
    return Node("float", (e,), "float")


def int_of(e: Expr) -> Poly | None:
    """An int polynomial with the value of ``e`` if there is one: ``float(P)`` is P, 2.0 is 2."""
    if isinstance(e, Poly):
        return e
    if _is_float_of_int(e):
        return e.args[0]
    v = node_const(e)
    if type(v) is float and math.isfinite(v) and v == int(v):
        return pconst(int(v))
    return None


# What an operation needs not to raise, seen while building (``e``: ``e != 0`` must hold): a
# division's divisor, ``isfinite(x)`` for ``int(x)`` of a float. The original guard raises
# (fails) where one does not hold, so it must still be checked where the operation folded away.
CONDITIONS: contextvars.ContextVar[list | None] = contextvars.ContextVar("metatrace_conditions", default=None)


def _require(e: Expr) -> None:
    conditions = CONDITIONS.get()
    if conditions is not None and not node_const(e):  # a constant 0 too: then it never holds
        conditions.append(e)


def float_source(e: Expr) -> bool:
    """A value that can be inf or nan: one computed from a float input or a non-finite constant
    (floats computed from ints are finite, the 2**53 assumption)."""
    if isinstance(e, Poly):
        return False
    if e.op == "leaf":
        return e.typ != "int"
    if e.op == "const":
        return not (type(e.args[0]) in (int, bool) or (type(e.args[0]) is float and math.isfinite(e.args[0])))
    return any(float_source(a) for a in (e.args[:1] if e.op == "convert" else e.args))


def build(op: str, args: list) -> Expr:
    """The expression ``op(*args)``, folded."""
    values = [node_const(a) for a in args]
    if op != "convert" and all(v is not None for v in values) and op in _EVAL:
        try:
            return const(_EVAL[op](*values))
        except Exception:
            pass  # keeps the raising operation
    if op in DIVIDING:
        _require(args[1])
    if op == "**":  # 0 ** -1 raises
        _require(build("|", [build(Relation.NE.symbol, [args[0], ZERO]), build(Relation.GE.symbol, [args[1], ZERO])]))
    if op in ("&", "|", "^"):  # a float operand raises TypeError
        for x in args:
            if x.typ != "int":
                _require(ZERO if _surely_float(x) else build("isint", [x]))
    if op in FINITE and float_source(args[0]):
        _require(build("isfinite", [args[0]]))
    rule = _RULES.get(op)
    out = rule(op, *args) if rule is not None else None
    return out if out is not None else _opaque(op, args)


# The identities of each operation: ``rule(op, *args)`` returns the folded expression, or None
# when none applies (the operation stays an opaque node).


def _ints(*args) -> bool:
    return all(isinstance(a, Poly) for a in args)


def _build_arith(op: str, a: Expr, b: Expr) -> Expr:  # + - *
    if _ints(a, b):
        return padd(a, b) if op == "+" else padd(a, b, -1) if op == "-" else pmul(a, b)
    return _float_arith(op, a, b)


def _build_neg(op: str, a: Expr) -> Expr:
    if isinstance(a, Poly):
        return pscale(a, -1)
    if _is_float_of_int(a):
        return as_float(pscale(a.args[0], -1))
    return Node("neg", (a,), a.typ)


def _build_division(op: str, a: Expr, b: Expr) -> Expr | None:  # // % div
    if _ints(a, b):
        return _int_division(op, a, b)
    if op == "div":
        if node_const(b) in (1, 1.0) and a.typ != "other":
            return as_float(a)
        return Node("div", (a, b), "float")
    return None


def _build_extremum(op: str, a: Expr, b: Expr) -> Expr | None:  # max min
    if not _ints(a, b):
        return None
    d = padd(a, b, -1)
    if d.is_const():
        return a if (d.const >= 0) == (op == "max") else b
    return patom(Node(op, tuple(sorted((a, b), key=lambda x: x.key)), "int"))


def _build_abs(op: str, a: Expr) -> Expr | None:
    return patom(Node("abs", (a,), "int")) if _ints(a) else None


def _build_pow(op: str, a: Expr, b: Expr) -> Expr:
    if _ints(a, b) and b.is_const() and 0 <= b.const <= 8:
        out = ONE
        for _ in range(b.const):
            out = pmul(out, a)
        return out
    return Node("**", (a, b), "other")  # can raise (0 ** -1): never folded into a polynomial


def _build_rounding(op: str, a: Expr) -> Expr:  # ceil floor trunc
    p = int_of(a)
    if p is not None and (isinstance(a, Poly) or _is_float_of_int(a)):
        return p
    return patom(Node(op, (a,), "int"))


def _build_convert(op: str, a: Expr, b: Expr) -> Expr | None:
    to = _target(node_const(b))
    return build(to.__name__, [a]) if to in (int, float, bool) else None


def _build_int(op: str, a: Expr) -> Expr:
    if isinstance(a, Poly):
        return a
    if _is_float_of_int(a):
        return a.args[0]
    if a.op in ("ceil", "floor", "trunc"):
        return patom(a)
    return patom(Node("int", (a,), "int"))


def _build_float(op: str, a: Expr) -> Expr:
    if isinstance(a, Poly):
        return as_float(a)
    return a if a.typ == "float" else Node("float", (a,), "float")


def _build_bool(op: str, a: Expr) -> Expr:
    return build(Relation.NE.symbol, [a, ZERO])


def _build_signbit(op: str, a: Expr) -> Expr | None:
    return patom(Node("signbit", (a,), "int")) if a.typ != "other" else None


def _build_isint(op: str, a: Expr) -> Expr:
    return ONE if isinstance(a, Poly) else ZERO if _surely_float(a) else patom(Node("isint", (a,), "int"))


def _build_isfinite(op: str, a: Expr) -> Expr:
    return patom(Node("isfinite", (a,), "int"))


def _build_comparison(op: str, a: Expr, b: Expr) -> Expr:
    """A comparison node, its operation the relation's Python symbol (``"<"``: how it prints)."""
    rel = Relation.of_symbol(op)
    if a.key > b.key:
        a, b, rel = b, a, rel.swapped()
    if a == b and a.typ == "int":
        return pconst(rel.reflexive)
    return patom(Node(rel.symbol, (a, b), "int"))


def _build_bitwise(op: str, a: Expr, b: Expr) -> Expr | None:  # & | ^
    if not _ints(a, b):
        return None
    a, b = sorted((a, b), key=lambda x: x.key)  # a constant sorts last
    if b == ZERO:
        return ZERO if op == "&" else a
    if a == b:
        return ZERO if op == "^" else a
    if b == ONE and _is_bool(a) and op in ("&", "|"):
        return a if op == "&" else ONE
    return patom(Node(op, (a, b), "int"))


_RULES: dict[str, Callable[..., Expr | None]] = {
    "+": _build_arith, "-": _build_arith, "*": _build_arith, "neg": _build_neg,
    "//": _build_division, "%": _build_division, "div": _build_division,
    "max": _build_extremum, "min": _build_extremum, "abs": _build_abs, "**": _build_pow,
    "ceil": _build_rounding, "floor": _build_rounding, "trunc": _build_rounding,
    "convert": _build_convert, "int": _build_int, "float": _build_float, "bool": _build_bool,
    "signbit": _build_signbit, "isint": _build_isint, "isfinite": _build_isfinite,
    **{op: _build_comparison for op in _COMPARE},
    "&": _build_bitwise, "|": _build_bitwise, "^": _build_bitwise,
}


def _surely_float(e: Expr) -> bool:
    """Whether ``e`` is a float whatever the leaves (``max(-1, p)`` may be the int -1)."""
    if isinstance(e, Poly) or e.typ != "float":
        return False
    if e.op in ("leaf", "const", "float", "fmod"):
        return True
    if e.op in ("max", "min"):
        return all(_surely_float(a) for a in e.args)
    return any(_surely_float(a) for a in e.args)  # + - * / // % neg abs: float if an operand is


def _is_bool(p: Poly) -> bool:
    n = p.atom()
    return n is not None and n.op in BOOLEAN


def _opaque(op: str, args: list) -> Expr:
    typ = "other" if any(a.typ == "other" for a in args) else "float" if any(a.typ == "float" for a in args) else "int"
    if op in ("fmod", "float", "sqrt"):  # float results, also of int arguments
        typ = "float" if typ != "other" else typ
    return wrap_node(Node(op, tuple(args), typ))


def _split(p: Poly, c: int) -> tuple[Poly, Poly]:
    """p = c * q + r with every coefficient of r in [0, c)  (c > 0)."""
    q, r = {}, {}
    for m, k in p.terms:
        q[m], r[m] = divmod(k, c)
    return Poly(q), Poly(r)


def _multiple(a: Poly, b: Poly) -> int | None:
    """k if a == k * b."""
    if not b.terms:
        return None
    (bm, bc), ratio = b.terms[0], None
    for m, c in a.terms:
        if m == bm:
            if c % bc:
                return None
            ratio = c // bc
    ratio = ratio or 0
    return ratio if a == pscale(b, ratio) else None


def _int_division(op: str, a: Poly, b: Poly) -> Poly:
    c = b.const if b.is_const() else None
    if c is not None and c != 0:
        if c < 0:
            if op == "//":
                return _int_division(op, pscale(a, -1), pconst(-c))
            if op == "%":
                return pscale(_int_division(op, pscale(a, -1), pconst(-c)), -1)
            return pscale(_int_division(op, a, pconst(-c)), -1)  # trunc division is odd
        if c == 1:
            return ZERO if op == "%" else a
        if op in ("//", "%"):
            q, r = _split(a, c)
            if r.is_const():
                return _const_rem(op, q, r, c)
            inner = patom(Node(op, (r, b), "int"))
            return padd(q, inner) if op == "//" else inner
    if c is None:
        k = _multiple(a, b)
        if k is not None:
            return pconst(0 if op == "%" else k)
        # (only for Python's // and %: thunder's floor division is trunc division minus a sign
        # fix, which _floorfix_args recognizes as a whole; simplifying its "/" alone would hide it)
        q = _monomial_quotient(a, b) if op in ("//", "%") else None
        if q is not None:  # exact: (x * w) // w is x, (x * w) % w is 0 (w != 0 is required)
            return ZERO if op == "%" else q
    return patom(Node(op, (a, b), "int"))


def _monomial_quotient(a: Poly, b: Poly) -> Poly | None:
    """a / b when b is one term ``k * m`` and every term of a is a multiple of it, else None."""
    if len(b.terms) != 1 or not b.terms[0][0]:
        return None
    (bm, bc), = b.terms
    q: dict = {}
    for m, c in a.terms:
        rest = list(m)
        for n in bm:
            if n not in rest:
                return None
            rest.remove(n)
        if c % bc:
            return None
        q[tuple(rest)] = q.get(tuple(rest), 0) + c // bc
    return Poly(q)


def _const_rem(op: str, q: Poly, r: Poly, c: int) -> Poly:
    return padd(q, pconst(r.const // c)) if op == "//" else pconst(r.const % c)


def _float_arith(op: str, a: Expr, b: Expr) -> Expr:
    """+, -, * with a float operand: identities, and exact integer arithmetic under ``float``."""
    va, vb = node_const(a), node_const(b)
    if op in ("+", "-") and vb == 0 and a.typ != "other":
        return as_float(a)
    if op == "+" and va == 0 and b.typ != "other":
        return as_float(b)
    if op == "*" and vb == 1 and a.typ != "other":
        return as_float(a)
    if op == "*" and va == 1 and b.typ != "other":
        return as_float(b)
    pa, pb = int_of(a), int_of(b)
    if pa is not None and pb is not None:
        return as_float(build(op, [pa, pb]))  # the 2**53 assumption: float(p) op float(q) is float(p op q)
    if op in ("+", "*"):
        a, b = sorted((a, b), key=lambda x: x.key)
    return Node(op, (a, b), "other" if "other" in (a.typ, b.typ) else "float")
