"""Golden tests: each rewrite on small snippets written for the test, and the generated code's
behaviour on plain Python values (it must compute exactly what the original computes)."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper

from rewrites.arithmetic import ArithmeticTransformer
from rewrites.builtin_calls import BuiltinCallTransformer
from rewrites.checks import CheckCallTransformer
from rewrites.comparisons import ComparisonTransformer
from rewrites.concretize import ConcretizingCallTransformer, SubscriptIndexTransformer, ValueAttributeTransformer
from rewrites.conditions import ConditionTransformer
from rewrites.pipeline import RewriteError, parse, rewrite_functions, rewrite_source


def apply(transformer: type[cst.CSTTransformer], source: str) -> str:
    module = cst.parse_module(textwrap.dedent(source))
    return MetadataWrapper(module).visit(transformer()).code


def golden(transformer, before: str, after: str) -> None:
    assert apply(transformer, before) == textwrap.dedent(after)


# --- arithmetic -----------------------------------------------------------------------------


def test_binary_operators_become_runtime_calls():
    golden(
        ArithmeticTransformer,
        "n = (stop - start + step - 1) // step\n",
        '''n = _mt.floordiv(_mt.sub(_mt.add(_mt.sub(stop, start), step), 1), step)\n''',
    )


def test_all_binary_operators():
    golden(
        ArithmeticTransformer,
        "r = (a * b, a / b, a % b, a ** b, a & b, a | b, a ^ b, a << b, a >> b)\n",
        "r = (_mt.mul(a, b), _mt.truediv(a, b), _mt.mod(a, b), _mt.pow(a, b), _mt.bitand(a, b), _mt.bitor(a, b), "
        "_mt.xor(a, b), _mt.lshift(a, b), _mt.rshift(a, b))\n",
    )


def test_unary_operators_keep_negative_literals():
    golden(ArithmeticTransformer, "x = (-n, +n, ~n, -1, -2.5)\n", "x = (_mt.neg(n), _mt.pos(n), _mt.invert(n), -1, -2.5)\n")


def test_augmented_assignment_keeps_in_place_semantics():
    golden(ArithmeticTransformer, "size *= d\nshape[i] += 1\n", 'size = _mt.iop("mul", size, d)\nshape[i] = _mt.iop("add", shape[i], 1)\n')


def test_annotations_are_not_arithmetic():
    golden(
        ArithmeticTransformer,
        "def f(x: int | None = a + 1) -> tuple[int, ...] | None:\n    y: int | float = x\n",
        "def f(x: int | None = _mt.add(a, 1)) -> tuple[int, ...] | None:\n    y: int | float = x\n",
    )


def test_matrix_multiply_is_left_alone():
    golden(ArithmeticTransformer, "c = a @ b\n", "c = a @ b\n")


# --- comparisons ----------------------------------------------------------------------------


def test_comparisons_and_membership():
    golden(
        ComparisonTransformer,
        "r = (a < b, a <= b, a > b, a >= b, a == b, a != b, d in dims, d not in dims, x is None, x is not y)\n",
        "r = (_mt.lt(a, b), _mt.le(a, b), _mt.gt(a, b), _mt.ge(a, b), _mt.eq(a, b), _mt.ne(a, b), "
        "_mt.contains(dims, d), _mt.not_contains(dims, d), x is None, x is not y)\n",
    )


def test_comparison_chain_defers_operands():
    golden(
        ComparisonTransformer,
        "ok = 0 <= idx < len(shape)\n",
        'ok = _mt.compare_chain(0, "le", lambda: idx, "lt", lambda: len(shape))\n',
    )


# --- conditions -----------------------------------------------------------------------------


def test_if_and_while_tests_become_truths():
    golden(
        ConditionTransformer,
        """\
        if a and not b:
            pass
        elif c:
            pass
        while n:
            pass
        """,
        """\
        if _mt.truth(a) and not _mt.truth(b):
            pass
        elif _mt.truth(c):
            pass
        while _mt.truth(n):
            pass
        """,
    )


def test_tests_that_are_always_bools_are_not_wrapped():
    golden(
        ConditionTransformer,
        "if isinstance(x, int) and x is not None and not hasattr(x, 'y'):\n    pass\nok = isinstance(a, int) or b\n",
        "if isinstance(x, int) and x is not None and not hasattr(x, 'y'):\n    pass\nok = isinstance(a, int) or b\n",
    )


def test_value_position_and_or_keep_operand_semantics():
    golden(
        ConditionTransformer,
        "dims = dims or ()\nflag = not x\nv = a and b and c\n",
        "dims = _mt.or_(dims, lambda: ())\nflag = _mt.not_(x)\nv = _mt.and_(_mt.and_(a, lambda: b), lambda: c)\n",
    )


def test_conditional_expression_assert_and_comprehension_filter():
    golden(
        ConditionTransformer,
        "y = a if n else b\nassert n, 'msg'\nz = [x for x in xs if x]\n",
        "y = a if _mt.truth(n) else b\nassert _mt.truth(n), 'msg'\nz = [x for x in xs if _mt.truth(x)]\n",
    )


def test_check_condition_is_a_condition():
    golden(
        ConditionTransformer,
        "_mt.check(a and b, lambda: 'x')\n",
        "_mt.check(_mt.truth(a) and _mt.truth(b), lambda: 'x')\n",
    )


def test_or_and_of_two_plain_comparisons_is_settled_by_either_operand():
    golden(
        ConditionTransformer,
        "_mt.check(_mt.eq(sd, sad) or _mt.eq(d, dim), lambda: 'x')\nif _mt.lt(a.ndim, 1) and _mt.eq(b, -1):\n    pass\n",
        "_mt.check(_mt.settled_first(True, _mt.eq(sd, sad), lambda: _mt.eq(d, dim)), lambda: 'x')\n"
        "if _mt.settled_first(False, _mt.lt(a.ndim, 1), lambda: _mt.eq(b, -1)):\n    pass\n",
    )


def test_a_comparison_of_a_call_or_an_index_keeps_pythons_order():
    # evaluating f(x) or xs[i] early could raise or have effects: only names, attributes, literals
    golden(
        ConditionTransformer,
        "if _mt.eq(a, 0) or _mt.eq(f(x), 1):\n    pass\nif _mt.eq(a, 0) and _mt.eq(xs[i], 1):\n    pass\n",
        "if _mt.truth(_mt.eq(a, 0)) or _mt.truth(_mt.eq(f(x), 1)):\n    pass\n"
        "if _mt.truth(_mt.eq(a, 0)) and _mt.truth(_mt.eq(xs[i], 1)):\n    pass\n",
    )


# --- calls ----------------------------------------------------------------------------------


def test_check_calls_by_qualified_name():
    golden(
        CheckCallTransformer,
        """\
        import thunder.core.utils as utils
        from thunder.core import baseutils
        utils.check(n > 0, lambda: f"bad {n}", exception_type=ValueError)
        baseutils.check(ok, lambda: "no")
        other.check(ok)
        """,
        """\
        import thunder.core.utils as utils
        from thunder.core import baseutils
        _mt.check(n > 0, lambda: f"bad {n}", exception_type=ValueError)
        _mt.check(ok, lambda: "no")
        other.check(ok)
        """,
    )


def test_numeric_builtins_by_qualified_name():
    golden(
        BuiltinCallTransformer,
        """\
        import math, builtins
        from functools import reduce
        x = (max(a, b), builtins.min(xs), abs(n), sum(xs), divmod(a, b), reduce(op, xs, 1), math.prod(xs), math.ceil(f))
        """,
        """\
        import math, builtins
        from functools import reduce
        x = (_mt.max_(a, b), _mt.min_(xs), _mt.abs_(n), _mt.sum_(xs), _mt.divmod_(a, b), _mt.reduce_(op, xs, 1), _mt.prod_(xs), _mt.ceil(f))
        """,
    )


def test_shadowed_builtin_is_not_rewritten():
    golden(
        BuiltinCallTransformer,
        "def f(max):\n    return max(1, 2)\n",
        "def f(max):\n    return max(1, 2)\n",
    )


def test_module_level_def_shadowing_a_builtin_is_not_rewritten():
    """A module-level ``def max`` is the module's own function: its calls are not the builtin's."""
    source = """\
        def max(a, b):
            return a
        def f(a, b):
            return max(a, b)
        """
    golden(BuiltinCallTransformer, source, source)


def test_module_level_def_shadowing_int_is_not_rewritten():
    source = """\
        def int(x):
            return x
        def f(x):
            return int(x)
        """
    golden(ConcretizingCallTransformer, source, source)


def test_rewritten_module_calls_its_own_max():
    import metatrace.metas.runtime as runtime

    source = "def max(a, b):\n    return a\ndef f(a, b):\n    return max(a, b)\n"
    namespace: dict = {"_mt": runtime}
    exec(rewrite_source(source), namespace)
    assert namespace["f"](1, 2) == 1


def test_concretizing_calls():
    golden(
        ConcretizingCallTransformer,
        """\
        from thunder.core.proxies import pyval
        r = (int(n), float(n), bool(n), range(n), pyval(n), set(dims), sorted(perm), hash(n), round(f))
        """,
        """\
        from thunder.core.proxies import pyval
        r = (_mt.int_(n), _mt.float_(n), _mt.truth(n), _mt.range_(n), _mt.pyval(n), _mt.set_(dims), _mt.sorted_(perm), _mt.hash_(n), _mt.round_(f))
        """,
    )


def test_value_attribute_reads_only():
    golden(
        ValueAttributeTransformer,
        "v = n.value + 1\nn.value = 3\nw = enum_member.value()\n",
        "v = _mt.value_of(n) + 1\nn.value = 3\nw = enum_member.value()\n",
    )


def test_subscripts_index_through_runtime_but_literals_and_annotations_do_not():
    golden(
        SubscriptIndexTransformer,
        "def f(xs: Sequence[int]):\n    return xs[i], xs[0], xs[-1], xs[lo:hi], xs[1:], d['k']\n",
        "def f(xs: Sequence[int]):\n    return xs[_mt.index(i)], xs[0], xs[-1], xs[_mt.index(lo):_mt.index(hi)], xs[1:], d['k']\n",
    )


# --- pipeline -------------------------------------------------------------------------------


def test_pipeline_composes_all_rewrites():
    source = textwrap.dedent(
        """\
        import thunder.core.utils as utils
        def new_length(start, stop, stride):
            utils.check(start <= stop and stride >= 1, lambda: "bad slice")
            return max((stop - start + stride - 1) // stride, 0)
        """
    )
    assert rewrite_source(source) == textwrap.dedent(
        """\
        import thunder.core.utils as utils
        def new_length(start, stop, stride):
            _mt.check(_mt.settled_first(False, _mt.le(start, stop), lambda: _mt.ge(stride, 1)), lambda: "bad slice")
            return _mt.max_(_mt.floordiv(_mt.sub(_mt.add(_mt.sub(stop, start), stride), 1), stride), 0)
        """
    )


SEMANTICS_SNIPPET = textwrap.dedent(
    """\
    import functools, math, operator
    def f(shape, dims, start, stop, stride):
        out = []
        for i in range(len(shape)):
            if i in dims and not shape[i] == 0 or i > 5:
                continue
            out.append((stop - start + stride - 1) // stride + shape[i] % 3)
        total = functools.reduce(operator.mul, shape, 1) + math.prod(shape) - sum(shape)
        total += max(shape, default=0) - min((s for s in shape), default=0) + max(start, stride) + abs(-start)
        q, r = divmod(total, 7)
        ok = 0 <= start < stop <= 100
        label = "pos" if total > 0 else "neg"
        fallback = dims or (0,)
        return out, total, q, r, ok, label, fallback, sorted(set(dims)), [shape[j] for j in range(1, len(shape)) if shape[j]]
    """
)


@pytest.mark.parametrize(
    "args",
    [((2, 3, 4), (1,), 0, 4, 1), ((5, 0, 7, 1), (), 1, 9, 2), ((1,), (0, 0), 3, 3, 5), ((), (2,), 0, 200, 3)],
)
def test_rewritten_code_computes_what_the_original_computes(args):
    """On plain Python values the runtime must be transparent: same results, same branches."""
    import metatrace.metas.runtime as runtime

    original_ns: dict = {}
    exec(SEMANTICS_SNIPPET, original_ns)
    rewritten_ns: dict = {"_mt": runtime}
    exec(rewrite_source(SEMANTICS_SNIPPET), rewritten_ns)
    assert rewritten_ns["f"](*args) == original_ns["f"](*args)


def test_rewrite_functions_reports_findings_with_original_lines():
    source = textwrap.dedent(
        """\
        import math

        def good(a, b):
            return a + b

        def bad(xs):
            return xs.index(3) + complex(1)
        """
    )
    module = parse(source, "snippet.py")
    result = rewrite_functions(module, ["bad", "good"], first_lines={"good": 3, "bad": 6})
    assert result.findings["good"] == []
    assert [str(f) for f in result.findings["bad"]] == [
        "method .index() compares elements silently (line 7)",
        "call to complex() converts numbers silently (line 7)",
    ]
    assert "def good(a, b):\n    return _mt.add(a, b)" in result.code


def test_unparsable_source_names_the_file():
    with pytest.raises(RewriteError, match="cannot parse broken.py"):
        parse("def f(:\n", "broken.py")


# --- int passed as a converter (autograd rules) -----------------------------------------------


def test_int_as_converter_argument_keeps_symbols():
    from rewrites.int_as_function import IntAsFunctionTransformer

    golden(
        IntAsFunctionTransformer,
        "from thunder.core.pytree import tree_map\n"
        "padding = tree_map(int, padding)\nwidths = list(map(int, widths))\n",
        "from thunder.core.pytree import tree_map\n"
        "padding = tree_map(_mt.symbolic_int, padding)\nwidths = list(map(_mt.symbolic_int, widths))\n",
    )


def test_int_called_or_shadowed_is_left_alone():
    from rewrites.int_as_function import IntAsFunctionTransformer

    # A parameter named int is not the builtin, a call of int is not a converter, and
    # int as a type (isinstance, or a second argument) is not a conversion: all unchanged.
    source = (
        "def f(x, int):\n    return tree_map(int, x)\n\n"
        "y = int(z)\nok = isinstance(y, int)\nz = tree_map(f, int)\n"
    )
    assert apply(IntAsFunctionTransformer, source) == source
