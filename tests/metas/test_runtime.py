"""The runtime on symbolic numbers: what is recorded, what is folded, what is reported."""

from __future__ import annotations

import pytest

import thunder.core.prims as prims
from thunder.core.proxies import IntegerProxy

import metatrace.metas.runtime as rt
import metatrace.metas.record_state as record_state
from metatrace.state import compile_context
from metatrace.metas import concretizations
from metatrace.guards.collect import GuardCollector
from metatrace.metas.concretizations import ReasonKind
from prim_samples import direct_call_context, n

BAKED_IN = ReasonKind.BAKED_IN


@pytest.fixture
def recorder():
    """A live recorder (as while a rewritten meta runs) and a guard collector."""
    with direct_call_context():
        scope: list = []
        collector = GuardCollector()
        with compile_context.collecting(collector), record_state.recording_frame(record_state.RecordingFrame(scope)):
            yield scope, collector


def _ops(scope):
    return [(b.sym.id, [getattr(a, "name", a) for a in b.args]) for b in scope]


def test_plain_numbers_compute_directly_and_record_nothing(recorder):
    scope, collector = recorder
    assert rt.floordiv(rt.sub(rt.add(9, 2), 1), 2) == 5
    assert rt.max_([3, 7, 5]) == 7 and rt.truth(rt.lt(1, 2)) is True
    assert scope == [] and collector.guards == []


def test_identities_and_constant_offsets_fold(recorder):
    scope, _ = recorder
    i = n(5)
    assert rt.sub(i, 0) is i and rt.mul(i, 1) is i and rt.floordiv(i, 1) is i and rt.add(0, i) is i
    assert rt.sub(rt.add(i, 1), 1) is i  # (i + 1) - 1
    three = rt.add(rt.add(i, 1), 2)  # (i + 1) + 2 records i + 3 once more
    assert three.value == 8 and _ops(scope)[-1] == (prims.PrimIDs.ADD, [i.name, 3])
    minus = rt.sub(i, 2)
    assert minus.value == 3 and _ops(scope)[-1] == (prims.PrimIDs.SUB, [i.name, 2])


def test_symbolic_arithmetic_is_recorded_with_values(recorder):
    scope, _ = recorder
    i, j = n(7), n(3)
    q, r = rt.divmod_(i, j)
    m = rt.max_(i, j, 4)
    assert (q.value, r.value, m.value) == (2, 1, 7)
    assert [op for op, _ in _ops(scope)] == [
        prims.PrimIDs.PY_FLOORDIV, prims.PrimIDs.REMAINDER, prims.PrimIDs.MAXIMUM, prims.PrimIDs.MAXIMUM
    ]
    assert isinstance(rt.prod_([i, j]), IntegerProxy) and rt.prod_([i, j]).value == 21


def test_comparisons_report_the_relation_their_branch_decided(recorder):
    _, collector = recorder
    i, j = n(2), n(5)
    assert rt.truth(rt.lt(i, j)) is True
    assert rt.truth(rt.ge(i, 4)) is False  # reported as its negation: i < 4
    assert rt.truth(rt.le(i, i)) is True  # reflexive: nothing to guard
    assert [(g.op, g.lhs.name, getattr(g.rhs, "name", g.rhs)) for g in collector.guards] == [
        ("lt", i.name, j.name), ("lt", i.name, 4)
    ]


def test_concretizations_report_the_value_baked_in(recorder):
    _, collector = recorder
    d = n(1)
    assert [10, 20, 30][rt.index(d)] == 20
    assert list(rt.range_(n(3))) == [0, 1, 2]
    assert rt.int_(n(4)) == 4 and rt.sorted_([n(2), 1]) == [1, 2]
    assert [(g.op, g.rhs, g.why.kind, g.why.text) for g in collector.guards] == [
        ("eq", 1, BAKED_IN, "index"), ("eq", 3, BAKED_IN, "index"), ("eq", 4, BAKED_IN, "int()"),
        ("eq", 2, BAKED_IN, "sorted()"),
    ]


def test_contains_compares_symbolic_elements(recorder):
    _, collector = recorder
    d = n(2)
    assert rt.contains((0, d), 2) is True and rt.not_contains((0, 1), d) is True
    assert len(collector.guards) >= 2


