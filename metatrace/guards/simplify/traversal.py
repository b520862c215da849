"""Walking guard expressions: substituting leaves (rebuilding through ``build`` so the result
folds again), collecting their leaves, and a guard's operands as recorded (unsimplified)."""

from __future__ import annotations

from typing import Any, Callable

from thunder.core.proxies import NumberProxy

from metatrace.guards.guard_record import Guard, is_static_value
from metatrace.guards.simplify.expressions import ZERO, Expr, Node, Poly, wrap_node, build, pconst
from metatrace.metas import number_ops
from metatrace.metas.algebra_ops import NumberKind, Op


def substitute(e: Expr, sub: dict[str, Expr], memo: dict | None = None) -> Expr:
    """``e`` with leaves replaced (by name), rebuilt through :func:`build` so it folds again."""
    memo = {} if memo is None else memo
    if e.key in memo:
        return memo[e.key]
    if isinstance(e, Poly):
        out = ZERO
        for m, c in e.terms:
            t = pconst(c)
            for n in m:
                x = substitute(n, sub, memo)
                assert isinstance(x, Poly), "an int atom rebuilds as an int polynomial"
                t = t * x
            out = out + t
    elif e.op is Op.LEAF:
        out = sub.get(e.args[0], wrap_node(e))
    elif e.op is Op.CONST:
        out = e
    else:
        out = build(e.op, [substitute(a, sub, memo) for a in e.args]).expr  # (conditions are collected as the guards are first built)
    memo[e.key] = out
    return out


def leaves_of(e: Expr, out: set | None = None) -> set:
    out = set() if out is None else out
    if isinstance(e, Poly):
        for m, _ in e.terms:
            for n in m:
                leaves_of(n, out)
    elif e.op is Op.LEAF:
        out.add(e.args[0])
    elif e.op is not Op.CONST:
        for a in e.args:
            leaves_of(a, out)
    return out


def recorded_parts(guard: Guard, producers: dict[str, Any], is_param: Callable[[str], bool]) -> tuple:
    """A guard as recorded, unsimplified, as :func:`python_check` parts: its operands' producer
    chains, each producer one operation (``is_param(name)``: the number is a parameter, a leaf)."""

    def unfolded(x) -> Expr:
        if isinstance(x, NumberProxy) and is_static_value(x) and not is_param(x.name):
            x = x.value
        if not isinstance(x, NumberProxy):
            return Node(Op.CONST, (x,), NumberKind.OTHER)
        if is_param(x.name):
            return Node(Op.LEAF, (x.name, 0), NumberKind.OTHER)
        bsym = producers[x.name]
        op = Op.of(number_ops.REPLAYABLE[bsym.sym.id].op)
        return Node(op, tuple(unfolded(a) for a in bsym.flat_args), NumberKind.OTHER)

    return (unfolded(guard.lhs), guard.op.symbol, unfolded(guard.rhs))


def collect_leaf_nodes(e: Expr, out: dict) -> None:
    if isinstance(e, Poly):
        for m, _ in e.terms:
            for n in m:
                collect_leaf_nodes(n, out)
    elif e.op is Op.LEAF:
        out.setdefault(e.args[0], e)
    elif e.op is not Op.CONST:
        for a in e.args:
            collect_leaf_nodes(a, out)
