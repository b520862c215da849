"""The contract between the rewrites and the runtime.

The rewrites (``rewrites/*.py``) emit calls ``_mt.<name>(...)`` by string; the runtime
(``metatrace/metas/runtime.py``) defines the functions. Nothing but these tests ties the two together:

- every name the rewrites can emit (their tables, and every literal name passed to
  ``runtime_call``/``runtime_attr``/``is_runtime_call``) is a callable of the runtime, taking the
  number of arguments the rewrite passes;
- on plain (non-proxy) values, code rewritten by the whole pipeline computes what the original
  Python computes, operator by operator, on ints, floats, bools and sets (where the operator
  applies; where Python raises, the rewritten code raises the same exception type), with no
  recorder active and with one active (a meta running during a trace, on plain numbers).

Each operator table of the rewrites must be covered by the semantic tables here: a new row
without a semantic test fails ``test_every_*_operator_is_checked``.
"""

from __future__ import annotations

import ast
import copy
import inspect
import itertools
import math
import textwrap
import types
from pathlib import Path

import libcst as cst
import pytest

import metatrace.metas.runtime as runtime
import metatrace.metas.record_state as record_state
import rewrites
from rewrites.arithmetic import AUGMENTED_OPS, BINARY_OPS, UNARY_OPS
from rewrites.builtin_calls import BUILTIN_CALLS
from rewrites.checks import CheckCallTransformer
from rewrites.comparisons import COMPARISON_OPS, IDENTITY_OPS
from rewrites.concretize import CONCRETIZING_CALLS
from rewrites.pipeline import rewrite_source

INTS = [-7, -1, 0, 1, 2, 5]
FLOATS = [-2.5, 0.0, 0.5, 3.0, math.inf]
BOOLS = [False, True]
SETS = [set(), {1}, {1, 2}, {2, 3}]
NUMBERS = INTS + FLOATS + BOOLS
# Pairs of operands: every pair of numbers (mixed types included), every pair of sets.
PAIRS = list(itertools.product(NUMBERS, NUMBERS)) + list(itertools.product(SETS, SETS))
SINGLES = NUMBERS + SETS


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------


@pytest.fixture(params=["no recorder", "recorder active"])
def recording(request):
    """Runs a test without a recorder (plain Python use of a meta) and with one (a meta running
    during a trace on plain numbers): the runtime must be transparent in both. Yields the scope."""
    if request.param == "no recorder":
        yield None
        return
    scope: list = []
    with record_state.recording_frame(record_state.RecordingFrame(scope)):
        yield scope


def _compile(source: str, namespace: dict) -> types.FunctionType:
    exec(compile(source, "<contract>", "exec"), namespace)
    return namespace["f"]


def original_and_rewritten(source: str) -> tuple[types.FunctionType, types.FunctionType, str]:
    """``f`` from ``source`` as written and as rewritten by the whole pipeline (``_mt`` = runtime)."""
    source = textwrap.dedent(source)
    rewritten = rewrite_source(source)
    return _compile(source, {}), _compile(rewritten, {"_mt": runtime}), rewritten


def outcome(fn, args: tuple):
    """("ok", result) or ("raises", exception type); each call gets its own copy of the arguments."""
    try:
        return ("ok", fn(*copy.deepcopy(args)))
    except Exception as e:  # noqa: BLE001 - the exception type is the outcome
        return ("raises", type(e))


def same_value(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    return a == b


def mismatches(source: str, samples) -> list:
    """(arguments, Python's outcome, the rewritten code's outcome) wherever they differ."""
    original, rewritten, _ = original_and_rewritten(source)
    out = []
    for args in samples:
        expected, got = outcome(original, args), outcome(rewritten, args)
        ok = expected[0] == got[0] and (
            expected[1] is got[1] if expected[0] == "raises" else same_value(expected[1], got[1])
        )
        if not ok:
            out.append((args, expected, got))
    return out


def _operator_type(expression: str, kind: type) -> type:
    """The libcst operator node type of the (single) operator in ``expression``."""
    if kind is cst.AugAssign:
        return type(cst.parse_statement(expression).body[0].operator)
    node = cst.parse_expression(expression)
    return type(node.comparisons[0].operator if kind is cst.Comparison else node.operator)


# ---------------------------------------------------------------------------------------------
# Every emitted name exists, with the arity the rewrite uses
# ---------------------------------------------------------------------------------------------

_CALL_BUILDERS = {"runtime_call": 0, "runtime_attr": 0, "is_runtime_call": 1}  # builder -> index of the name


def literal_runtime_names() -> set[str]:
    """Names passed to the runtime-call builders anywhere in ``rewrites/``: string literals, and
    the strings a function assigns to the variable it passes (``name = "and_" if ... else "or_"``)."""
    names = set()
    for path in Path(rewrites.__file__).parent.glob("*.py"):
        for function in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(function, (ast.FunctionDef, ast.Module)):
                continue
            for node in ast.walk(function):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _CALL_BUILDERS):
                    continue
                position = _CALL_BUILDERS[node.func.id]
                if len(node.args) <= position:
                    continue
                arg = node.args[position]
                if isinstance(arg, ast.Constant):
                    names.add(arg.value)
                elif isinstance(arg, ast.Name):
                    for assign in ast.walk(function):
                        if isinstance(assign, ast.Assign) and any(
                            isinstance(t, ast.Name) and t.id == arg.id for t in assign.targets
                        ):
                            names |= {c.value for c in ast.walk(assign.value)
                                      if isinstance(c, ast.Constant) and isinstance(c.value, str)}
    return names


