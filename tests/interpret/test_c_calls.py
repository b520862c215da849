"""C code never meets a symbol: builtins, math, operator and the methods of int, float and str
on symbolic numbers return eager's value and type.

A generated matrix, not samples. The callables are discovered: every public callable of
``builtins``, ``math`` and ``operator`` and every method of ``int``, ``float`` and ``str`` that
accepts a number in some call shape (``fn(v)``, ``fn(v, 3)``, ``fn(3, v)``, ``v.m()``, ``v.m(3)``,
``"abcab".m(v)``, ``"abcab".m("a", v)``), crossed with operand classes (a size, an int argument,
negative, 0, 1, a float, NaN, inf, huge, bool). One jitted function per call shape and operand
class runs every callable of that shape under its own ``try`` (an exception is a result: its
type is compared), and is called twice with the value changed (sign, magnitude, 0/1): each
result's value and type must be eager's. A clear MetatraceError passes only where stock thunder
under ``cache="constant values"`` fails too (computed here, for those calls only).

Then the number-op table (``metatrace.metas.number_ops``): each row's declared domain against
Python's own result types over the same operand classes.
"""

from __future__ import annotations

import builtins
import math
import operator

import pytest
import thunder
import torch

import metatrace
from fuzz_programs import _same
from metatrace.metas import number_ops

# operand class -> (first value, second value): the second changes sign, magnitude or 0/1
CLASSES = {
    "size": (2, 5),
    "int": (3, 40),
    "negative": (-3, 3),
    "zero": (0, 1),
    "one": (1, 0),
    "float": (2.5, -2.5),
    "nan": (math.nan, 1.5),
    "inf": (math.inf, -math.inf),
    "huge": (2**70, -(2**70)),
    "bool": (True, False),
}
PROBES = (3, 2.5, True)

# Callables that read no number (identity, iteration, I/O, the interpreter's own machinery) or
# whose result is not a value (``id``, ``hash`` of NaN is its identity).
SKIPPED = {
    "builtins": {"id", "hash", "input", "open", "print", "exit", "quit", "help", "breakpoint", "exec", "eval",
                 "compile", "__import__", "__build_class__", "globals", "locals", "vars", "dir", "delattr",
                 "setattr", "getattr", "hasattr", "memoryview", "iter", "next", "aiter", "anext", "super", "object",
                 "staticmethod", "classmethod", "property", "type", "issubclass", "isinstance", "callable",
                 "enumerate", "zip", "map", "filter", "reversed", "sorted", "sum", "min", "max", "all", "any",
                 "len", "list", "tuple", "dict", "set", "frozenset", "copyright", "credits", "license", "repr"},
    "operator": {"attrgetter", "itemgetter", "methodcaller", "call", "__call__", "is_", "is_not"},
    "math": set(),
}
SKIPPED_METHODS = {"__getattribute__", "__setattr__", "__delattr__", "__init__", "__new__", "__init_subclass__",
                   "__reduce__", "__reduce_ex__", "__sizeof__", "__dir__", "__subclasshook__", "__class__",
                   "__getnewargs__", "__hash__", "__repr__", "__str__", "__doc__", "__getstate__"}


def _callables(namespace) -> list[tuple[str, object]]:
    module = {"builtins": builtins, "math": math, "operator": operator}[namespace]
    return [(f"{namespace}.{name}", getattr(module, name)) for name in sorted(dir(module))
            if not (name.startswith("_") and namespace != "operator") and name not in SKIPPED[namespace]
            and callable(getattr(module, name)) and not isinstance(getattr(module, name), type(BaseException))
            and not (isinstance(getattr(module, name), type) and issubclass(getattr(module, name), BaseException))]


