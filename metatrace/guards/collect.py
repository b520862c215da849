"""Guards: every concretization of a symbolic number while tracing becomes a prologue check.

While thunder interprets a function under ``cache="symbolic values"`` a :class:`GuardCollector`
receives, from the runtime (rewritten metas) and from the safety net on NumberProxy's dunder
methods (``metatrace.proxies.number_methods``), each relation a branch or check decided (``flag > 5`` was
True) and each value baked in (``d == 1`` used as a dimension). When the prologue is built
(thunder's ``propagate_constraints``), each guard becomes a prologue constraint:

- its operands are projected back to the inputs through their producers (the recorded ops and
  thunder's own number ops, at any subsymbol depth); all guards of the entry are written out as
  Python expressions of the inputs in one function (:class:`GuardProgram`), which the prologue
  calls as ``metatrace_guards(program_id, *inputs)``; it raises when a relation does not hold,
  which thunder counts as a cache miss;
- an operand whose chain cannot be replayed (a value with no recorded producer, or a producer
  the python executor cannot run) pins every number input and tensor size to its current value:
  slower, never wrong.
"""

from __future__ import annotations

import logging
import math
import sys
from dataclasses import dataclass, field, replace
from typing import Any

import thunder.core.prims as prims
from thunder.core.proxies import IntegerProxy, NumberProxy, Proxy, TensorProxy

from metatrace.guards.record import Guard, is_leaf, is_static_value
from metatrace.guards.registry import PROGRAMS, guard_symbol, new_id
from metatrace.metas import number_ops

logger = logging.getLogger("metatrace.guards.collect")

# Relation names (eq, ne, lt, le, gt, ge): negation, operands swapped, Python symbol.
NEGATION, MIRROR, SYMBOLS = number_ops.NEGATION, number_ops.MIRROR, number_ops.SYMBOLS

# Producers the prologue can replay on numbers (the python executor runs them): id -> row.
REPLAYABLE = number_ops.REPLAYABLE


class GuardFailure(Exception):
    """Raised by a prologue guard that does not hold: thunder treats it as a cache miss."""


# Symbols whose number outputs are values read from tensor data: they have no trace-time value.
_READS_TENSOR_DATA = frozenset({"item", "tolist"})

# Frames of these files are plumbing between a concretization and the code that asked for it.
_PLUMBING = ("/metatrace/", "/thunder/core/proxies.py", "/thunder/core/langctxs.py", "/thunder/core/symbol.py",
             "/thunder/core/interpreter.py", "/thunder/core/jit_ext.py", "/thunder/core/baseutils.py",
             "/contextlib.py", "/functools.py")


def concretization_site(limit: int = 40) -> str:
    """``file:line in function`` of the innermost frame outside metatrace and thunder's plumbing:
    the thunder rule, clang function or meta that read the value. Walks at most ``limit`` frames."""
    frame = sys._getframe(2)
    while frame is not None and limit:
        path = frame.f_code.co_filename
        if path.endswith("/thunder/core/interpreter.py"):
            # a lookaside of thunder's interpreter: the decision is in the user's interpreted code
            return _interpreted_line() or "user code"
        if not any(part in path for part in _PLUMBING):
            short = path.split("site-packages/")[-1]
            return f"{short}:{frame.f_lineno} in {frame.f_code.co_name}"
        frame, limit = frame.f_back, limit - 1
    return ""


def _interpreted_line() -> str:
    """The line of user code thunder's interpreter is running, or ''."""
    from thunder.core.interpreter import get_interpreterruntimectx

    try:
        frame = get_interpreterruntimectx().frame_stack[-1]
    except (LookupError, IndexError, AttributeError):
        return ""
    line = frame.positions.lineno if frame.positions else "?"
    return f"{frame.code.co_filename}:{line} in {frame.code.co_name}"