def table_runtime_names() -> set[str]:
    names = set(BINARY_OPS.values()) | set(UNARY_OPS.values()) | set(BUILTIN_CALLS.values())
    names |= set(CONCRETIZING_CALLS.values()) | set(CheckCallTransformer.TABLE.values())
    names |= {name for op, name in COMPARISON_OPS.items() if op not in IDENTITY_OPS and " " not in name and name != "in"}
    return names


def test_literal_names_are_found():
    # the scan must see the builders' calls at all (iop, truth, contains are emitted by literal)
    assert {"iop", "truth", "contains", "not_contains", "compare_chain", "and_", "or_", "not_", "index"} <= literal_runtime_names()


@pytest.mark.parametrize("name", sorted(literal_runtime_names() | table_runtime_names()))
def test_emitted_name_is_a_runtime_function(name):
    assert callable(getattr(runtime, name, None)), f"the rewrites emit _mt.{name}, which metatrace.metas.runtime lacks"


def _accepts(fn, n: int) -> bool:
    try:
        inspect.signature(fn).bind(*range(n))
    except TypeError:
        return False
    return True


@pytest.mark.parametrize("name", sorted(set(BINARY_OPS.values())))
def test_binary_operator_takes_two_arguments(name):
    assert _accepts(getattr(runtime, name), 2)


@pytest.mark.parametrize("name", sorted(set(UNARY_OPS.values()) | {"not_", "truth", "index", "value_of"}))
def test_unary_function_takes_one_argument(name):
    assert _accepts(getattr(runtime, name), 1)


@pytest.mark.parametrize("name", sorted({n for op, n in COMPARISON_OPS.items() if op not in IDENTITY_OPS and " " not in n and n != "in"}))
def test_comparison_takes_two_arguments(name):
    assert _accepts(getattr(runtime, name), 2)


@pytest.mark.parametrize("name", ["contains", "not_contains", "and_", "or_"])
def test_two_argument_helpers(name):
    assert _accepts(getattr(runtime, name), 2)


def test_settled_first_takes_the_settling_value_an_operand_and_a_thunk():
    assert _accepts(runtime.settled_first, 3)


def test_iop_takes_name_and_two_operands():
    assert _accepts(runtime.iop, 3)


# ---------------------------------------------------------------------------------------------
# Semantics on plain values, through the whole rewrite pipeline
# ---------------------------------------------------------------------------------------------

BINARY = ["+", "-", "*", "/", "//", "%", "**", "&", "|", "^", "<<", ">>"]
UNARY = ["-", "+", "~"]
COMPARISONS = ["==", "!=", "<", "<=", ">", ">="]


def test_every_binary_operator_is_checked():
    assert {_operator_type(f"a {op} b", cst.BinaryOperation) for op in BINARY} == set(BINARY_OPS)


def test_every_augmented_operator_is_checked():
    assert {_operator_type(f"a {op}= b", cst.AugAssign) for op in BINARY} == set(AUGMENTED_OPS)


def test_every_unary_operator_is_checked():
    assert {_operator_type(f"{op}a", cst.UnaryOperation) for op in UNARY} == set(UNARY_OPS)


def test_every_comparison_is_checked():
    checked = {_operator_type(f"a {op} b", cst.Comparison) for op in COMPARISONS + ["in", "not in", "is", "is not"]}
    assert checked == set(COMPARISON_OPS)


@pytest.mark.parametrize("op", BINARY)
def test_binary_operator_is_routed_through_the_runtime(op):
    _, _, rewritten = original_and_rewritten(f"def f(a, b):\n    return a {op} b\n")
    assert f"_mt.{BINARY_OPS[_operator_type(f'a {op} b', cst.BinaryOperation)]}(a, b)" in rewritten


