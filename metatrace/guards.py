"""Guards: every concretization of a symbolic number while tracing becomes a prologue check.

While thunder interprets a function under ``cache="symbolic values"`` a :class:`GuardCollector`
receives, from the runtime (rewritten metas) and from the safety net on NumberProxy's dunder
methods (``metatrace.safety_net``), each relation a branch or check decided (``flag > 5`` was
True) and each value baked in (``d == 1`` used as a dimension). When the prologue is built
(thunder's ``propagate_constraints``), each guard becomes a prologue constraint:

- its operands are projected back to the inputs through their producers (the recorded ops and
  thunder's own number ops, at any subsymbol depth); the producer chain is *replayed* in the
  prologue on the call's inputs, and ``metatrace_guard(lhs, op, rhs, expected)`` raises when the
  relation does not hold, which thunder counts as a cache miss;
- an operand whose chain cannot be replayed (a value with no recorded producer, or a producer
  the python executor cannot run) pins every number input and tensor size to its current value:
  slower, never wrong.
"""

from __future__ import annotations

import logging
import operator
from dataclasses import dataclass, field
from numbers import Number
from typing import Any

import thunder.core.prims as prims
from thunder.core.proxies import NumberProxy, Proxy, TensorProxy

logger = logging.getLogger("metatrace.guards")

OPS = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge}
NEGATION = {"eq": "ne", "ne": "eq", "lt": "ge", "ge": "lt", "le": "gt", "gt": "le"}
SYMBOLS = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}

# Producers the prologue can replay on numbers (the python executor runs them).
REPLAYABLE = {
    prims.PrimIDs.ADD: "+", prims.PrimIDs.SUB: "-", prims.PrimIDs.MUL: "*", prims.PrimIDs.PY_FLOORDIV: "//",
    prims.PrimIDs.REMAINDER: "%", prims.PrimIDs.POW: "**", prims.PrimIDs.DIV: "/",
    prims.PrimIDs.BITWISE_AND: "&", prims.PrimIDs.BITWISE_OR: "|", prims.PrimIDs.BITWISE_XOR: "^",
    prims.PrimIDs.EQ: "==", prims.PrimIDs.NE: "!=", prims.PrimIDs.LT: "<", prims.PrimIDs.LE: "<=",
    prims.PrimIDs.GT: ">", prims.PrimIDs.GE: ">=",
    prims.PrimIDs.NEG: "neg", prims.PrimIDs.PY_ABS: "abs", prims.PrimIDs.MAXIMUM: "max", prims.PrimIDs.MINIMUM: "min",
}


class GuardFailure(Exception):
    """Raised by a prologue guard that does not hold: thunder treats it as a cache miss."""


@dataclass(frozen=True)
class Guard:
    """``lhs <op> rhs`` must hold for a cache entry to be reused. ``why``: what concretized it."""

    op: str
    lhs: Any
    rhs: Any
    why: str

    def key(self) -> tuple:
        return (self.op, _key(self.lhs), _key(self.rhs))


def _key(x) -> Any:
    return ("proxy", x.name) if isinstance(x, Proxy) else ("value", type(x).__name__, x)


@dataclass
class GuardCollector:
    """Receives the concretizations of one trace (see metatrace.sink)."""

    guards: list[Guard] = field(default_factory=list)
    _seen: set = field(default_factory=set)
    # Producers of the numbers the runtime recorded, including ones later pruned from the trace.
    recorded: dict[str, Any] = field(default_factory=dict)

    def relation(self, op: str, lhs: Any, rhs: Any, value: bool) -> None:
        if not value:
            op = NEGATION[op]
        self._add(Guard(op, lhs, rhs, "branch"))

    def static(self, x: Any, value: Any, why: str) -> None:
        self._add(Guard("eq", x, value, why))

    def produced(self, bsym) -> None:
        for out in bsym.flat_proxy_outs:
            self.recorded.setdefault(out.name, bsym)

    def _add(self, guard: Guard) -> None:
        if not isinstance(guard.lhs, NumberProxy) and not isinstance(guard.rhs, NumberProxy):
            return
        key = guard.key()
        if key not in self._seen:
            self._seen.add(key)
            self.guards.append(guard)


# ---------------------------------------------------------------------------------------------
# Projection to the inputs
# ---------------------------------------------------------------------------------------------


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


def is_leaf(p: NumberProxy) -> bool:
    """An input number or an input tensor's size: the prologue can unpack it."""
    return p.history is not None


