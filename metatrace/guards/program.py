"""The prologue's guard program: a cache entry's guards, normalized and simplified, compiled into
one Python function of the entry's input numbers and sizes that the prologue calls.

A guard that cannot be projected onto the inputs pins every input number and size instead
(:func:`add_prologue_constraints`): slower, never wrong.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from thunder.core.proxies import IntegerProxy, NumberProxy, TensorProxy

from metatrace.guards.collect import ORDERED, GuardCollector, GuardFailure, is_nan
from metatrace.guards.projection import Unprojectable, describe_guard, producer_map, project
from metatrace.guards.record import FLOAT_RANGE, Guard, is_leaf
from metatrace.metas.concretizations import SHOWN_WHY
from metatrace.guards.registry import PROGRAMS, guard_symbol, new_id
from metatrace.guards.simplify import python_check, recorded_parts
from metatrace.guards.structure import add_number_type_constraint, check_failed, number_types_changed
from metatrace.metas import number_ops
from metatrace.metas.number_ops import MIRROR, NEGATION

# The logger's name from before the guards were split by concern: logging configurations name it.
logger = logging.getLogger("metatrace.guards.collect")

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
        nan = next((side for side in (lhs, rhs) if is_nan(side)), None)
        if guard.op == "eq" and op in ORDERED and nan is not None:
            # ``not (f > 0.5)`` with f NaN is not ``f <= 0.5``: guarded as ``f != f`` (f is NaN)
            return Guard("ne", nan, nan, guard.why, guard.where)
        guard = Guard(op if guard.op == "ne" else NEGATION[op], lhs, rhs, guard.why, guard.where)
    if not isinstance(guard.lhs, NumberProxy) and isinstance(guard.rhs, NumberProxy):
        guard = Guard(MIRROR[guard.op], guard.rhs, guard.lhs, guard.why, guard.where)  # 1 <= i -> i >= 1
    elif (
        guard.op in ("eq", "ne")
        and isinstance(guard.rhs, NumberProxy)
        and guard.rhs.name < guard.lhs.name
    ):
        guard = Guard(guard.op, guard.rhs, guard.lhs, guard.why, guard.where)  # one order for a == b and b == a
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
        number_types: tuple = (),
    ):
        self.program_id = program_id
        self.texts = texts
        self.leaves = leaves
        self.number_types = tuple(number_types)
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

        # After the leaves, one parameter per number argument whose type is checked first
        # (metatrace.guards.structure): one prologue call for the structure and the guards.
        typed = [f"n{i}" for i in range(len(self.number_types))]
        lines = [f"def guards({', '.join(signature + typed)}):"]
        if typed:
            mismatch = " or ".join(f"type({n}) is not _types[{i}]" for i, n in enumerate(typed))
            lines += [f"    if {mismatch}:", f"        _types_changed(_id, _types, {', '.join(typed)})"]
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
                     "_id": program_id, "_types": self.number_types, "_types_changed": number_types_changed}
        exec(compile(self.source, "<metatrace guards>", "exec"), namespace)
        self.fn = namespace["guards"]


def _fail(program_id: str, text: str) -> None:
    logger.debug("guard failed: %s", text)
    raise check_failed(f"guard failed: {text}", GuardFailure, program_id)


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


def _with_reason(guard, reasons: dict[str, str], excluded: dict | None = None) -> str:
    """A pin (one input size or number equal to a constant) says what fixed it: the value baked
    in and the line that did (``k.shape[1] == 4 (float() at model.py:12 in forward)``). An
    exclusion (``B != 64``: one value, or one relation, that recompiles) says which check decided
    it (``B != 64 (checked at thunder/clang/__init__.py:123 in maybe_broadcast)``). A range or a
    pin that only branches decided reads as it is."""
    parts = guard.parts
    is_pin = len(guard.leaves) == 1 and len(parts) == 3 and parts[1] == "=="
    reason = reasons.get(guard.leaves[0]) if is_pin else None
    if reason is None and len(parts) == 3 and parts[1] == "!=" and excluded:
        where = excluded.get(frozenset(guard.leaves))
        reason = f"checked at {where}" if where else None
    return f"{guard.text} ({reason})" if reason else guard.text


class _AsRecorded(Exception):
    """This entry's guards are checked as recorded (not simplified)."""


@dataclass
class _Projected:
    """The collector's guards that the program checks, projected onto the inputs."""

    guards: list = field(default_factory=list)
    leaves: dict = field(default_factory=dict)  # leaf name -> proxy, in first-use order
    reasons: dict = field(default_factory=dict)  # leaf name -> what first baked in a value computed from it
    decided: dict = field(default_factory=dict)  # leaf name -> the first branch or check that read it
    excluded: dict = field(default_factory=dict)  # leaf names of a != guard -> the line that decided it
    pin_all: str | None = None  # why every input is pinned (a guard no input expression can state)