def test_an_operand_settled_without_a_guard_decides_an_or_alone(recorder):
    _, collector = recorder
    i, j = n(4), n(1)
    assert rt.settled_first(True, rt.eq(i, j), lambda: rt.eq(2, 2)) is True  # cat: sd == sad or d == dim
    assert rt.settled_first(False, rt.lt(i, j), lambda: rt.eq(0, 1)) is False
    assert collector.guards == []


def test_settled_first_guards_what_python_decides_where_nothing_settles_it(recorder):
    _, collector = recorder
    i, j = n(4), n(1)
    assert rt.settled_first(True, rt.eq(i, j), lambda: rt.eq(1, 2)) is False
    assert rt.settled_first(True, rt.eq(1, 2), lambda: rt.gt(i, j)) is True
    assert [(g.op, g.lhs.name, g.rhs.name) for g in collector.guards] == [("ne", i.name, j.name), ("gt", i.name, j.name)]


def test_a_right_operand_that_needs_a_guard_is_not_taken_early(recorder):
    # comparing two shapes compares sizes and reports those relations: the early look must not
    # keep them, nor take the answer they give (Python's order decides, guards and all)
    _, collector = recorder
    i, j, k, m = n(4), n(1), n(3), n(3)
    assert rt.settled_first(True, rt.eq(i, j), lambda: rt.truth(rt.eq(k, m))) is True
    assert [(g.op, g.lhs.name, g.rhs.name) for g in collector.guards] == [("ne", i.name, j.name), ("eq", k.name, m.name)]


def test_settled_first_raises_where_python_evaluates_the_right_operand():
    assert rt.settled_first(True, True, lambda: 1 / 0) is True
    with pytest.raises(ZeroDivisionError):
        rt.settled_first(True, False, lambda: 1 / 0)


def test_and_or_keep_python_semantics():
    assert rt.or_(None, lambda: ()) == () and rt.and_([], lambda: 1 / 0) == []
    assert rt.compare_chain(0, "le", lambda: 2, "lt", lambda: 3) is True
    assert rt.compare_chain(5, "lt", lambda: 2, "lt", lambda: 1 / 0) is False


def test_bitwise_and_or_are_not_the_boolean_ones():
    """``a & b`` in a meta is emitted as ``_mt.bitand``; ``a and b`` as ``_mt.and_(a, thunk)``."""
    assert rt.bitand(6, 3) == 2


def test_bitwise_or_unions_sets():
    assert rt.bitor({1}, {2}) == {1, 2}


def test_augmented_bitwise_and_mutates_sets_in_place():
    s = {1, 2}
    assert rt.iop("bitand", s, {2}) is s


# An identity folds for an integer symbol and an integer literal only: Python's result type and
# a float's signed zero must come out as eager computes them.
_TYPE_CHANGING = [
    ("i * 1.0", lambda i: rt.mul(i, 1.0), 5 * 1.0),
    ("1.0 * i", lambda i: rt.mul(1.0, i), 1.0 * 5),
    ("i + 0.0", lambda i: rt.add(i, 0.0), 5 + 0.0),
    ("i - 0.0", lambda i: rt.sub(i, 0.0), 5 - 0.0),
    ("i // 1.0", lambda i: rt.floordiv(i, 1.0), 5 // 1.0),
]


@pytest.mark.parametrize("case", _TYPE_CHANGING, ids=[c[0] for c in _TYPE_CHANGING])
def test_a_float_literal_identity_keeps_pythons_float_result(recorder, case):
    _, op, expected = case
    out = op(n(5))
    assert (out.python_type, out.value) == (type(expected), expected)


@pytest.mark.parametrize("op", [lambda f: rt.add(f, 0), lambda f: rt.add(0, f), lambda f: rt.sub(f, -0.0)],
                         ids=["f + 0", "0 + f", "f - (-0.0)"])
def test_a_negative_zero_float_plus_zero_is_positive_zero(recorder, op):
    import math

    from thunder.core.proxies import FloatProxy

    out = op(FloatProxy(name="f", value=-0.0))
    assert math.copysign(1.0, out.value) == 1.0
