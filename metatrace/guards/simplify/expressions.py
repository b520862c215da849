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
from metatrace.metas.algebra_ops import BOOLEAN, COMPARISONS, DIVIDING, FINITE, NumberKind, Op
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
_EVAL: dict[Op, Callable] = {op: op.evaluate for op in Op if not op.structural}
# The producers the prologue replays, as operations of this algebra.
FROM_PRIM: dict[object, Op] = {sym_id: Op.of(row.op) for sym_id, row in number_ops.REPLAYABLE.items()}


def _target(to) -> type | None:
    """The Python type ``convert(x, to)`` produces."""
    if isinstance(to, type):
        return to
    try:
        return dtypes.dtype_to_numbertype(to)
    except Exception:
        return None


def _is_float_of_int(e: Expr) -> bool:
    return isinstance(e, Node) and e.op is Op.FLOAT and isinstance(e.args[0], Poly)


def as_float(e: Expr) -> Expr:
    """``float(e)`` as a value: the same number (the 2**53 assumption)."""
    if isinstance(e, Node):
        return e
    if e.is_const():
        return const(float(e.const))
    return Node(Op.FLOAT, (e,), NumberKind.FLOAT)


def int_of(e: Expr) -> Poly | None:
    """An int polynomial with the value of ``e`` if there is one: ``float(P)`` is P, 2.0 is 2
    (not -0.0: no int is, and ``str``, ``copysign`` and an exact guard tell it from 0)."""
    if isinstance(e, Poly):
        return e
    if _is_float_of_int(e):
        return e.args[0]
    v = node_const(e)
    if type(v) is float and math.isfinite(v) and v == int(v) and not _negative_zero(v):
        return pconst(int(v))
    return None


def _negative_zero(v) -> bool:
    return type(v) is float and v == 0 and math.copysign(1.0, v) < 0


def _may_be_negative_zero(e: Expr) -> bool:
    """``e`` may be the float -0.0: a float input or a value computed from one (a float computed
    from ints never is)."""
    return int_of(e) is None and (node_const(e) is None or _negative_zero(node_const(e)))


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
    if e.op is Op.LEAF:
        return e.typ is not NumberKind.INT
    if e.op is Op.CONST:
        return not (type(e.args[0]) in (int, bool) or (type(e.args[0]) is float and math.isfinite(e.args[0])))
    return any(float_source(a) for a in (e.args[:1] if e.op is Op.CONVERT else e.args))


def build(op: Op | str, args: list) -> Built:
    """The expression ``op(*args)``, folded, and what it needs not to raise (``op``: an
    :class:`Op`, or its name as the number-op table writes it)."""
    op = op if type(op) is Op else Op.of(op)
    values = [node_const(a) for a in args]
    if op is not Op.CONVERT and all(v is not None for v in values) and op in _EVAL:
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


def _conditions(op: Op, args: list) -> tuple[Expr, ...]:
    """What ``op(*args)`` itself needs not to raise (a constant 0 too: then it never holds)."""
    needs = []
    if op in DIVIDING:
        needs.append(args[1])
    if op is Op.POW:  # 0 ** -1 raises (comparisons and their ``|`` need nothing)
        base, exponent = build(Op.NE, [args[0], ZERO]).expr, build(Op.GE, [args[1], ZERO]).expr
        needs.append(build(Op.BITOR, [base, exponent]).expr)
    if op in _BITWISE:  # a float operand raises TypeError
        needs += [ZERO if _surely_float(x) else build(Op.ISINT, [x]).expr for x in args if x.typ is not NumberKind.INT]
    if op in FINITE and float_source(args[0]):
        needs.append(build(Op.ISFINITE, [args[0]]).expr)
    return tuple(e for e in needs if not node_const(e))


# The identities of each operation: ``rule(op, *args)`` returns the folded expression (or the
# :class:`Built` of the operation it is), or None when none applies (an opaque node).


def _ints(*args) -> bool:
    return all(isinstance(a, Poly) for a in args)


def _build_arith(op: Op, a: Expr, b: Expr) -> Expr | Built:  # + - *
    if _ints(a, b):
        return a + b if op is Op.ADD else a - b if op is Op.SUB else a * b
    return _float_arith(op, a, b)