@pytest.mark.parametrize("op", BINARY)
def test_binary_operator_computes_what_python_computes(op, recording):
    assert mismatches(f"def f(a, b):\n    return a {op} b\n", PAIRS) == []


@pytest.mark.parametrize("op", BINARY)
def test_augmented_operator_computes_what_python_computes(op, recording):
    # ``alias is a`` afterwards: sets are mutated in place by |=, &=, ^=, -=; numbers rebind.
    source = f"def f(a, b):\n    alias = a\n    a {op}= b\n    return a, alias is a\n"
    assert mismatches(source, PAIRS) == []


@pytest.mark.parametrize("op", UNARY + ["not "])
def test_unary_operator_computes_what_python_computes(op, recording):
    assert mismatches(f"def f(a):\n    return {op}a\n", [(x,) for x in SINGLES]) == []


@pytest.mark.parametrize("op", COMPARISONS)
def test_comparison_computes_what_python_computes(op, recording):
    assert mismatches(f"def f(a, b):\n    return a {op} b\n", PAIRS) == []


@pytest.mark.parametrize("op", COMPARISONS)
def test_comparison_chain_computes_what_python_computes(op, recording):
    triples = list(itertools.product([0, 1, 2.5], repeat=3))
    assert mismatches(f"def f(a, b, c):\n    return a {op} b < c, a <= b {op} c\n", triples) == []


@pytest.mark.parametrize("op", ["in", "not in"])
def test_membership_computes_what_python_computes(op, recording):
    containers = SETS + [(), (1, 2.5), [0, True], frozenset({-1, 5}), {1: "a"}, "ab"]
    samples = [(x, c) for x in SINGLES + ["a"] for c in containers]
    assert mismatches(f"def f(a, b):\n    return a {op} b\n", samples) == []


@pytest.mark.parametrize("op", ["and", "or"])
def test_boolean_operator_returns_the_operand_python_returns(op, recording):
    samples = list(itertools.product(SINGLES + [None, (), "x"], [0, 2.5, {1}, None]))
    assert mismatches(f"def f(a, b):\n    return a {op} b\n", samples) == []


@pytest.mark.parametrize("op", ["and", "or"])
def test_boolean_operator_evaluates_its_right_operand_only_when_python_does(op, recording):
    # 1 // 0 raises exactly where Python evaluates the right operand
    assert mismatches(f"def f(a):\n    return a {op} 1 // 0\n", [(x,) for x in SINGLES]) == []


@pytest.mark.parametrize("op", ["and", "or"])
def test_a_condition_of_two_comparisons_decides_what_python_decides(op, recording):
    samples = list(itertools.product(NUMBERS, [0, 1, 2.5]))
    assert mismatches(f"def f(a, b):\n    return 1 if a < b {op} b == 1 else 0\n", samples) == []
    assert "settled_first" in original_and_rewritten(f"def f(a, b):\n    return 1 if a < b {op} b == 1 else 0\n")[2]


