"""The number-op table (metatrace.metas.number_ops) against thunder and against Python.

Every row names a thunder symbol whose id is the row's, and computes what the Python it prints
as computes: the row's callable and ``eval`` of its printed text give the same value (or raise
the same exception) on negatives, zero, floats and bools.
"""

from __future__ import annotations

import itertools

import pytest

import thunder.core.dtypes as dtypes
import thunder.core.prims as prims

from metatrace.metas import number_ops, record_state
from metatrace.metas.number_ops import ROWS, NumberOp


def _row_id(row: NumberOp) -> str:
    return row.name or row.op


_VALUES = (-7, -2, 0, 3, 2.5, -1.5, 0.0, True)
# Arguments per arity; rows whose arguments are not all numbers have their own.
_BY_ARITY = {
    1: [(x,) for x in (*_VALUES, 1e300, -0.0)],
    2: list(itertools.product(_VALUES, repeat=2)),
    3: list(itertools.product((True, False, 0, 1), (-2, 0.5), (3, -1.5))),
}
_SAMPLES = {
    "convert_element_type": [
        (x, t) for x in (-7, 0, 2.5, -1.5, True) for t in (int, float, bool, dtypes.int64, dtypes.float32, dtypes.bool8)
    ],
    "metatrace_py_round_digits": [(x, n) for x in (-7, 0, 2.5, -1.5, 1234.5678) for n in (0, 1, -1, 2)],
}


def _samples(row: NumberOp) -> list[tuple]:
    return _SAMPLES.get(row.name) or _BY_ARITY[row.arity]


def printed(row: NumberOp, names: list[str]) -> str:
    """The row's Python spelling applied to argument names: ``a0 // a1``, ``_math.ceil(a0)``."""
    spelling = row.python
    if "{" in spelling:
        return spelling.format(*names)
    if not (spelling[0].isalpha() or spelling[0] == "_"):  # an operator
        return f"{spelling}{names[0]}" if len(names) == 1 else f"{names[0]} {spelling} {names[1]}"
    return f"{spelling}({', '.join(names)})"


def _outcome(fn, args) -> tuple:
    try:
        value = fn(*args)
    except Exception as e:
        return ("raises", type(e))
    return ("value", type(value), value)


def _same(a: tuple, b: tuple) -> bool:
    if a[:2] != b[:2] or a[0] == "raises":
        return a[:2] == b[:2]
    x, y = a[2], b[2]
    return x == y or (x != x and y != y)


def _thunder_symbol(row: NumberOp):
    """The thunder symbol the row names: a prim, or the python-executor operator metatrace registers."""
    if row.name.startswith(number_ops.PY_OP_PREFIX):
        from thunder.executors.pythonex import ex

        return ex.opmap.get(row.name)
    return getattr(prims, row.name, None)


_NAMED = [row for row in ROWS if row.name]
_PRINTED = [row for row in ROWS if row.python is not None]
_REPLAYED = [row for row in ROWS if row.replay]


@pytest.mark.parametrize("row", _NAMED, ids=_row_id)
def test_row_names_a_thunder_symbol(row, enabled):
    assert _thunder_symbol(row) is not None


@pytest.mark.parametrize("row", _NAMED, ids=_row_id)
def test_row_id_is_its_symbols_id(row, enabled):
    assert _thunder_symbol(row).id == row.id


@pytest.mark.parametrize("row", [row for row in ROWS if row.impl], ids=_row_id)
def test_row_impl_runs_the_prim_in_the_python_executor(row, enabled):
    from thunder.executors.pythonex import ex

    assert ex.implmap[row.id].symbol.name == row.impl


@pytest.mark.parametrize("row", _PRINTED, ids=_row_id)
def test_row_evaluates_as_it_prints(row):
    text = printed(row, [f"a{i}" for i in range(row.arity)])
    code = compile(text, f"<{_row_id(row)}>", "eval")
    for args in _samples(row):
        namespace = {**number_ops.NAMESPACE, **{f"a{i}": a for i, a in enumerate(args)}}
        expected = _outcome(row.evaluate, args)
        got = _outcome(lambda *_: eval(code, namespace), args)
        assert _same(expected, got), f"{row.evaluate}{args} -> {expected}, but {text} -> {got}"


@pytest.mark.parametrize("row", _REPLAYED, ids=_row_id)
def test_replayable_row_is_an_operation_of_the_guard_algebra(row):
    assert number_ops.BY_OP.get(row.op) is row


@pytest.mark.parametrize("row", _REPLAYED, ids=_row_id)
def test_replayable_row_prints_as_python(row):
    assert row.python is not None


