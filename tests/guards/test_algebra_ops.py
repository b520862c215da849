"""The guard algebra's operations are typed (issue 39): :class:`Op` is built from the number-op
table (one member per ``number_ops.BY_OP`` row, plus the leaf and the constant), its members read
their behaviour off their rows, and every node the algebra builds carries members, whichever way
the operation's name came in."""

from __future__ import annotations

import pytest

from metatrace.guards.simplify.expressions import build, const
from metatrace.guards.simplify.polynomials import Node, Poly, patom
from metatrace.metas import number_ops
from metatrace.metas.algebra_ops import BOOLEAN, DIVIDING, FINITE, NumberKind, Op, check_against_table

X = patom(Node(Op.LEAF, ("x", 0), NumberKind.INT))
Y = patom(Node(Op.LEAF, ("y", 1), NumberKind.INT))
F = Node(Op.LEAF, ("f", 2), NumberKind.FLOAT)


def test_op_covers_the_tables_operations_exactly():
    assert {op.value for op in Op if not op.structural} == set(number_ops.BY_OP)


def test_the_structural_ops_are_the_leaf_and_the_constant():
    assert {op for op in Op if op.structural} == {Op.LEAF, Op.CONST}


def test_a_row_added_to_the_table_without_a_member_fails_the_check(monkeypatch):
    row = number_ops.BY_OP["max"]
    monkeypatch.setattr(number_ops, "BY_OP", {**number_ops.BY_OP, "hypot": row})
    with pytest.raises(TypeError, match="hypot"):
        check_against_table()


def test_a_member_whose_row_went_fails_the_check(monkeypatch):
    monkeypatch.setattr(number_ops, "BY_OP", {k: v for k, v in number_ops.BY_OP.items() if k != "fmod"})
    with pytest.raises(TypeError, match="fmod"):
        check_against_table()


@pytest.mark.parametrize("op", [op for op in Op if not op.structural], ids=lambda op: op.name)
def test_a_member_reads_its_row(op):
    row = number_ops.BY_OP[op.value]
    assert (op.row, op.divides, op.finite, op.boolean, op.relation) == (row, row.divides, row.finite, row.boolean,
                                                                       row.compare)


def test_the_sets_of_operations_are_read_off_the_table():
    assert (DIVIDING, FINITE) == ({Op.FLOORDIV, Op.MOD, Op.DIV, Op.FMOD}, {Op.INT, Op.CEIL, Op.FLOOR, Op.TRUNC, Op.FMOD})


def test_every_comparison_is_boolean():
    assert {op for op in Op if op.relation} <= BOOLEAN


def test_a_member_is_its_tables_name():
    """A member hashes and orders as its value: a node's key is what it was with strings."""
    assert (Op.FLOORDIV == "//", hash(Op.FLOORDIV) == hash("//"), NumberKind.INT == "int") == (True, True, True)


@pytest.mark.parametrize("name", ["leaf", Op.LEAF])
def test_a_node_carries_members_whichever_way_its_op_came_in(name):
    n = Node(name, ("z", 3), "int")
    assert (type(n.op), type(n.typ)) == (Op, NumberKind)


def test_a_nodes_key_is_the_one_its_strings_gave():
    assert Node(Op.MAX, (X, X), NumberKind.INT).key == (2, "max", (X.key, X.key))


def test_an_unknown_op_is_refused():
    with pytest.raises(KeyError):
        Node("hypot", (X, X), NumberKind.INT)


def _nodes(e):
    if isinstance(e, Poly):
        for m, _ in e.terms:
            for n in m:
                yield from _nodes(n)
        return
    yield e
    if not e.op.structural:
        for a in e.args:
            yield from _nodes(a)


@pytest.mark.parametrize("op", ["//", "max", "<", "convert", "fmod", "**"])
def test_build_normalizes_an_op_named_by_the_table(op):
    args = [F, const(int)] if op == "convert" else [X, F] if op == "fmod" else [X, Y]
    built = build(op, args)
    ops = {type(n.op) for e in (built.expr, *built.conditions) for n in _nodes(e)}
    assert ops == {Op}