# Calls the renamer tables rewrite, and the concretizing reads: (parameters, expression, arguments to try).
BUILTIN_EXPRESSIONS = [
    ("a, b", "max(a, b)", [(a, b) for a, b in PAIRS]),
    ("a, b", "min(a, b)", [(a, b) for a, b in PAIRS]),
    ("a, b", "max(a, b, 1)", [(a, b) for a, b in itertools.product(NUMBERS, NUMBERS)]),
    ("xs", "max(xs)", [(xs,) for xs in ([], [3], [1, 5.5, -2], (True, 0), {2, 7})]),
    ("xs", "min(xs)", [(xs,) for xs in ([], [3], [1, 5.5, -2], (True, 0), {2, 7})]),
    ("xs", "max(xs, default=None)", [(xs,) for xs in ([], [4, 2])]),
    ("xs", "min((x for x in xs), default=-1)", [(xs,) for xs in ([], [4, 2])]),
    ("xs", "max(xs, key=abs)", [([-5, 3, 4],)]),
    ("a", "abs(a)", [(x,) for x in SINGLES]),
    ("xs", "sum(xs)", [(xs,) for xs in ([], [1, 2.5], (True, True), [{1}])]),
    ("xs", "sum(xs, 10)", [(xs,) for xs in ([], [1, 2.5])]),
    ("a, b", "divmod(a, b)", [(a, b) for a, b in PAIRS]),
    ("xs", "functools.reduce(operator.mul, xs, 1)", [(xs,) for xs in ([], [2, 3.5], [True, 4])]),
    ("xs", "functools.reduce(operator.add, xs)", [(xs,) for xs in ([], [2, 3.5], [[1], [2]])]),
    ("xs", "functools.reduce(max, xs)", [(xs,) for xs in ([3], [2, 9, 4])]),
    ("xs", "math.prod(xs)", [(xs,) for xs in ([], [2, 3.5], (True, 4))]),
    ("xs", "math.prod(xs, start=2)", [(xs,) for xs in ([], [2, 3])]),
    ("a", "math.ceil(a)", [(x,) for x in SINGLES]),
    ("a", "math.floor(a)", [(x,) for x in SINGLES]),
    ("a", "math.trunc(a)", [(x,) for x in SINGLES]),
    ("a", "int(a)", [(x,) for x in SINGLES + ["12"]]),
    ("a", "int(a, 8)", [("17",), (5,)]),
    ("", "int()", [()]),
    ("a", "float(a)", [(x,) for x in SINGLES + ["2.5"]]),
    ("a", "bool(a)", [(x,) for x in SINGLES + [None, ""]]),
    ("a", "list(range(a))", [(x,) for x in SINGLES]),
    ("a, b", "list(range(a, b, 2))", [(a, b) for a, b in PAIRS]),
    ("xs", "set(xs)", [(xs,) for xs in ([], [1, 1.0, True, 2], "aba")]),
    ("xs", "frozenset(xs)", [(xs,) for xs in ([], [3, 2, 3])]),
    ("xs", "sorted(xs)", [(xs,) for xs in ([], [3, -1.5, True], {5, 1}, [{1}, 2])]),
    ("xs", "sorted(xs, key=abs, reverse=True)", [([-3, 2, -1],)]),
    ("a", "hash(a)", [(x,) for x in SINGLES]),
    ("a", "round(a)", [(x,) for x in SINGLES]),
    ("a", "round(a, 1)", [(x,) for x in NUMBERS]),
    ("a", "pyval(a)", [(x,) for x in NUMBERS]),
    ("a", "a.value", [(types.SimpleNamespace(value=3),), (types.SimpleNamespace(value={1}),)]),
    ("xs, a", "xs[a]", [([10, 20, 30], x) for x in INTS + BOOLS + [0.5]]),
    ("xs, a, b", "xs[a:b]", [([10, 20, 30, 40], a, b) for a, b in itertools.product(INTS + [None], INTS + [None])]),
]


def _builtin_source(params: str, expression: str) -> str:
    return (
        "import functools, math, operator\nfrom thunder.core.proxies import pyval\n"
        f"def f({params}):\n    return {expression}\n"
    )


_IDS = [e for _, e, _ in BUILTIN_EXPRESSIONS]


@pytest.mark.parametrize("params,expression,samples", BUILTIN_EXPRESSIONS, ids=_IDS)
def test_builtin_call_computes_what_python_computes(params, expression, samples, recording):
    assert mismatches(_builtin_source(params, expression), samples) == []


@pytest.mark.parametrize("params,expression,samples", BUILTIN_EXPRESSIONS, ids=_IDS)
def test_builtin_call_is_routed_through_the_runtime(params, expression, samples):
    _, _, rewritten = original_and_rewritten(_builtin_source(params, expression))
    assert "_mt." in rewritten.split("def f", 1)[1]


def test_every_renamed_builtin_is_checked():
    rewritten = rewrite_source("\n".join(_builtin_source(p, e) for p, e, _ in BUILTIN_EXPRESSIONS))
    renamed = set(BUILTIN_CALLS.values()) | set(CONCRETIZING_CALLS.values())
    assert {name for name in renamed if f"_mt.{name}(" in rewritten} == renamed


def test_check_raises_what_thunders_check_raises(recording):
    source = (
        "from thunder.core.baseutils import check\n"
        "def f(a, b):\n    check(a <= b, lambda: f'{a} > {b}', ValueError)\n    return 1\n"
    )
    assert mismatches(source, [(1, 2), (3, 2), (2.5, 2.5)]) == []


def test_symbolic_int_is_int_on_plain_values():
    samples = INTS + FLOATS[:-1] + BOOLS
    assert [(type(runtime.symbolic_int(x)), runtime.symbolic_int(x)) for x in samples] == [(int, int(x)) for x in samples]


def test_plain_values_record_nothing_under_a_recorder():
    scope: list = []
    with record_state.recording_frame(record_state.RecordingFrame(scope)):
        for op in BINARY + COMPARISONS:
            mismatches(f"def f(a, b):\n    return a {op} b\n", [(3, 2), (2.5, 4), (True, 1)])
    assert scope == []