def _project_guards(ctx, inputs, collector: GuardCollector, producers: dict, sizes: set[str]) -> _Projected:
    """Normalizes, deduplicates and projects the collector's guards; a guard over static numbers
    only becomes a value check of them, one that cannot be projected pins every input."""
    from thunder.clang import check_number_type_and_value

    out = _Projected()
    input_names = {getattr(v, "proxy", v).name for v in inputs}
    value_checked: set[str] = set()
    seen = set()
    for guard in collector.guards:
        guard = normalize(guard, producers)
        if is_tautology(guard, sizes) or guard.key() in seen:
            continue
        seen.add(guard.key())
        try:
            _, guard_leaves = project([guard.lhs, guard.rhs], producers)
        except Unprojectable as e:
            logger.debug("cannot project %s %s %s (%s): %s", guard.lhs, guard.op, guard.rhs, guard.why, e)
            if guard.why == FLOAT_RANGE:
                # float(n) of a number no guard can express: no simplified guard relies on it
                seen.discard(guard.key())  # a decision with the same relation is still checked
                continue
            out.pin_all = out.pin_all or (f"{e} at {guard.where}" if guard.where else str(e))
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
            out.leaves.setdefault(p.name, p)
            if guard.why in SHOWN_WHY:  # a reason explain names over any other (einsum's order, ...)
                out.reasons[p.name] = guard.why + (f" at {guard.where}" if guard.where else "")
            elif guard.why != "branch" and guard.op == "eq":  # a value baked in
                out.reasons.setdefault(p.name, guard.why + (f" at {guard.where}" if guard.where else ""))
            elif guard.where:
                out.decided.setdefault(p.name, f"checked at {guard.where}")
        if guard.op == "ne" and guard.where:
            out.excluded.setdefault(frozenset(p.name for p in guard_leaves), guard.where)
        out.guards.append(guard)
    return out


def add_prologue_constraints(
    ctx, inputs, computation_trace, collector: GuardCollector, names: dict[str, str] | None = None,
    numbers: list = (),
) -> list[str]:
    """Turns the collector's guards into one prologue constraint; returns their readable forms.

    The guards are simplified first (``metatrace.guards.simplify``): the program checks, and ``explain``
    shows, an equivalent small set over the inputs. ``numbers``: (proxy, type) of the number
    arguments (:func:`metatrace.guards.structure.add_structure_constraints`), whose types the
    program checks before its guards."""
    from thunder.clang import check_number_type_and_value

    from metatrace.guards.simplify import simplify  # looked up per call: tests spy on it

    producers = producer_map(computation_trace, collector)
    sizes = _size_names(inputs)
    projected = _project_guards(ctx, inputs, collector, producers, sizes)
    guards, leaves = projected.guards, projected.leaves
    program_id = new_id("g")
    types = tuple(t for _, t in numbers)
    try:
        if getattr(collector, "inexact_float", False):
            # an integer beyond 2**53 was converted to float: the algebra's reading of float(n)
            # as n does not hold (metatrace.proxies.float_numbers.guard_exact_float)
            raise _AsRecorded()
        checked = simplify(guards, producers, input_sizes_and_numbers(inputs), names, sizes)
        texts = [_with_reason(g, projected.decided | projected.reasons, projected.excluded) for g in checked]
        used = {name for g in checked for name in g.leaves}
        program = GuardProgram(program_id, checked, texts, [p for n, p in leaves.items() if n in used], producers,
                               number_types=types)
    except Exception as e:  # not expected: the guards as recorded are as correct, only longer
        if not isinstance(e, _AsRecorded):
            logger.warning("guard simplification failed: checking the guards as recorded", exc_info=True)
        checked, texts = guards, [describe_guard(guard, producers, names) for guard in guards]
        program = GuardProgram(program_id, guards, texts, list(leaves.values()), producers, number_types=types)
    if checked:
        PROGRAMS[program_id] = program
        ctx.add_constraint((ProgramConstraint(program_id), *program.leaves, *(p for p, _ in numbers)))
    elif numbers:
        add_number_type_constraint(ctx, numbers)
    if projected.pin_all is not None:
        # A value we cannot express in terms of the inputs was baked in: only the exact same
        # inputs may reuse this entry.
        for p in input_sizes_and_numbers(inputs):
            ctx.add_constraint((check_number_type_and_value, p, p.value))
            texts.append(f"{(names or {}).get(p.name, p.name)} == {p.value!r} (pinned: {projected.pin_all})")
    return texts