class DataDependentError(RuntimeError):
    """A decision or a size depends on a value read from tensor data (``item``, ``tolist``): it has
    no meaning at trace time, so no cache entry can be built on it (torch.compile raises its
    data-dependent guard error in the same place)."""

    def __init__(self, guard: "Guard", value, source, where: str):
        self.guard, self.value, self.source, self.where = guard, value, source, where
        read = f"{source.sym.name}({', '.join(getattr(a, 'name', repr(a)) for a in source.flat_args)})"
        what = "a branch or check" if guard.why == "branch" else f"a value baked in ({guard.why})"
        super().__init__(
            f"{what} depends on {value.name}, which is computed from {read}: a value read from tensor data has "
            f"no trace-time value under cache=\"symbolic values\""
            + (f" (at {where})" if where else "")
            + ". Compute on the tensor instead (torch.where, masks), or move the decision out of the jitted function."
        )


class ExactValue:
    """A float or complex baked into a trace, compared as the very same value: NaN matches NaN
    (``nan == nan`` never holds, so the entry would reject the call it was traced for) and -0.0
    does not match 0.0 (``-0.0 == 0.0`` holds, and ``torch.tensor([v])`` baked in the sign)."""

    __slots__ = ("value",)

    def __init__(self, value: float | complex):
        self.value = value

    def __eq__(self, other) -> bool:
        other = other.value if isinstance(other, ExactValue) else other
        try:
            a, b = complex(self.value), complex(other)
        except (TypeError, OverflowError, ValueError):
            return False
        return all(
            (x == y and math.copysign(1.0, x) == math.copysign(1.0, y)) or (x != x and y != y)
            for x, y in ((a.real, b.real), (a.imag, b.imag))
        )

    def __ne__(self, other) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash((type(self.value), repr(self.value)))

    def __repr__(self) -> str:
        return repr(self.value)


def exact(value: Any) -> Any:
    """``value`` as an equality guard compares it: an ``ExactValue`` where ``==`` is not identity
    (NaN, a signed zero, any complex), else the value itself (simplifiable)."""
    if (type(value) is float and (math.isnan(value) or value == 0.0)) or type(value) is complex:
        return ExactValue(value)
    return value


_ORDERED = frozenset({"lt", "le", "gt", "ge"})


def _is_nan(x: Any) -> bool:
    v = x.value if isinstance(x, NumberProxy) else x
    return isinstance(v, (float, complex)) and v != v


@dataclass
class GuardCollector:
    """Receives the concretizations of one trace (see metatrace.metas.concretizations)."""

    guards: list[Guard] = field(default_factory=list)
    _seen: set = field(default_factory=set)
    # Producers of the numbers the runtime recorded, including ones later pruned from the trace.
    recorded: dict[str, Any] = field(default_factory=dict)
    _data_sources: dict[str, Any] = field(default_factory=dict)

    def relation(self, op: str, lhs: Any, rhs: Any, value: bool) -> None:
        if not value and op in _ORDERED:
            nan = next((side for side in (lhs, rhs) if _is_nan(side)), None)
            if nan is not None:
                # An ordered comparison with NaN is False, and its negation (``f <= 0.5`` for
                # ``not f > 0.5``) is False too: the guard is ``f != f`` (f is NaN), which is
                # exactly where every ordered comparison of f is False.
                self._add(Guard("ne", nan, nan, "branch"))
                return
        if not value:
            op = NEGATION[op]
        self._add(Guard(op, lhs, rhs, "branch"))

    def static(self, x: Any, value: Any, why: str) -> None:
        self._add(Guard("eq", x, exact(value), why))

    def produced(self, bsym) -> None:
        for out in bsym.flat_proxy_outs:
            self.recorded.setdefault(out.name, bsym)

    def _add(self, guard: Guard) -> None:
        if not isinstance(guard.lhs, NumberProxy) and not isinstance(guard.rhs, NumberProxy):
            return
        key = guard.key()
        if key not in self._seen:
            where = concretization_site()
            for side in (guard.lhs, guard.rhs):
                if isinstance(side, NumberProxy) and (source := self.tensor_data_source(side)) is not None:
                    raise DataDependentError(guard, side, source, where)
            self._seen.add(key)
            self.guards.append(replace(guard, where=where))

    def tensor_data_source(self, x: NumberProxy):
        """The bound symbol that read ``x`` (or a number it is computed from) out of tensor data
        (``item``, ``tolist``), or None. Memoized: producers never change once made."""
        cache = self._data_sources
        todo, path = [x], []
        while todo:
            p = todo.pop()
            if p.name in cache:
                if cache[p.name] is not None:
                    for q in path:
                        cache[q] = cache[p.name]
                    return cache[p.name]
                continue
            path.append(p.name)
            bsym = self.recorded.get(p.name)
            if bsym is None or is_leaf(p):
                cache[p.name] = None
                continue
            if bsym.sym.id == prims.PrimIDs.ITEM or bsym.sym.name in _READS_TENSOR_DATA:
                for q in path:
                    cache[q] = bsym
                return bsym
            cache[p.name] = None  # provisional: a cycle cannot make it data-dependent
            todo.extend(a for a in bsym.flat_proxy_args if isinstance(a, NumberProxy))
        return None


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