def _build_neg(op: Op, a: Expr) -> Expr:
    if isinstance(a, Poly):
        return -a
    if _is_float_of_int(a):
        return as_float(-a.args[0])
    return Node(Op.NEG, (a,), a.typ)


def _build_division(op: Op, a: Expr, b: Expr) -> Expr | None:  # // % div
    if _ints(a, b):
        return int_division(op, a, b)
    if op is Op.DIV:
        if node_const(b) in (1, 1.0) and a.typ is not NumberKind.OTHER:
            return as_float(a)
        return Node(Op.DIV, (a, b), NumberKind.FLOAT)
    return None


def _build_extremum(op: Op, a: Expr, b: Expr) -> Expr | None:  # max min
    if not _ints(a, b):
        return None
    d = a - b
    if d.is_const():
        return a if (d.const >= 0) == (op is Op.MAX) else b
    return patom(Node(op, tuple(sorted((a, b), key=lambda x: x.key)), NumberKind.INT))


def _build_abs(op: Op, a: Expr) -> Expr | None:
    return patom(Node(Op.ABS, (a,), NumberKind.INT)) if _ints(a) else None


def _build_pow(op: Op, a: Expr, b: Expr) -> Expr:
    if _ints(a, b) and b.is_const() and 0 <= b.const <= 8:
        out = ONE
        for _ in range(b.const):
            out = out * a
        return out
    return Node(Op.POW, (a, b), NumberKind.OTHER)  # can raise (0 ** -1): never folded into a polynomial


def _build_rounding(op: Op, a: Expr) -> Expr:  # ceil floor trunc
    p = int_of(a)
    if p is not None and (isinstance(a, Poly) or _is_float_of_int(a)):
        return p
    return patom(Node(op, (a,), NumberKind.INT))


def _build_convert(op: Op, a: Expr, b: Expr) -> Built | None:
    to = _CONVERSIONS.get(_target(node_const(b)))
    return build(to, [a]) if to is not None else None


_CONVERSIONS = {int: Op.INT, float: Op.FLOAT, bool: Op.BOOL}  # what ``convert`` to a Python type is


def _build_int(op: Op, a: Expr) -> Expr:
    if isinstance(a, Poly):
        return a
    if _is_float_of_int(a):
        return a.args[0]
    if a.op in _ROUNDING:
        return patom(a)
    return patom(Node(Op.INT, (a,), NumberKind.INT))


def _build_float(op: Op, a: Expr) -> Expr:
    if isinstance(a, Poly):
        return as_float(a)
    return a if a.typ is NumberKind.FLOAT else Node(Op.FLOAT, (a,), NumberKind.FLOAT)


def _build_bool(op: Op, a: Expr) -> Built:
    return build(Op.NE, [a, ZERO])


def _build_signbit(op: Op, a: Expr) -> Expr | None:
    return patom(Node(Op.SIGNBIT, (a,), NumberKind.INT)) if a.typ is not NumberKind.OTHER else None


def _build_isint(op: Op, a: Expr) -> Expr:
    return ONE if isinstance(a, Poly) else ZERO if _surely_float(a) else patom(Node(Op.ISINT, (a,), NumberKind.INT))


def _build_isfinite(op: Op, a: Expr) -> Expr:
    return patom(Node(Op.ISFINITE, (a,), NumberKind.INT))


def _build_comparison(op: Op, a: Expr, b: Expr) -> Expr:
    """A comparison node, its operation the relation's (``Op.LT``: it prints as ``<``)."""
    rel = Relation(op.relation)
    if a.key > b.key:
        a, b, rel = b, a, rel.swapped()
    if a == b and a.typ is NumberKind.INT:
        return pconst(rel.reflexive)
    return patom(Node(Op.comparing(rel), (a, b), NumberKind.INT))


def _build_bitwise(op: Op, a: Expr, b: Expr) -> Expr | None:  # & | ^
    if not _ints(a, b):
        return None
    a, b = sorted((a, b), key=lambda x: x.key)  # a constant sorts last
    if b == ZERO:
        return ZERO if op is Op.BITAND else a
    if a == b:
        return ZERO if op is Op.BITXOR else a
    if b == ONE and _is_bool(a) and op is not Op.BITXOR:
        return a if op is Op.BITAND else ONE
    return patom(Node(op, (a, b), NumberKind.INT))