@pytest.mark.parametrize("row", [row for row in ROWS if row.compare], ids=_row_id)
def test_comparison_row_negation_is_the_negated_relation(row):
    negation = number_ops.BY_RELATION[row.negation]
    assert all(negation.evaluate(a, b) == (not row.evaluate(a, b)) for a, b in _BY_ARITY[2])


@pytest.mark.parametrize("row", [row for row in ROWS if row.compare], ids=_row_id)
def test_comparison_row_mirror_swaps_the_operands(row):
    mirror = number_ops.BY_RELATION[row.mirror]
    assert all(mirror.evaluate(b, a) == row.evaluate(a, b) for a, b in _BY_ARITY[2])


def test_rows_have_distinct_ids():
    ids = [row.id for row in ROWS if row.id is not None]
    assert len(ids) == len(set(ids))


def test_printed_text_of_a_binary_operator():
    assert printed(number_ops.BY_OP["//"], ["a", "b"]) == "a // b"


def test_printed_text_of_a_call():
    assert printed(number_ops.BY_OP["ceil"], ["a"]) == "_math.ceil(a)"


@pytest.mark.parametrize("row", [row for row in ROWS if row.divides], ids=_row_id)
def test_dividing_row_raises_on_a_zero_divisor(row):
    with pytest.raises((ZeroDivisionError, ValueError)):
        row.evaluate(1, 0)


@pytest.mark.parametrize("row", [row for row in ROWS if row.finite], ids=_row_id)
def test_finite_row_raises_on_an_infinite_float(row):
    with pytest.raises((OverflowError, ValueError)):
        row.evaluate(float("inf"), *([1.0] * (row.arity - 1)))


@pytest.mark.parametrize("row", [row for row in ROWS if row.boolean], ids=_row_id)
def test_boolean_row_computes_bools(row):
    values = [_outcome(row.evaluate, args) for args in _samples(row)]
    assert all(v[1] is bool for v in values if v[0] == "value")


def _emitted(row: NumberOp, negate_first: bool, args: tuple):
    """The guard emitter's Python for ``row`` over leaves (the first one negated if asked), evaluated."""
    from metatrace.guards.simplify.expressions import Node
    from metatrace.guards.simplify.rendering import render

    constants: list = []

    def constant(v) -> str:
        constants.append(v)
        return f"_c[{len(constants) - 1}]"

    operands = [Node("leaf", (f"a{i}", i), "other") for i in range(row.arity)]
    if row.op == "convert":
        operands[1] = Node("const", (args[1],), "other")
    if negate_first:
        operands[0] = Node("neg", (operands[0],), "other")
    text, _ = render(Node(row.op, tuple(operands), "other"), lambda name: name, constant, python=True)
    namespace = {**number_ops.NAMESPACE, "_c": constants, **{f"a{i}": a for i, a in enumerate(args)}}
    return eval(compile(text, "<emitted>", "eval"), namespace)


@pytest.mark.parametrize("negate_first", [False, True], ids=["plain", "negated operand"])
@pytest.mark.parametrize("row", [row for row in ROWS if row.op is not None and number_ops.BY_OP.get(row.op) is row],
                         ids=_row_id)
def test_guard_emitter_writes_row_as_it_evaluates(row, negate_first):
    """The one emitter of guard Python (rendering.render, python=True) on each operation of the guard
    algebra, parentheses included (``(-a0) ** a1``, not ``-a0 ** a1``)."""
    for args in _samples(row):
        expected_args = ((-args[0],) + args[1:]) if negate_first else args
        expected = _outcome(row.evaluate, expected_args)
        got = _outcome(lambda *_: _emitted(row, negate_first, args), args)
        assert _same(expected, got), f"{row.op}{expected_args} -> {expected}, emitted -> {got}"


@pytest.mark.parametrize("row", [row for row in ROWS if row.runtime_name], ids=_row_id)
def test_row_meta_operator_records_the_row_symbol(row):
    """The runtime function the rewritten metas call for the row records the row's symbol, with
    the row's value, on a symbolic operand."""
    from thunder.core.trace import TraceCtx, tracectx
    from thunder.core.proxies import IntegerProxy

    from metatrace.metas import runtime

    scope: list = []
    with tracectx(TraceCtx()):
        n = IntegerProxy(name="n", value=6)
        with record_state.recording_frame(record_state.RecordingFrame(scope)):
            out = getattr(runtime, row.runtime_name)(*(n, 4)[: row.arity])
    assert [(bsym.sym.id, bsym.output.value) for bsym in scope] == [(row.id, row.evaluate(*(6, 4)[: row.arity]))]
