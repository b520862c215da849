"""The guard algebra's integer ring and its pure operations: ``+ - * // %`` on polynomials agree
with Python's ints at every value of the leaves, and :func:`build` returns what an operation needs
not to raise beside its expression instead of recording it anywhere."""

from __future__ import annotations

import itertools
import operator

import pytest

from metatrace.guards.simplify.expressions import Built, build, const
from metatrace.guards.simplify.polynomials import ONE, ZERO, Node, Poly, patom, pconst
from metatrace.guards.simplify.traversal import substitute

X = patom(Node("leaf", ("x", 0), "int"))
Y = patom(Node("leaf", ("y", 1), "int"))
F = Node("leaf", ("f", 2), "float")
VALUES = [-7, -3, -1, 0, 1, 2, 5, 12]
# Polynomials and nodes under them: a product, a constant term, a division node.
POLYS = [X, Y, X * Y + 3, X - 2 * Y, X * X - 1, X // 3 + Y, ZERO, pconst(-4)]


def _value(p: Poly, x: int, y: int) -> int:
    """``p`` at x, y (the leaves substituted, folded to a constant)."""
    out = substitute(p, {"x": pconst(x), "y": pconst(y)})
    assert out.is_const()
    return out.const


@pytest.mark.parametrize("op", [operator.add, operator.sub, operator.mul], ids=["+", "-", "*"])
def test_ring_operations_agree_with_ints(op):
    for a, b in itertools.product(POLYS, POLYS):
        result = op(a, b)
        assert all(_value(result, x, y) == op(_value(a, x, y), _value(b, x, y))
                   for x, y in itertools.product(VALUES, VALUES)), (a, b)


@pytest.mark.parametrize("op", [operator.floordiv, operator.mod], ids=["//", "%"])
@pytest.mark.parametrize("divisor", [3, -2, 1, 7])
def test_division_by_a_constant_agrees_with_ints(op, divisor):
    for a in POLYS:
        result = op(a, divisor)
        assert all(_value(result, x, y) == op(_value(a, x, y), divisor)
                   for x, y in itertools.product(VALUES, VALUES)), a


def test_negation_and_scaling_agree_with_ints():
    for a, k in itertools.product(POLYS, [-3, 0, 2]):
        assert all(_value(-a, x, y) == -_value(a, x, y) and _value(a * k, x, y) == k * _value(a, x, y)
                   for x, y in itertools.product(VALUES, VALUES)), (a, k)


def test_an_int_operand_is_a_constant():
    assert (X + 2, 2 + X, X - 2, 2 - X, X * 2) == (X + pconst(2), pconst(2) + X, X - pconst(2), pconst(2) - X, X * pconst(2))


def test_an_operand_outside_the_ring_is_refused():
    with pytest.raises(TypeError):
        X + F  # noqa: B018


def test_sign_fixed_trunc_division_folds_to_floor_division():
    """thunder's int floor division, trunc division minus its sign fix, reads as ``x // y``."""
    trunc = build("div", [X, Y]).expr
    fmod = build("fmod", [X, Y]).expr
    fix = build("&", [build("!=", [build("signbit", [X]).expr, build("signbit", [Y]).expr]).expr,
                      build("!=", [build("int", [fmod]).expr, ZERO]).expr]).expr
    assert trunc - fix == build("//", [X, Y]).expr


def test_a_division_folded_away_keeps_its_divisor_as_a_condition():
    assert build("//", [X, X]) == Built(ONE, (X,))


def test_a_condition_of_an_inner_operation_comes_with_the_outer_result():
    """``int(f)`` of a float needs ``isfinite(f)``, also built as ``convert(f, int)``."""
    built = build("convert", [F, const(int)])
    assert built.conditions == (build("isfinite", [F]).expr,)


def test_building_records_nothing_between_calls():
    first = build("%", [Y, X])
    assert build("+", [X, Y]).conditions == () and build("%", [Y, X]) == first


def test_a_constant_divisor_needs_no_condition():
    assert build("//", [X, pconst(4)]).conditions == ()