# The calls and the jitted function read nothing from globals: thunder's interpreter wraps the
# globals (and the builtins) of the code it runs on every read, and this module's hold every call
# of the matrix. The builtins they use are closure variables.
def _closures(getattr, type, isinstance, tuple, bytes, bytearray, Exception):  # noqa: A002
    def normalized(r):
        # (thunder returns no bytes and no NotImplemented: what they stand for instead)
        if r is NotImplemented:
            return "NotImplemented"
        return ("bytes", tuple(r)) if isinstance(r, (bytes, bytearray)) else r

    def run_all(calls, from_size):
        """One straight-line function over ``calls`` (a loop costs thunder's interpreter an
        interpreted ``next`` per step), each call under its own ``try``."""
        names = [f"c{i}" for i in range(len(calls))]
        body = "".join(f"        try:\n            out.append(normalized({c}(n)))\n"
                       f"        except Exception as e:\n            out.append(type(e))\n" for c in names)
        source = (f"def make(normalized, type, Exception, {', '.join(names)}):\n"
                  f"    def run_all(x, v):\n        n = x.shape[0] if {from_size} else v\n        out = []\n"
                  f"{body}        return out\n    return run_all\n")
        namespace = {"__builtins__": {}}
        exec(source, namespace)
        return namespace["make"](normalized, type, Exception, *calls)

    return {
        "call_function": lambda fn: lambda v: fn(v),
        "call_function_3": lambda fn: lambda v: fn(v, 3),
        "call_3_function": lambda fn: lambda v: fn(3, v),
        "call_method": lambda name: lambda v: getattr(v, name)(),
        "call_method_3": lambda name: lambda v: getattr(v, name)(3),
        "read_attribute": lambda name: lambda v: getattr(v, name),
        "call_str_method": lambda name: lambda v: getattr("abcab", name)(v),
        "call_str_method_a": lambda name: lambda v: getattr("abcab", name)("a", v),
        "normalized": normalized,
        "run_all": run_all,
    }


_NAMESPACE = _closures(getattr, type, isinstance, tuple, bytes, bytearray, Exception)


def _shapes():
    """(shape name, [(label, call of v)]) for every call shape; calls bind their callable now."""
    ns = _NAMESPACE
    shapes = {"f(v)": [], "f(v, 3)": [], "f(3, v)": [], "v.m()": [], "v.m(3)": [], "v.attr": [], "s.m(v)": [],
              "s.m('a', v)": []}
    for namespace in ("builtins", "math", "operator"):
        for label, fn in _callables(namespace):
            shapes["f(v)"].append((label, ns["call_function"](fn)))
            shapes["f(v, 3)"].append((label, ns["call_function_3"](fn)))
            shapes["f(3, v)"].append((label, ns["call_3_function"](fn)))
    for typ in (int, float):
        for name in sorted(dir(typ)):
            if name in SKIPPED_METHODS or (name.startswith("__") and name[2:-2] in ("eq", "ne", "lt", "le", "gt", "ge")):
                continue
            label = f"{typ.__name__}.{name}"
            if callable(getattr(typ, name)):
                shapes["v.m()"].append((label, ns["call_method"](name)))
                shapes["v.m(3)"].append((label, ns["call_method_3"](name)))
            else:
                shapes["v.attr"].append((label, ns["read_attribute"](name)))
    for name in sorted(dir(str)):
        if name not in SKIPPED_METHODS:
            shapes["s.m(v)"].append((f"str.{name}", ns["call_str_method"](name)))
            shapes["s.m('a', v)"].append((f"str.{name}", ns["call_str_method_a"](name)))
    return {shape: [c for c in calls if _accepts_numbers(c[1])] for shape, calls in shapes.items()}


def _accepts_numbers(call) -> bool:
    """Eager runs it on some number without a TypeError or AttributeError (a call shape it takes)."""
    for v in PROBES:
        try:
            call(v)
            return True
        except (TypeError, AttributeError):
            continue
        except Exception:
            return True
    return False


def _result(call, v):
    try:
        return _NAMESPACE["normalized"](call(v))
    except Exception as e:
        return type(e)


SHAPES = _shapes()
# (the exponent's position: 3 ** 2**70 has 2**70 digits, a huge second operand is left out)
LEFT_OUT = {("f(3, v)", "huge"), ("v.m(3)", "huge"), ("s.m(v)", "huge"), ("s.m('a', v)", "huge")}


def _arguments(cls: str, value):
    return (torch.ones(value), 0) if cls == "size" else (torch.ones(2), value)