def project(values, producers: dict[str, Any]) -> tuple[list, list]:
    """(producer bound symbols in replay order, leaf proxies) that compute ``values``."""
    chain: list = []
    leaves: dict[str, NumberProxy] = {}
    visiting: set[str] = set()
    done: set[str] = set()

    def visit(x):
        if not isinstance(x, NumberProxy):
            if isinstance(x, Proxy):
                raise Unprojectable(f"{x.name} is not a number")
            return
        if x.name in done:
            return
        if is_leaf(x):
            leaves.setdefault(x.name, x)
            done.add(x.name)
            return
        bsym = producers.get(x.name)
        if bsym is None:
            raise Unprojectable(f"{x.name} has no producer")
        if bsym.sym.id not in REPLAYABLE:
            raise Unprojectable(f"{x.name} is produced by {bsym.sym.name}, which the prologue cannot run")
        if x.name in visiting:
            raise Unprojectable(f"{x.name} depends on itself")
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
    if is_leaf(x) or x.name not in producers:
        return names.get(x.name, x.name)
    bsym = producers[x.name]
    symbol = REPLAYABLE.get(bsym.sym.id)
    args = [describe(a, producers, names) for a in bsym.flat_args]
    if symbol is None:
        return f"{bsym.sym.name}({', '.join(args)})"
    if len(args) == 1:
        return f"-{args[0]}" if symbol == "neg" else f"{symbol}({args[0]})"
    if symbol in ("max", "min"):
        return f"{symbol}({args[0]}, {args[1]})"
    return f"({args[0]} {symbol} {args[1]})"


def describe_guard(guard: Guard, producers: dict[str, Any], names: dict[str, str] | None = None) -> str:
    lhs, rhs = describe(guard.lhs, producers, names), describe(guard.rhs, producers, names)
    # A truth test of a comparison reads better as the comparison: (flag > 5) != 0 -> flag > 5.
    if guard.op in ("ne", "eq") and rhs in ("0", "False") and lhs.startswith("(") and any(
        f" {s} " in lhs for s in ("==", "!=", "<", "<=", ">", ">=")
    ):
        inner = lhs[1:-1]
        return inner if guard.op == "ne" else f"not ({inner})"
    text = f"{lhs} {SYMBOLS[guard.op]} {rhs}"
    return text[1:-1] if False else text


# ---------------------------------------------------------------------------------------------
# The prologue check
# ---------------------------------------------------------------------------------------------


def check_guard(lhs, op: str, rhs, expected: bool, text: str) -> None:
    """Runs in the prologue (python executor). Must raise, not assert: asserts vanish under -O."""
    if OPS[op](lhs, rhs) is not expected and bool(OPS[op](lhs, rhs)) != expected:
        logger.debug("guard failed: %s (lhs=%r, rhs=%r)", text, lhs, rhs)
        raise GuardFailure(f"guard failed: {text}")


@dataclass
class Replay:
    """A prologue constraint: replays the producer chain on the prologue's inputs, then checks.

    thunder calls it as ``constraint(*leaves)`` inside the prologue trace; the leaves it receives
    are the prologue's own proxies for the inputs.
    """

    guard: Guard
    chain: list
    leaves: list
    text: str

    def __call__(self, *leaves):
        from metatrace.guard_op import guard_symbol

        env: dict[str, Any] = {old.name: new for old, new in zip(self.leaves, leaves)}

        def value(x):
            return env.get(x.name, x) if isinstance(x, Proxy) else x

        for bsym in self.chain:
            out = bsym.sym(*(value(a) for a in bsym.args), **{k: value(v) for k, v in bsym.kwargs.items()})
            for old, new in zip(bsym.flat_proxy_outs, [out] if not isinstance(out, (tuple, list)) else out):
                env[old.name] = new
        guard_symbol()(value(self.guard.lhs), self.guard.op, value(self.guard.rhs), True, self.text)

    def __eq__(self, other):  # thunder dedupes constraints by comparing their callables
        return isinstance(other, Replay) and self.text == other.text and self.guard.key() == other.guard.key()

    def __hash__(self):
        return hash(self.guard.key())


def input_sizes_and_numbers(inputs) -> list[NumberProxy]:
    out = []
    for v in inputs:
        p = getattr(v, "proxy", v)
        if isinstance(p, NumberProxy):
            out.append(p)
        elif isinstance(p, TensorProxy):
            out.extend(s for s in p._shape if isinstance(s, NumberProxy) and is_leaf(s))
    return out


def add_prologue_constraints(ctx, inputs, computation_trace, collector: GuardCollector) -> list[str]:
    """Turns the collector's guards into ``ctx`` constraints; returns their readable forms."""
    from thunder.clang import check_number_type_and_value

    producers = producer_map(computation_trace, collector)
    texts = []
    pin_all = None
    for guard in collector.guards:
        try:
            chain, leaves = project([guard.lhs, guard.rhs], producers)
        except Unprojectable as e:
            pin_all = pin_all or str(e)
            continue
        if not leaves:
            continue  # constant on both sides: holds for every call
        text = describe_guard(guard, producers)
        ctx.add_constraint((Replay(guard, chain, leaves, text), *leaves))
        texts.append(text)
    if pin_all is not None:
        # A value we cannot express in terms of the inputs was baked in: only the exact same
        # inputs may reuse this entry.
        for p in input_sizes_and_numbers(inputs):
            ctx.add_constraint((check_number_type_and_value, p, p.value))
            texts.append(f"{p.name} == {p.value!r} (pinned: {pin_all})")
    return texts
