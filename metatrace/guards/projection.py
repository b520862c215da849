"""Projecting guards onto the inputs: the producer chains that compute a guard's operands from
the entry's input numbers and sizes, and the guard written as an expression of them.

Only producers the prologue can replay (``metatrace.metas.number_ops``: rows with ``replay``) are
followed; an operand with another producer is :class:`Unprojectable`, and the caller pins the
inputs instead.
"""

from __future__ import annotations

from typing import Any

import thunder.core.prims as prims
from thunder.core.proxies import NumberProxy, Proxy

from metatrace.guards.collect import GuardCollector
from metatrace.guards.guard_record import Guard, is_leaf, is_static_value
from metatrace.metas import number_ops
from metatrace.metas.algebra_ops import Op

# Producers the prologue can replay on numbers (the python executor runs them): id -> row.
REPLAYABLE = number_ops.REPLAYABLE


class Unprojectable(Exception):
    pass


def producer_map(computation_trace, collector: GuardCollector) -> dict[str, Any]:
    """Number name -> the bound symbol that produced it, at any depth of the trace."""
    producers: dict[str, Any] = {}

    def walk(bsyms):
        for bsym in bsyms:
            walk(bsym.subsymbols)
            if bsym.sym.id == prims.PrimIDs.SHAPE:
                continue  # re-binds a tensor's sizes; their real producers are elsewhere
            for out in bsym.flat_proxy_outs:
                if isinstance(out, NumberProxy):
                    producers.setdefault(out.name, bsym)

    walk(computation_trace.bound_symbols)
    for name, bsym in collector.recorded.items():
        producers.setdefault(name, bsym)
    return producers


def project(values, producers: dict[str, Any], is_leaf=is_leaf) -> tuple[list, list]:
    """(producer bound symbols in replay order, leaf proxies) that compute ``values``."""
    chain: list = []
    leaves: dict[str, NumberProxy] = {}
    visiting: set[str] = set()
    done: set[str] = set()

    def visit(x):
        if not isinstance(x, NumberProxy):
            if isinstance(x, Proxy):
                raise Unprojectable(f"a value that is not a number ({type(x).__name__})")
            return
        if x.name in done or is_static_value(x):
            return
        if is_leaf(x):
            leaves.setdefault(x.name, x)
            done.add(x.name)
            return
        bsym = producers.get(x.name)
        if bsym is None:
            raise Unprojectable("a number computed outside the trace")
        if bsym.sym.id not in REPLAYABLE:
            raise Unprojectable(f"a number computed by {bsym.sym.name}, which the prologue cannot run")
        if x.name in visiting:
            raise Unprojectable("a number that depends on itself")
        visiting.add(x.name)
        for arg in bsym.flat_args:
            visit(arg)
        visiting.discard(x.name)
        done.add(x.name)
        if all(b is not bsym for b in chain):
            chain.append(bsym)

    for v in values:
        visit(v)
    return chain, list(leaves.values())


def describe(x, producers: dict[str, Any], names: dict[str, str] | None = None) -> str:
    """``x`` as an expression of the inputs: ``(i + 1) // 2``."""
    names = names or {}
    if not isinstance(x, NumberProxy):
        return repr(x)
    if is_static_value(x):
        return repr(x.value)
    if is_leaf(x) or x.name not in producers:
        return names.get(x.name, x.name)
    bsym = producers[x.name]
    row = REPLAYABLE.get(bsym.sym.id)
    args = [describe(a, producers, names) for a in bsym.flat_args]
    if row is None:
        return f"{bsym.sym.name}({', '.join(args)})"
    op = Op.of(row.op)
    if op is Op.CONVERT:  # (x, int) -> int(x)
        return f"{_type_name(bsym.flat_args[1])}({args[0]})"
    if len(args) == 1:
        return f"{row.shown}{args[0]}" if op is Op.NEG else f"{row.shown}({args[0]})"
    if op in _FUNCTIONS:
        return f"{row.shown}({args[0]}, {args[1]})"
    return f"({args[0]} {row.shown} {args[1]})"


# Binary operations shown as calls (``max(a, b)``), not as operators.
_FUNCTIONS = frozenset({Op.MAX, Op.MIN})


def _type_name(t) -> str:
    return getattr(t, "__name__", None) or str(t)


def describe_guard(guard: Guard, producers: dict[str, Any], names: dict[str, str] | None = None) -> str:
    lhs, rhs = describe(guard.lhs, producers, names), describe(guard.rhs, producers, names)
    return f"{_unparen(lhs)} {guard.op.symbol} {_unparen(rhs)}"


def _unparen(text: str) -> str:
    if text.startswith("(") and text.endswith(")"):
        depth = 0
        for i, ch in enumerate(text):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0 and i < len(text) - 1:
                return text
        return text[1:-1]
    return text