def project(values, producers: dict[str, Any], is_leaf=is_leaf) -> tuple[list, list]:
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
        if x.name in done or is_static_value(x):
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
    if is_static_value(x):
        return repr(x.value)
    if is_leaf(x) or x.name not in producers:
        return names.get(x.name, x.name)
    bsym = producers[x.name]
    row = REPLAYABLE.get(bsym.sym.id)
    args = [describe(a, producers, names) for a in bsym.flat_args]
    if row is None:
        return f"{bsym.sym.name}({', '.join(args)})"
    if row.op == "convert":  # (x, int) -> int(x)
        return f"{_type_name(bsym.flat_args[1])}({args[0]})"
    if len(args) == 1:
        return f"-{args[0]}" if row.op == "neg" else f"{row.shown}({args[0]})"
    if row.op in ("max", "min"):
        return f"{row.op}({args[0]}, {args[1]})"
    return f"({args[0]} {row.shown} {args[1]})"


def _type_name(t) -> str:
    return getattr(t, "__name__", None) or str(t)


def describe_guard(guard: Guard, producers: dict[str, Any], names: dict[str, str] | None = None) -> str:
    lhs, rhs = describe(guard.lhs, producers, names), describe(guard.rhs, producers, names)
    return f"{_unparen(lhs)} {SYMBOLS[guard.op]} {_unparen(rhs)}"


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


# ---------------------------------------------------------------------------------------------
# The prologue check: all guards of a cache entry compiled into one Python function
# ---------------------------------------------------------------------------------------------

# Relations that hold between a number and itself (for ints: a float NaN is not equal to itself).
_REFLEXIVE_TRUE = {rel for rel, holds in number_ops.REFLEXIVE.items() if holds}


def normalize(guard: Guard, producers: dict[str, Any]) -> Guard:
    """``(a > b) != 0`` -> ``a > b`` and ``(a > b) == 0`` -> ``a <= b``: a truth test of a
    comparison is guarded by the comparison itself (one check, readable)."""
    while (
        guard.op in ("ne", "eq")
        and isinstance(guard.lhs, NumberProxy)
        and not is_leaf(guard.lhs)
        and type(guard.rhs) in (int, bool)
        and guard.rhs == 0
        and (bsym := producers.get(guard.lhs.name)) is not None
        and (op := number_ops.relation(bsym.sym.id)) is not None  # a comparison prim or exact comparison
    ):
        lhs, rhs = bsym.flat_args[0], bsym.flat_args[1]
        nan = next((side for side in (lhs, rhs) if _is_nan(side)), None)
        if guard.op == "eq" and op in _ORDERED and nan is not None:
            # ``not (f > 0.5)`` with f NaN is not ``f <= 0.5``: guarded as ``f != f`` (f is NaN)
            return Guard("ne", nan, nan, guard.why)
        guard = Guard(op if guard.op == "ne" else NEGATION[op], lhs, rhs, guard.why)
    if not isinstance(guard.lhs, NumberProxy) and isinstance(guard.rhs, NumberProxy):
        guard = Guard(MIRROR[guard.op], guard.rhs, guard.lhs, guard.why)  # 1 <= i -> i >= 1
    elif (
        guard.op in ("eq", "ne")
        and isinstance(guard.rhs, NumberProxy)
        and guard.rhs.name < guard.lhs.name
    ):
        guard = Guard(guard.op, guard.rhs, guard.lhs, guard.why)  # one order for a == b and b == a
    return guard