def _stock_fails(call, cls: str, value) -> bool:
    """Stock thunder (metatrace disabled) under constant values fails this call or differs from eager."""
    expected = _result(call, value)
    metatrace.disable()
    try:
        jf = thunder.jit(_NAMESPACE["run_all"]((call,), cls == "size"), cache="constant values")
        try:
            got = jf(*_arguments(cls, value))[0]
        except Exception:
            return True
        return not _same(expected, got)
    finally:
        metatrace.enable()


@pytest.mark.parametrize("shape,cls", [(shape, cls) for shape in sorted(SHAPES) for cls in sorted(CLASSES)
                                       if (shape, cls) not in LEFT_OUT])
def test_c_callables_on_symbolic_numbers_return_eagers_value_and_type(enabled, shape, cls):
    calls = SHAPES[shape]
    jitted = thunder.jit(_NAMESPACE["run_all"](tuple(call for _, call in calls), cls == "size"),
                         cache="symbolic values")
    wrong = []
    for value in CLASSES[cls]:
        eager = [_result(call, value) for _, call in calls]
        got = jitted(*_arguments(cls, value))
        for (label, call), e, g in zip(calls, eager, got):
            if _same(e, g):
                continue
            if isinstance(g, type) and issubclass(g, metatrace.MetatraceError) and _stock_fails(call, cls, value):
                continue
            wrong.append(f"{label}({value!r}): eager {e!r}, jitted {g!r}")
    assert wrong == []


# ---------------------------------------------------------------------------------------------
# The number-op table's declared domains against Python
# ---------------------------------------------------------------------------------------------

OPERANDS = {"int": 3, "negative": -3, "zero": 0, "one": 1, "float": 2.5, "negative float": -2.5, "nan": math.nan,
            "inf": math.inf, "huge": 2**70, "bool": True}
DOMAIN_ROWS = [row for row in number_ops.ROWS if row.domain is not None]


def _declared_type(row, a, b):
    if row.result is not None:
        return row.result(a, b)
    if row.name in ("sqrt", "fmod"):  # (math's functions: always a float)
        return float
    promoted = number_ops._promoted(a, b)
    return int if promoted is bool else promoted


def _applies(row, a: str, b: str) -> bool:
    """Whether the row is defined on the operands (the cases left out are not generated)."""
    x, y = OPERANDS[a], OPERANDS[b]
    if row.name.endswith(("pow_int", "pow_float")) and not (type(x) in (int, bool) and type(y) in (int, bool)):
        return False  # an int ** int operator
    if "pow" in row.name and isinstance(y, int) and abs(y) > 64:
        return False  # a huge exponent
    if row.arity == 1 and b != "one":
        return False  # a unary row: one column
    # a non-finite operand of a row that declares finite operands (NumberOp.finite)
    return not (row.finite and not all(math.isfinite(v) for v in (x, y)[: row.arity]))


@pytest.mark.parametrize("row,a,b", [pytest.param(row, a, b, id=f"{row.name}-{a}-{b}") for row in DOMAIN_ROWS
                                     for a in sorted(OPERANDS) for b in sorted(OPERANDS) if _applies(row, a, b)])
def test_number_op_rows_type_holds_where_their_domain_says(row, a, b):
    x, y = OPERANDS[a], OPERANDS[b]
    operands = (x, y)[: row.arity]
    holds = all(h for *_, h in number_ops.conditions(row, operands))
    try:
        result = row.evaluate(*operands)
    except (ZeroDivisionError, ValueError, OverflowError):
        result = None
    # (sufficient, not necessary: (-2) ** 2.0 is a float too, which powers.py computes apart)
    assert not holds or (result is not None and type(result) is _declared_type(row, *(operands * 2)[:2]))


# ---------------------------------------------------------------------------------------------
# The measured cases of the issue, with their guards and reuse
# ---------------------------------------------------------------------------------------------


def _eager_and_jitted(fn, calls):
    jitted = thunder.jit(fn, cache="symbolic values")
    return [fn(*c) for c in calls], [jitted(*c) for c in calls], jitted


def _same_all(eager, got) -> bool:
    return all(_same(e, g) for e, g in zip(eager, got))


SHAPED = [(torch.ones(2, 3),), (torch.ones(3, 3),), (torch.ones(2, 3),)]


def test_join_of_str_over_a_shape_prints_the_sizes(enabled):
    eager, got, _ = _eager_and_jitted(lambda x: "x".join(map(str, x.shape)), SHAPED)
    assert got == eager


