"""The one builder of guard programs: a compile step's collected guards -> one checked program.

Two compile steps collect guards: thunder's interpretation of the function (the prologue's
program, :func:`add_prologue_constraints`, from thunder's ``propagate_constraints``) and the grad
transform, which runs after the prologue is built (:mod:`metatrace.grad.deferred_guards` fills
the program the prologue reserved for it). Both call :func:`build_program`, whose steps run in
this order, each for a reason:

1. normalize: a truth test of a comparison is the comparison, one operand order for ``==`` and
   ``!=`` (duplicates are found, texts read as relations);
2. drop tautologies and duplicates;
3. project each guard onto the program's leaves (input numbers and sizes). A guard over static
   numbers only is a value check of them (thunder's prologue reads a static number only when it
   is an input); a float-range guard that does not project is left out (no guard over the
   inputs relies on it); any other guard that does not project pins every leaf: slower, never
   wrong;
4. simplify (:mod:`metatrace.guards.simplify`), unless an integer beyond 2**53 was converted to
   float (the algebra reads ``float(n)`` as ``n``) or the simplifier fails: then the guards are
   checked as recorded, as correct and only longer;
5. compile into one function (:class:`metatrace.guards.compiled_program.GuardProgram`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from thunder.core.proxies import IntegerProxy, NumberProxy, TensorProxy

from metatrace.guards import provenance
from metatrace.guards.check_texts import NO_VALUE, CheckText
from metatrace.guards.collect import GuardCollector, exact, is_nan
from metatrace.guards.compiled_program import GuardProgram, ProgramConstraint, input_sizes_and_numbers
from metatrace.guards.projection import Unprojectable, describe_guard, producer_map, project
from metatrace.guards.guard_record import Guard, is_leaf
from metatrace.state.registry import PROGRAMS, new_id
from metatrace.guards.structure import add_number_type_constraint
from metatrace.metas import number_ops
from metatrace.metas.concretizations import Reason, ReasonKind
from metatrace.metas.relations import Relation

# The logger's name from before the guards were split by concern: logging configurations name it.
logger = logging.getLogger("metatrace.guards.collect")

def normalize(guard: Guard, producers: dict[str, Any]) -> Guard:
    """``(a > b) != 0`` -> ``a > b`` and ``(a > b) == 0`` -> ``a <= b``: a truth test of a
    comparison is guarded by the comparison itself (one check, readable)."""
    while (
        not guard.op.ordered
        and isinstance(guard.lhs, NumberProxy)
        and not is_leaf(guard.lhs)
        and type(guard.rhs) in (int, bool)
        and guard.rhs == 0
        and (bsym := producers.get(guard.lhs.name)) is not None
        and (name := number_ops.relation(bsym.sym.id)) is not None  # a comparison prim or exact comparison
    ):
        op = Relation(name)
        lhs, rhs = bsym.flat_args[0], bsym.flat_args[1]
        nan = next((side for side in (lhs, rhs) if is_nan(side)), None)
        if guard.op is Relation.EQ and op.ordered and nan is not None:
            # ``not (f > 0.5)`` with f NaN is not ``f <= 0.5``: guarded as ``f != f`` (f is NaN)
            return Guard(Relation.NE, nan, nan, guard.why, guard.where)
        guard = Guard(op if guard.op is Relation.NE else op.negated(), lhs, rhs, guard.why, guard.where)
    if not isinstance(guard.lhs, NumberProxy) and isinstance(guard.rhs, NumberProxy):
        guard = Guard(guard.op.swapped(), guard.rhs, guard.lhs, guard.why, guard.where)  # 1 <= i -> i >= 1
    elif (
        not guard.op.ordered
        and isinstance(guard.rhs, NumberProxy)
        and guard.rhs.name < guard.lhs.name
    ):
        guard = Guard(guard.op, guard.rhs, guard.lhs, guard.why, guard.where)  # one order for a == b and b == a
    return guard


def is_tautology(guard: Guard, sizes: set[str]) -> bool:
    """Holds for every call: ``x <= x``, or a tensor size compared with 0 the way sizes always are."""
    if guard.lhs is guard.rhs:
        # x == x does not hold for a float NaN: only integers compare reflexively for every call
        return guard.op.reflexive and isinstance(guard.lhs, IntegerProxy)
    size_lhs = isinstance(guard.lhs, NumberProxy) and guard.lhs.name in sizes
    size_rhs = isinstance(guard.rhs, NumberProxy) and guard.rhs.name in sizes
    zero = lambda x: type(x) is int and x == 0  # noqa: E731
    return (size_lhs and zero(guard.rhs) and guard.op is Relation.GE) or (size_rhs and zero(guard.lhs) and guard.op is Relation.LE)


@dataclass(frozen=True)
class ProgramScope:
    """What a program is written over and how its texts name things.

    ``leaves``: the leaf proxies in input order (an equality between two keeps the earlier);
    ``leaf_names``: how the guards name them when not by their own names (the grad transform's
    guards speak of the computation trace's names); ``reserved``: the prologue passes every leaf
    (the grad program's call was added before its guards were known), else the program takes the
    leaves its guards use; ``sizes``: guard names of the leaves that are tensor sizes (>= 0);
    ``names``: guard name -> display name (``T``, ``x.shape[0]``); ``suffix``: added to every
    text (``(grad transform)``); ``skip``: texts of guards another program checks already."""

    leaves: list
    sizes: frozenset
    names: dict
    leaf_names: list | None = None
    reserved: bool = False
    number_types: tuple = ()
    suffix: str = ""
    skip: frozenset = frozenset()

    def guard_names(self) -> list[str]:
        return self.leaf_names if self.leaf_names is not None else [p.name for p in self.leaves]

    def leaf_test(self) -> Callable[[NumberProxy], bool]:
        if self.leaf_names is None:
            return is_leaf  # an input number or size: the prologue can unpack it
        names = set(self.leaf_names)
        return lambda p: p.name in names


@dataclass
class BuiltProgram:
    """What :func:`build_program` made: the program (None: nothing to check), the texts explain
    shows, the plain texts of the guards it checks, and why every leaf must be pinned (None: no
    guard needs that)."""

    program: GuardProgram | None
    texts: list[str]
    checked_texts: frozenset
    pin_all: str | None


def build_program(
    program_id: str, collector: GuardCollector, producers: dict[str, Any], scope: ProgramScope,
    static_check: Callable[[NumberProxy], None] | None = None,
) -> BuiltProgram:
    """The collector's guards as one program over ``scope`` (steps 1-5 of the module's text).
    ``static_check(p)``: checks a static number's value in the prologue (the forward's; the grad
    transform runs after the prologue is built, where its guards' static leaves are inputs whose
    values thunder's prologue checks)."""
    from metatrace.guards.simplify import simplify  # looked up per call: tests spy on it

    projected = _project_guards(collector, producers, scope, static_check)
    guards = projected.guards
    order = scope.guard_names()
    try:
        if collector.inexact_float:
            # an integer beyond 2**53 was converted to float: the algebra's reading of float(n)
            # as n does not hold (metatrace.proxies.float_numbers.guard_exact_float)
            raise _AsRecorded()
        checked = simplify(guards, producers, order if scope.leaf_names is not None else scope.leaves,
                           scope.names, scope.sizes, is_leaf=scope.leaf_test())
        checked = [g for g in checked if g.text not in scope.skip]  # another program checks those
        texts = [_check_text(g, projected, scope) for g in checked]
        plain, simplified = frozenset(g.text for g in checked), True
    except Exception as e:  # not expected: the guards as recorded are as correct, only longer
        if not isinstance(e, _AsRecorded):
            logger.warning("guard simplification failed: checking the guards as recorded", exc_info=True)
        checked = guards
        texts = [CheckText(describe_guard(g, producers, scope.names) + scope.suffix, relation=g.op) for g in guards]
        plain, simplified = frozenset(), False
    if scope.reserved:
        leaves, leaf_names = scope.leaves, scope.leaf_names
    else:
        used = {name for g in checked for name in g.leaves} if simplified else set(projected.leaves)
        leaves, leaf_names = [p for n, p in projected.leaves.items() if n in used], None
    program = None
    if checked or scope.reserved:
        program = GuardProgram(program_id, checked, texts, leaves, producers, leaf_names=leaf_names,
                               number_types=scope.number_types)
    return BuiltProgram(program, texts, plain, projected.pin_all)


def pin_program(program_id: str, scope: ProgramScope, why: str) -> GuardProgram:
    """A program that accepts only the leaves' current values: for a guard no expression of the
    leaves states, where the prologue can no longer get constraints of its own (grad)."""
    reason = Reason(ReasonKind.PINNED, why)
    pins = [Guard(Relation.EQ, p, exact(p.value), reason) for p in scope.leaves]
    texts = [pin_text(scope.names.get(n, n), p, why) for n, p in zip(scope.guard_names(), scope.leaves)]
    return GuardProgram(program_id, pins, texts, scope.leaves, {})


def pin_text(name: str, leaf: NumberProxy, reason: str) -> CheckText:
    """``name == value (reason)``: a leaf pinned to its value."""
    return CheckText(f"{name} == {leaf.value!r} ({reason})", name, Relation.EQ, leaf.value, reason,
                     own_state=_own_state([leaf]))


def _check_text(guard, projected: _Projected, scope: ProgramScope) -> CheckText:
    """A simplified guard's text as explain shows it (with the program's suffix), its reason
    (:func:`_reason`), and what it checks."""
    reason = _reason(guard, projected.decided | projected.reasons, projected.excluded)
    text = (f"{guard.text} ({reason})" if reason else guard.text) + scope.suffix
    value = NO_VALUE if guard.value is None else guard.value
    leaves = [projected.leaves.get(name) for name in guard.leaves]
    return CheckText(text, guard.subject, guard.relation, value, reason or "", own_state=_own_state(leaves))


def _own_state(leaves: list) -> bool:
    """The leaves are all the jitted module's own state (read from ``self``)."""
    return bool(leaves) and all(p is not None and p.history is not None and provenance.reads_own_state(p.history)
                                for p in leaves)


def _reason(guard, reasons: dict[str, str], excluded: dict | None = None) -> str | None:
    """A pin (one input size or number equal to a constant) says what fixed it: the value baked
    in and the line that did (``k.shape[1] == 4 (float() at model.py:12 in forward)``). An
    exclusion (``B != 64``: one value, or one relation, that recompiles) says which check decided
    it (``B != 64 (checked at thunder/clang/__init__.py:123 in maybe_broadcast)``). A range or a
    pin that only branches decided reads as it is (None)."""
    is_pin = len(guard.leaves) == 1 and guard.relation is Relation.EQ
    reason = reasons.get(guard.leaves[0]) if is_pin else None
    if reason is None and guard.relation is Relation.NE and excluded:
        where = excluded.get(frozenset(guard.leaves))
        reason = f"checked at {where}" if where else None
    return reason


class _AsRecorded(Exception):
    """This entry's guards are checked as recorded (not simplified)."""


@dataclass
class _Projected:
    """The collector's guards that the program checks, projected onto the leaves."""

    guards: list = field(default_factory=list)
    leaves: dict = field(default_factory=dict)  # leaf name -> proxy, in first-use order
    reasons: dict = field(default_factory=dict)  # leaf name -> what first baked in a value computed from it
    decided: dict = field(default_factory=dict)  # leaf name -> the first branch or check that read it
    excluded: dict = field(default_factory=dict)  # leaf names of a != guard -> the line that decided it
    pin_all: str | None = None  # why every leaf is pinned (a guard no leaf expression can state)


def _project_guards(collector: GuardCollector, producers: dict, scope: ProgramScope, static_check) -> _Projected:
    """Steps 1-3: normalizes, deduplicates and projects the collector's guards."""
    out = _Projected()
    leaf_test = scope.leaf_test()
    seen = set()
    for guard in collector.guards:
        guard = normalize(guard, producers)
        if is_tautology(guard, scope.sizes) or guard.key() in seen:
            continue
        seen.add(guard.key())
        try:
            _, guard_leaves = project([guard.lhs, guard.rhs], producers, is_leaf=leaf_test)
        except Unprojectable as e:
            logger.debug("cannot project %s %s %s (%s): %s", guard.lhs, guard.op, guard.rhs, guard.why, e)
            if guard.why.kind is ReasonKind.FLOAT_RANGE:
                # float(n) of a number no guard can express: no simplified guard relies on it
                seen.discard(guard.key())  # a decision with the same relation is still checked
                continue
            out.pin_all = out.pin_all or (f"{e} at {guard.where}" if guard.where else str(e))
            continue
        if all(p.is_static_constrained() for p in guard_leaves):
            # Constants, or static numbers (a module's configuration): checked by value, or
            # ``model.eval()`` would reuse the training entry.
            if static_check is not None:
                for p in guard_leaves:
                    static_check(p)
            continue
        _note_reasons(out, guard, guard_leaves)
        out.guards.append(guard)
    return out


def _note_reasons(out: _Projected, guard: Guard, guard_leaves: list) -> None:
    """What explain says next to a pin or an exclusion of these leaves (:func:`_with_reason`)."""
    site = f" at {guard.where}" if guard.where else ""
    for p in guard_leaves:
        out.leaves.setdefault(p.name, p)
        if guard.why.kind is ReasonKind.NAMED:  # a reason explain names over any other (einsum's order, ...)
            out.reasons[p.name] = guard.why.text + site
        elif guard.why.kind is not ReasonKind.BRANCH and guard.op is Relation.EQ:  # a value baked in
            out.reasons.setdefault(p.name, guard.why.text + site)
        elif guard.where:
            out.decided.setdefault(p.name, f"checked at {guard.where}")
    if guard.op is Relation.NE and guard.where:
        out.excluded.setdefault(frozenset(p.name for p in guard_leaves), guard.where)


def input_size_names(inputs) -> frozenset:
    """Names of the inputs' tensor sizes (known >= 0)."""
    return frozenset(s.name for v in inputs if isinstance(p := getattr(v, "proxy", v), TensorProxy)
                     for s in p._shape if isinstance(s, NumberProxy))


def add_prologue_constraints(
    ctx, inputs, computation_trace, collector: GuardCollector, names: dict[str, str] | None = None,
    numbers: list = (),
) -> frozenset:
    """Turns the collector's guards into one prologue constraint, its texts kept for ``explain``
    on the program; returns the plain texts of the guards it checks (the grad program leaves
    those out). ``numbers``: (proxy, type) of the number arguments
    (:func:`metatrace.guards.structure.add_structure_constraints`), whose types the program
    checks before its guards."""
    from thunder.clang import check_number_type_and_value

    input_names = {getattr(v, "proxy", v).name for v in inputs}
    value_checked: set[str] = set()

    def static_check(p: NumberProxy) -> None:
        # thunder's prologue checks a static number only when the computation takes it as an
        # input: one that only decided a branch (``if self.training``) is checked here, by value
        if p.name not in input_names and p.name not in value_checked and p.history is not None:
            value_checked.add(p.name)
            ctx.add_constraint((check_number_type_and_value, p, p.value))

    scope = ProgramScope(input_sizes_and_numbers(inputs), input_size_names(inputs), names or {},
                         number_types=tuple(t for _, t in numbers))
    built = build_program(new_id("g"), collector, producer_map(computation_trace, collector), scope, static_check)
    if built.program is not None:
        PROGRAMS[built.program.program_id] = built.program
        ctx.add_constraint((ProgramConstraint(built.program.program_id), *built.program.leaves,
                            *(p for p, _ in numbers)))
    elif numbers:
        add_number_type_constraint(ctx, numbers)
    if built.pin_all is not None:
        # A value we cannot express in terms of the inputs was baked in: only the exact same
        # inputs may reuse this entry.
        for p in scope.leaves:
            ctx.add_constraint((check_number_type_and_value, p, p.value))
            built.texts.append(pin_text(scope.names.get(p.name, p.name), p, f"pinned: {built.pin_all}"))
    return built.checked_texts
