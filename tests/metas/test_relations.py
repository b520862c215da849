"""``metatrace.metas.relations.Relation``: the six relations of the number-op table, typed; each
member's evaluation, negation, swap and symbol against Python's operators on numbers."""

from __future__ import annotations

import itertools
import math
import operator

import pytest

from metatrace.metas import number_ops
from metatrace.metas.relations import Relation

PYTHON = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
NUMBERS = [-2, 0, 1, 3, 0.5, -math.inf, math.inf]
PAIRS = list(itertools.product(NUMBERS, NUMBERS))


def test_the_members_are_the_tables_relations():
    assert {r.value for r in Relation} == set(number_ops.BY_RELATION)


@pytest.mark.parametrize("rel", Relation)
def test_a_relation_is_its_name(rel):
    assert f"{rel}" == rel.value and rel == rel.value and hash(rel) == hash(rel.value)


@pytest.mark.parametrize("rel", Relation)
def test_evaluate_is_pythons_operator(rel):
    assert all(rel.evaluate(a, b) == PYTHON[rel.symbol](a, b) for a, b in PAIRS)


@pytest.mark.parametrize("rel", Relation)
def test_the_negation_holds_exactly_where_the_relation_does_not(rel):
    assert all(rel.negated().evaluate(a, b) is not rel.evaluate(a, b) for a, b in PAIRS)


@pytest.mark.parametrize("rel", Relation)
def test_the_swap_holds_with_the_operands_swapped(rel):
    assert all(rel.swapped().evaluate(b, a) == rel.evaluate(a, b) for a, b in PAIRS)


@pytest.mark.parametrize("rel", Relation)
def test_a_symbol_names_its_relation(rel):
    assert Relation.of_symbol(rel.symbol) is rel


@pytest.mark.parametrize("rel", Relation)
def test_reflexive_relations_hold_between_a_number_and_itself(rel):
    assert rel.reflexive == rel.evaluate(3, 3)


@pytest.mark.parametrize("rel", Relation)
def test_ordered_relations_are_not_equalities(rel):
    assert rel.ordered == (rel.symbol not in ("==", "!="))
