"""Guard expressions: polynomials over int atoms (:class:`Poly`) and nodes (:class:`Node`), built
through :func:`build`, which folds constants and identities per operation.

The algebra apart from the decision procedure (``reduction``), as JAX's ``shape_poly.py`` beside
``shape_poly_decision.py``: what an operation *is* lives here, what a set of guards *implies* there.
It is pure: :func:`build` returns the expression together with what the operation needs not to
raise (:class:`Built`), and records nothing.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import thunder.core.dtypes as dtypes

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
    int_division,
)

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


class Built(NamedTuple):
    """An operation's expression, folded, and its conditions: what it needs not to raise, each
    ``e`` standing for ``e != 0`` (a division's divisor, ``isfinite(x)`` for ``int(x)`` of a
    float), its operands' first. The original guard raises (fails) where one does not hold, so it
    must still be checked where the operation folded away (``x // x`` is 1 where ``x != 0``)."""

    expr: Expr
    conditions: tuple[Expr, ...] = ()


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


def build(op: str, args: list) -> Built:
    """The expression ``op(*args)``, folded, and what it needs not to raise."""
    values = [node_const(a) for a in args]
    if op != "convert" and all(v is not None for v in values) and op in _EVAL:
        try:
            return Built(const(_EVAL[op](*values)))
        except Exception:
            pass  # keeps the raising operation
    needs = _conditions(op, args)
    rule = _RULES.get(op)
    out = rule(op, *args) if rule is not None else None
    if isinstance(out, Built):  # the rule built another operation (``bool(x)`` is ``x != 0``)
        return Built(out.expr, needs + out.conditions)
    return Built(out if out is not None else _opaque(op, args), needs)


def _conditions(op: str, args: list) -> tuple[Expr, ...]:
    """What ``op(*args)`` itself needs not to raise (a constant 0 too: then it never holds)."""
    needs = []
    if op in DIVIDING:
        needs.append(args[1])
    if op == "**":  # 0 ** -1 raises (comparisons and their ``|`` need nothing)
        base, exponent = build(Relation.NE.symbol, [args[0], ZERO]).expr, build(Relation.GE.symbol, [args[1], ZERO]).expr
        needs.append(build("|", [base, exponent]).expr)
    if op in ("&", "|", "^"):  # a float operand raises TypeError
        needs += [ZERO if _surely_float(x) else build("isint", [x]).expr for x in args if x.typ != "int"]
    if op in FINITE and float_source(args[0]):
        needs.append(build("isfinite", [args[0]]).expr)
    return tuple(e for e in needs if not node_const(e))


# The identities of each operation: ``rule(op, *args)`` returns the folded expression (or the
# :class:`Built` of the operation it is), or None when none applies (an opaque node).


def _ints(*args) -> bool:
    return all(isinstance(a, Poly) for a in args)


def _build_arith(op: str, a: Expr, b: Expr) -> Expr | Built:  # + - *
    if _ints(a, b):
        return a + b if op == "+" else a - b if op == "-" else a * b
    return _float_arith(op, a, b)


def _build_neg(op: str, a: Expr) -> Expr:
    if isinstance(a, Poly):
        return -a
    if _is_float_of_int(a):
        return as_float(-a.args[0])
    return Node("neg", (a,), a.typ)


def _build_division(op: str, a: Expr, b: Expr) -> Expr | None:  # // % div
    if _ints(a, b):
        return int_division(op, a, b)
    if op == "div":
        if node_const(b) in (1, 1.0) and a.typ != "other":
            return as_float(a)
        return Node("div", (a, b), "float")
    return None


def _build_extremum(op: str, a: Expr, b: Expr) -> Expr | None:  # max min
    if not _ints(a, b):
        return None
    d = a - b
    if d.is_const():
        return a if (d.const >= 0) == (op == "max") else b
    return patom(Node(op, tuple(sorted((a, b), key=lambda x: x.key)), "int"))


def _build_abs(op: str, a: Expr) -> Expr | None:
    return patom(Node("abs", (a,), "int")) if _ints(a) else None


def _build_pow(op: str, a: Expr, b: Expr) -> Expr:
    if _ints(a, b) and b.is_const() and 0 <= b.const <= 8:
        out = ONE
        for _ in range(b.const):
            out = out * a
        return out
    return Node("**", (a, b), "other")  # can raise (0 ** -1): never folded into a polynomial


def _build_rounding(op: str, a: Expr) -> Expr:  # ceil floor trunc
    p = int_of(a)
    if p is not None and (isinstance(a, Poly) or _is_float_of_int(a)):
        return p
    return patom(Node(op, (a,), "int"))


def _build_convert(op: str, a: Expr, b: Expr) -> Built | None:
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


def _build_bool(op: str, a: Expr) -> Built:
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


def _float_arith(op: str, a: Expr, b: Expr) -> Expr | Built:
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
    if pa is not None and pb is not None:  # the 2**53 assumption: float(p) op float(q) is float(p op q)
        exact = build(op, [pa, pb])
        return Built(as_float(exact.expr), exact.conditions)
    if op in ("+", "*"):
        a, b = sorted((a, b), key=lambda x: x.key)
    return Node(op, (a, b), "other" if "other" in (a.typ, b.typ) else "float")