def is_tautology(guard: Guard, sizes: set[str]) -> bool:
    """Holds for every call: ``x <= x``, or a tensor size compared with 0 the way sizes always are."""
    if guard.lhs is guard.rhs:
        # x == x does not hold for a float NaN: only integers compare reflexively for every call
        return guard.op in _REFLEXIVE_TRUE and isinstance(guard.lhs, IntegerProxy)
    size_lhs = isinstance(guard.lhs, NumberProxy) and guard.lhs.name in sizes
    size_rhs = isinstance(guard.rhs, NumberProxy) and guard.rhs.name in sizes
    zero = lambda x: type(x) is int and x == 0  # noqa: E731
    return (size_lhs and zero(guard.rhs) and guard.op == "ge") or (size_rhs and zero(guard.lhs) and guard.op == "le")


class GuardProgram:
    """The guards of one cache entry as one function of the entry's input numbers and sizes.

    Producer chains are written out as Python expressions (``(v0 + 1) // 2 <= v1``), so the
    prologue pays one call and a few arithmetic operations per guard, not a bound symbol each.
    """

    def __init__(
        self,
        program_id: str,
        guards: list[Guard],
        texts: list[str],
        leaves: list[NumberProxy],
        producers: dict[str, Any],
        leaf_names: list[str] | None = None,
    ):
        self.program_id = program_id
        self.texts = texts
        self.leaves = leaves
        # leaf_names: how the guards' proxies name the leaves, if not by the leaves' own names.
        # One parameter per leaf position (the prologue passes every leaf); a name seen twice
        # (a size shared by two inputs) reads the first.
        names = leaf_names or [p.name for p in leaves]
        signature = [f"v{i}" for i in range(len(names))]
        params: dict[str, str] = {}
        for name, param in zip(names, signature):
            params.setdefault(name, param)
        constants: list[Any] = []

        def const(x) -> str:
            constants.append(x)
            return f"_c[{len(constants) - 1}]"

        from metatrace.guards.simplify import python_check, recorded_parts

        lines = [f"def guards({', '.join(signature)}):"]
        for i, g in enumerate(guards):
            # a metatrace.guards.simplify.SimpleGuard writes its own Python over the leaves; a
            # guard as recorded is written by the same emitter, over its producer chains
            parts = g.parts if hasattr(g, "python") else recorded_parts(g, producers, params.__contains__)
            check = python_check(parts, params.__getitem__, const)
            lines.append(f"    if not ({check}):")
            lines.append(f"        _fail(_id, _t[{i}])")
        lines.append("    return None")
        self.source = "\n".join(lines)
        namespace = {**number_ops.NAMESPACE, "_c": tuple(constants), "_t": tuple(texts), "_fail": _fail,
                     "_id": program_id}
        exec(compile(self.source, "<metatrace guards>", "exec"), namespace)
        self.fn = namespace["guards"]


def _fail(program_id: str, text: str) -> None:
    from metatrace.guards.explain import record_rejection

    logger.debug("guard failed: %s", text)
    record_rejection(program_id, text)
    raise GuardFailure(f"guard failed: {text}")


# Guard programs by id (metatrace.guards.registry.PROGRAMS): the prologue's bound symbol carries the id.


def check_guards(program_id: str, *leaves) -> None:
    """Runs in the prologue (python executor). Raises, never asserts: asserts vanish under -O."""
    PROGRAMS[program_id].fn(*leaves)