def test_the_guard_of_a_size_printed_through_map_names_the_users_line(enabled):
    _, _, jitted = _eager_and_jitted(lambda x: "x".join(map(str, x.shape)), SHAPED[:1])
    assert any("str()" in g and "test_c_calls.py" in g for g in metatrace.explain(jitted)[0].guards)


def test_format_with_a_spec_formats_the_size(enabled):
    eager, got, _ = _eager_and_jitted(lambda x: "{:>4}".format(x.shape[0]), SHAPED)
    assert got == eager


def test_bit_length_of_a_size_is_the_values(enabled):
    eager, got, _ = _eager_and_jitted(lambda x: x * x.shape[0].bit_length(), [(torch.ones(2),), (torch.ones(4),)])
    assert _same_all(eager, got)


def test_an_int_to_a_float_power_is_complex_for_a_negative_base(enabled):
    calls = [(torch.ones(2), 4), (torch.ones(2), -4), (torch.ones(2), 9)]
    eager, got, _ = _eager_and_jitted(lambda x, n: isinstance(n ** 0.5, float), calls)
    assert got == eager


def test_a_float_power_reuses_its_entry_for_every_nonnegative_base(enabled):
    calls = [(torch.ones(2), 4), (torch.ones(2), 9), (torch.ones(2), 16)]
    _, _, jitted = _eager_and_jitted(lambda x, n: x * n ** 0.5, calls)
    assert thunder.cache_misses(jitted) == 1


def _divides(x, n):
    try:
        return x * (10 // n)
    except ZeroDivisionError:
        return x


@pytest.mark.parametrize("order", [(2, 0, 3), (0, 3, 0, 5)])
def test_a_size_division_by_zero_in_a_try_takes_eagers_branch(enabled, order):
    eager, got, _ = _eager_and_jitted(_divides, [(torch.ones(2), n) for n in order])
    assert _same_all(eager, got)


def _returns_a_ratio(x, r):
    try:
        return x * 1, r / r  # the quotient reaches no guard: only the divisor's domain decides
    except ZeroDivisionError:
        return x, None


def _returns_a_quotient(x, n):
    try:
        return x * 1, 10 // n
    except ZeroDivisionError:
        return x, None


@pytest.mark.parametrize("fn, order", [(_returns_a_ratio, (1.0, 0.0, 2.5)), (_returns_a_ratio, (0.0, 1.0, 0.0)),
                                       (_returns_a_quotient, (2, 0, 3))])
def test_a_returned_quotient_then_a_zero_divisor_takes_eagers_branch(enabled, fn, order):
    eager, got, _ = _eager_and_jitted(fn, [(torch.ones(2), v) for v in order])
    assert _same_all(eager, got)


def test_map_with_a_lambda_over_a_shape_stays_symbolic(enabled):
    calls = [(torch.ones(n, 3),) for n in (2, 3, 4)]
    _, _, jitted = _eager_and_jitted(lambda x: x.reshape(-1)[: sum(map(lambda s: s * 2, x.shape))], calls)
    assert thunder.cache_misses(jitted) == 1


def test_a_c_call_pins_the_number_it_reads(enabled):
    calls = [(torch.ones(2), 4), (torch.ones(2), 8)]
    eager, got, _ = _eager_and_jitted(lambda x, n: x * math.gcd(n, 6), calls)
    assert _same_all(eager, got)


@pytest.mark.parametrize("fn", [
    lambda t, n: torch.sqrt(t) + n,
    lambda t, n: n ** t,
    lambda t, n: (n * 0.5) ** t,
    lambda t, n: t ** n,
], ids=["sqrt of a tensor", "int ** tensor", "float ** tensor", "tensor ** int"])
def test_a_number_rows_domain_is_no_condition_on_a_tensor(enabled, fn):
    # (the number ops' prims take tensors too: their domain is about numbers, never asked of a tensor)
    calls = [(torch.tensor([0.5, 2.0]), n) for n in (2, -3, 3)]
    eager, got, _ = _eager_and_jitted(fn, calls)
    assert all(torch.allclose(e, g, equal_nan=True) for e, g in zip(eager, got))