_BITWISE = frozenset({Op.BITAND, Op.BITOR, Op.BITXOR})
_ROUNDING = frozenset({Op.CEIL, Op.FLOOR, Op.TRUNC})

_RULES: dict[Op, Callable[..., Expr | None]] = {
    Op.ADD: _build_arith, Op.SUB: _build_arith, Op.MUL: _build_arith, Op.NEG: _build_neg,
    Op.FLOORDIV: _build_division, Op.MOD: _build_division, Op.DIV: _build_division,
    Op.MAX: _build_extremum, Op.MIN: _build_extremum, Op.ABS: _build_abs, Op.POW: _build_pow,
    **{op: _build_rounding for op in _ROUNDING},
    Op.CONVERT: _build_convert, Op.INT: _build_int, Op.FLOAT: _build_float, Op.BOOL: _build_bool,
    Op.SIGNBIT: _build_signbit, Op.ISINT: _build_isint, Op.ISFINITE: _build_isfinite,
    **{op: _build_comparison for op in COMPARISONS},
    **{op: _build_bitwise for op in _BITWISE},
}


def _surely_float(e: Expr) -> bool:
    """Whether ``e`` is a float whatever the leaves (``max(-1, p)`` may be the int -1)."""
    if isinstance(e, Poly) or e.typ is not NumberKind.FLOAT:
        return False
    if e.op in _FLOAT_VALUED:
        return True
    if e.op in _EXTREMA:
        return all(_surely_float(a) for a in e.args)
    return any(_surely_float(a) for a in e.args)  # + - * / // % neg abs: float if an operand is


# Nodes whose FLOAT kind holds whatever the leaves; the max and min of floats; the operations whose
# result is a float, also of int arguments.
_FLOAT_VALUED = frozenset({Op.LEAF, Op.CONST, Op.FLOAT, Op.FMOD})
_EXTREMA = frozenset({Op.MAX, Op.MIN})
_FLOAT_RESULTS = frozenset({Op.FMOD, Op.FLOAT, Op.SQRT})


def _is_bool(p: Poly) -> bool:
    n = p.atom()
    return n is not None and n.op in BOOLEAN


def _opaque(op: Op, args: list) -> Expr:
    kinds = {a.typ for a in args}
    typ = next((k for k in (NumberKind.OTHER, NumberKind.FLOAT) if k in kinds), NumberKind.INT)
    if op in _FLOAT_RESULTS and typ is not NumberKind.OTHER:  # float results, also of int arguments
        typ = NumberKind.FLOAT
    return wrap_node(Node(op, tuple(args), typ))


def _float_arith(op: Op, a: Expr, b: Expr) -> Expr | Built:
    """+, -, * with a float operand: identities, and exact integer arithmetic under ``float``."""
    va, vb = node_const(a), node_const(b)
    other = NumberKind.OTHER
    # x - 0.0 is x, and so is x + 0.0 except for x = -0.0 (-0.0 + 0.0 is 0.0): signed zeros
    # are told apart by str, copysign and the exact guards of a baked-in zero
    if op is Op.SUB and vb == 0 and a.typ is not other and (not _negative_zero(vb) or not _may_be_negative_zero(a)):
        return as_float(a)
    if op is Op.ADD and vb == 0 and a.typ is not other and (_negative_zero(vb) or not _may_be_negative_zero(a)):
        return as_float(a)
    if op is Op.ADD and va == 0 and b.typ is not other and (_negative_zero(va) or not _may_be_negative_zero(b)):
        return as_float(b)
    if op is Op.MUL and vb == 1 and a.typ is not other:
        return as_float(a)
    if op is Op.MUL and va == 1 and b.typ is not other:
        return as_float(b)
    pa, pb = int_of(a), int_of(b)
    # the 2**53 assumption: float(p) op float(q) is float(p op q); not for *, whose zero takes
    # the operands' signs (0.0 * -3.0 is -0.0, float(0 * -3) is 0.0)
    if pa is not None and pb is not None and op is not Op.MUL:
        exact = build(op, [pa, pb])
        return Built(as_float(exact.expr), exact.conditions)
    if op is not Op.SUB:  # + and * commute
        a, b = sorted((a, b), key=lambda x: x.key)
    return Node(op, (a, b), NumberKind.OTHER if other in (a.typ, b.typ) else NumberKind.FLOAT)