@dataclass
class ProgramConstraint:
    """A prologue constraint: thunder calls it with the prologue's proxies for the leaves."""

    program_id: str

    def __call__(self, *leaves):
        guard_symbol()(self.program_id, *leaves)


def input_sizes_and_numbers(inputs) -> list[NumberProxy]:
    out = []
    for v in inputs:
        p = getattr(v, "proxy", v)
        if isinstance(p, NumberProxy):
            out.append(p)
        elif isinstance(p, TensorProxy):
            out.extend(s for s in p._shape if isinstance(s, NumberProxy) and is_leaf(s))
    return out


def _size_names(inputs) -> set[str]:
    return {s.name for v in inputs if isinstance(p := getattr(v, "proxy", v), TensorProxy)
            for s in p._shape if isinstance(s, NumberProxy)}


def add_prologue_constraints(
    ctx, inputs, computation_trace, collector: GuardCollector, names: dict[str, str] | None = None
) -> list[str]:
    """Turns the collector's guards into one prologue constraint; returns their readable forms.

    The guards are simplified first (``metatrace.guards.simplify``): the program checks, and ``explain``
    shows, an equivalent small set over the inputs."""
    from thunder.clang import check_number_type_and_value

    from metatrace.guards.simplify import simplify

    producers = producer_map(computation_trace, collector)
    sizes = _size_names(inputs)
    input_names = {getattr(v, "proxy", v).name for v in inputs}
    value_checked: set[str] = set()
    guards, texts, seen = [], [], set()
    leaves: dict[str, NumberProxy] = {}
    pin_all = None
    for guard in collector.guards:
        guard = normalize(guard, producers)
        if is_tautology(guard, sizes) or guard.key() in seen:
            continue
        seen.add(guard.key())
        try:
            _, guard_leaves = project([guard.lhs, guard.rhs], producers)
        except Unprojectable as e:
            logger.debug("cannot project %s %s %s (%s): %s", guard.lhs, guard.op, guard.rhs, guard.why, e)
            pin_all = pin_all or (f"{e} at {guard.where}" if guard.where else str(e))
            continue
        if all(p.is_static_constrained() for p in guard_leaves):
            # Constants, or static numbers (a module's configuration). thunder's prologue checks
            # a static number only when the computation takes it as an input: one that only
            # decided a branch (``if self.training``, ``x[:2] if self.flag else x``) is checked
            # here, by value, or ``model.eval()`` would reuse the training entry.
            for p in guard_leaves:
                if p.name not in input_names and p.name not in value_checked and p.history is not None:
                    value_checked.add(p.name)
                    ctx.add_constraint((check_number_type_and_value, p, p.value))
            continue
        for p in guard_leaves:
            leaves.setdefault(p.name, p)
        guards.append(guard)
    program_id = new_id("g")
    try:
        checked = simplify(guards, producers, input_sizes_and_numbers(inputs), names, sizes)
        texts = [g.text for g in checked]
        used = {name for g in checked for name in g.leaves}
        program = GuardProgram(program_id, checked, texts, [p for n, p in leaves.items() if n in used], producers)
    except Exception:  # not expected: the guards as recorded are as correct, only longer
        logger.warning("guard simplification failed: checking the guards as recorded", exc_info=True)
        checked, texts = guards, [describe_guard(guard, producers, names) for guard in guards]
        program = GuardProgram(program_id, guards, texts, list(leaves.values()), producers)
    if checked:
        PROGRAMS[program_id] = program
        ctx.add_constraint((ProgramConstraint(program_id), *program.leaves))
    if pin_all is not None:
        # A value we cannot express in terms of the inputs was baked in: only the exact same
        # inputs may reuse this entry.
        for p in input_sizes_and_numbers(inputs):
            ctx.add_constraint((check_number_type_and_value, p, p.value))
            texts.append(f"{(names or {}).get(p.name, p.name)} == {p.value!r} (pinned: {pin_all})")
    return texts
