"""The number ops metatrace records, evaluates, replays in guards and prints: one row each.

Adding a number prim to what metatrace knows is one row here (after thunder's ``core/prims.py``,
one declarative table): the guards' projection (which producers the prologue may replay), the
guard algebra (``metatrace.guards.simplify``: its op names, constant folding, how it prints in
Python and in ``explain``), the prologue's guard program (the namespace its Python runs in), the
python executor (the operators metatrace registers for numbers) and the comparison names all read
their tables off these rows.

A leaf module: it imports thunder and the standard library only, so metas/ and guards/ can both
read it without importing each other.
"""

from __future__ import annotations

import builtins
import math
import operator
from dataclasses import dataclass
from typing import Any, Callable

import thunder.core.dtypes as dtypes
import thunder.core.prims as prims
from thunder.core.proxies import NumberProxy

PrimIDs = prims.PrimIDs

# The prefix of the python-executor operators metatrace registers for Python's number semantics.
PY_OP_PREFIX = "metatrace_py_"


@dataclass(frozen=True)
class NumberOp:
    """One number op.

    ``name``: the thunder symbol, an attribute of ``thunder.core.prims`` (``"maximum"``), or the
    python-executor operator metatrace registers (``"metatrace_py_round"``), or ``""`` for an
    operation of the guard algebra only (``int(x)``, ``isfinite(x)``); ``id``: that symbol's id
    (a PrimID, the operator's name, or None). ``evaluate``: its value on Python numbers, as the
    prologue computes it. ``arity``: how many arguments.

    ``python``: how it prints in the guard program's Python (names in :data:`NAMESPACE`): an
    operator (``"//"``; prefix when unary), a function (``"_math.ceil"``) or a template over the
    arguments (``"type({0}) in (int, bool)"``); None when nothing prints it. ``text``: how
    ``explain`` shows it, when not as ``op``. ``prec``: the precedence of an operator form (Python's
    order: comparisons 40, ``|`` 42 ... ``**`` 90).

    ``runtime_name``: the name of its recording operator in ``metatrace.metas.runtime`` (defined in
    ``metatrace.metas.runtime_arithmetic``), which the rewritten metas call
    for the Python operation it records (``"mul"`` for ``a * b``), None when they never do.

    ``op``: its name in the guard algebra (``metatrace.guards.simplify.build``), None outside it.
    ``replay``: the prologue may replay a producer of it (the python executor runs it on numbers).
    ``divides``: raises where its second argument is 0; ``finite``: raises where its first
    argument is an infinite float; ``boolean``: its value is a bool (the algebra bounds it by 0 and 1).
    ``compare``: a comparison's relation name (``"lt"``), with the relation that is its negation
    and the one with the operands swapped. ``impl``: the name of the python-executor operator that
    metatrace registers to run the prim on numbers (thunder has none). ``result``: the result type
    from the argument types, for the operators metatrace defines.

    ``domain``: the conditions under which its result has the type the row gives it (and it does
    not raise), from the operand types: ``(relation, operand index, constant)`` triples that must
    all hold (``("ne", 1, 0)``: a divisor is not 0; ``("ge", 0, 0)``: ``int ** float`` is real
    where the base is not negative). Where they are used on symbols they are guarded as relations
    (:func:`conditions`), so a call on the other side of one (``n == 0``, a negative base) misses.
    """

    name: str
    id: Any
    evaluate: Callable
    arity: int
    python: str | None
    op: str | None = None
    text: str | None = None
    prec: int = 100
    replay: bool = False
    divides: bool = False
    finite: bool = False
    boolean: bool = False
    compare: str | None = None
    negation: str | None = None
    mirror: str | None = None
    impl: str | None = None
    result: Callable | None = None
    runtime_name: str | None = None
    domain: Callable | None = None

    @property
    def shown(self) -> str:
        """How ``explain`` names it."""
        return self.text or self.op or self.python


def convert(x, to):
    """``prims.convert_element_type`` on a number, as the python executor runs it."""
    return to(x) if isinstance(to, type) else dtypes.dtype_to_numbertype(to)(x)


def _tensor_abs(x):
    """``prims.abs`` on a number, as thunder's python executor runs it: a bool stays a bool."""
    return x if type(x) is bool else builtins.abs(x)


def _isint(x) -> bool:
    return type(x) in (int, bool)


# What the guard program's Python reads besides builtins (see ``NumberOp.python``).
NAMESPACE = {"_div": prims._div_numbers, "_math": math, "_convert": convert, "_signbit": prims._signbit_number,
             "_tabs": _tensor_abs}

# Python number types in promotion order.
_NUMBER_TYPES = (bool, int, float, complex)


def number_type(x) -> type:
    if isinstance(x, NumberProxy):
        return x.python_type
    return type(x)


def number_value(x):
    return x.value if isinstance(x, NumberProxy) else x


def _promoted(*xs) -> type:
    return _NUMBER_TYPES[max(_NUMBER_TYPES.index(number_type(x)) for x in xs)]


def _number_where(pred, a, b):
    return _promoted(a, b)(a if pred else b)


def _round_digits(x, ndigits):
    return builtins.round(x, ndigits)


def _pow_float(a, b):
    return float(operator.pow(a, b))


def _nonzero_divisor(a, b):
    return (("ne", 1, 0),)


def _real_power(a, b):
    """``a ** b`` on real numbers: a float exponent of a negative base gives a complex number
    (``(-4) ** 0.5``), an int one is real; 0 to a negative power raises ZeroDivisionError."""
    if complex in (number_type(a), number_type(b)):
        return ()
    if number_type(a) in (bool, int) and number_type(b) in (bool, int):
        return _int_power(a, b)
    base = () if number_type(b) in (bool, int) else (("ge", 0, 0),)
    return base + (("ne", 0, 0),) if _negative(b) else base


def _negative(x) -> bool:
    value = number_value(x)
    return value is not None and value < 0


def _int_power(a, b):
    """``int ** int`` is an int where the exponent is not negative (``2 ** -1`` is 0.5)."""
    return (("ge", 1, 0),)


def _float_power(a, b):
    """``int ** int`` with a negative exponent is a float, and raises where the base is 0."""
    return (("lt", 1, 0), ("ne", 0, 0))


def _not_negative(x):
    return (("ge", 0, 0),)


def _prim(name, id, evaluate, arity, python, op=None, **kw) -> NumberOp:
    return NumberOp(name, id, evaluate, arity, python, op=op if op is not None else python, **kw)


def _compare(name, id, evaluate, symbol, relation, negation, mirror) -> NumberOp:
    return _prim(name, id, evaluate, 2, symbol, prec=40, replay=True, boolean=True, compare=relation, negation=negation,
                 mirror=mirror)


def _py_op(name, evaluate, arity, python, result, **kw) -> NumberOp:
    return NumberOp(PY_OP_PREFIX + name, PY_OP_PREFIX + name, evaluate, arity, python, result=result, **kw)


def _py_compare(relation: str) -> NumberOp:
    row = BY_RELATION[relation]
    # An int compared with a float compares exactly in Python (2**53 + 1 != 2.0**53); thunder's
    # comparison prims promote the int to float first.
    return _py_op(f"cmp_{relation}", row.evaluate, 2, row.python, lambda a, b: bool, prec=40, boolean=True,
                  compare=relation, negation=row.negation, mirror=row.mirror)


# thunder's number prims (replayed by the prologue), then the one metatrace runs but never replays.
PRIM_OPS: tuple[NumberOp, ...] = (
    _prim("add", PrimIDs.ADD, operator.add, 2, "+", prec=60, replay=True, runtime_name="recorded_add"),
    _prim("sub", PrimIDs.SUB, operator.sub, 2, "-", prec=60, replay=True, runtime_name="recorded_sub"),
    _prim("mul", PrimIDs.MUL, operator.mul, 2, "*", prec=70, replay=True, runtime_name="mul"),
    _prim("py_floordiv", PrimIDs.PY_FLOORDIV, operator.floordiv, 2, "//", prec=70, replay=True, divides=True,
          runtime_name="floordiv", domain=_nonzero_divisor),
    _prim("remainder", PrimIDs.REMAINDER, operator.mod, 2, "%", prec=70, replay=True, divides=True, runtime_name="mod",
          domain=_nonzero_divisor),
    _prim("pow", PrimIDs.POW, operator.pow, 2, "**", prec=90, replay=True, runtime_name="pow", domain=_real_power),
    # C-style (truncating) on ints: thunder's own number division, not Python's ``/``
    _prim("div", PrimIDs.DIV, prims._div_numbers, 2, "_div", op="div", text="/", prec=70, replay=True, divides=True,
          domain=_nonzero_divisor),
    _prim("bitwise_and", PrimIDs.BITWISE_AND, operator.and_, 2, "&", prec=44, replay=True, runtime_name="bitand"),
    _prim("bitwise_or", PrimIDs.BITWISE_OR, operator.or_, 2, "|", prec=42, replay=True, runtime_name="bitor"),
    _prim("bitwise_xor", PrimIDs.BITWISE_XOR, operator.xor, 2, "^", prec=43, replay=True, runtime_name="xor"),
    _compare("eq", PrimIDs.EQ, operator.eq, "==", "eq", "ne", "eq"),
    _compare("ne", PrimIDs.NE, operator.ne, "!=", "ne", "eq", "ne"),
    _compare("lt", PrimIDs.LT, operator.lt, "<", "lt", "ge", "gt"),
    _compare("le", PrimIDs.LE, operator.le, "<=", "le", "gt", "ge"),
    _compare("gt", PrimIDs.GT, operator.gt, ">", "gt", "le", "lt"),
    _compare("ge", PrimIDs.GE, operator.ge, ">=", "ge", "lt", "le"),
    _prim("neg", PrimIDs.NEG, operator.neg, 1, "-", op="neg", text="-", prec=80, replay=True, runtime_name="neg"),
    _prim("py_abs", PrimIDs.PY_ABS, builtins.abs, 1, "abs", replay=True, runtime_name="abs_"),
    # thunder's ``abs`` on a number (``NumberProxy.__abs__``): Python's, except that it keeps a bool
    _prim("abs", PrimIDs.ABS, _tensor_abs, 1, "_tabs", op="tabs", text="abs", replay=True),
    # thunder's python executor does not run these on numbers: metatrace registers ``impl``
    _prim("maximum", PrimIDs.MAXIMUM, builtins.max, 2, "max", replay=True, impl="metatrace_max", runtime_name="maximum"),
    _prim("minimum", PrimIDs.MINIMUM, builtins.min, 2, "min", replay=True, impl="metatrace_min", runtime_name="minimum"),
    _prim("ceil", PrimIDs.CEIL, math.ceil, 1, "_math.ceil", op="ceil", replay=True, finite=True,
          impl="metatrace_ceil", runtime_name="ceil"),
    _prim("floor", PrimIDs.FLOOR, math.floor, 1, "_math.floor", op="floor", replay=True, finite=True,
          impl="metatrace_floor", runtime_name="floor"),
    _prim("trunc", PrimIDs.TRUNC, math.trunc, 1, "_math.trunc", op="trunc", replay=True, finite=True,
          impl="metatrace_trunc", runtime_name="trunc"),
    # ``math.sqrt`` of a number (``float(n)`` first: metatrace.proxies.float_numbers); raises
    # ValueError on a negative number, as in eager
    _prim("sqrt", PrimIDs.SQRT, math.sqrt, 1, "_math.sqrt", op="sqrt", replay=True, impl="metatrace_sqrt",
          domain=_not_negative),
    _prim("fmod", PrimIDs.FMOD, math.fmod, 2, "_math.fmod", op="fmod", replay=True, divides=True, finite=True,
          domain=_nonzero_divisor),
    _prim("convert_element_type", PrimIDs.CONVERT_ELEMENT_TYPE, convert, 2, "_convert", op="convert", replay=True),
    _prim("signbit", PrimIDs.SIGNBIT, prims._signbit_number, 1, "_signbit", op="signbit", replay=True, boolean=True),
    # recorded (``~x``) but not replayed: a guard on a value computed by it pins the inputs
    NumberOp("bitwise_not", PrimIDs.BITWISE_NOT, operator.invert, 1, "~", prec=80, impl="metatrace_invert",
             runtime_name="invert"),
)

# Operations of the guard algebra only: no thunder symbol computes them, the algebra rewrites
# ``convert`` into the first three and writes the conditions an operation needs with the last two.
ALGEBRA_OPS: tuple[NumberOp, ...] = (
    NumberOp("", None, int, 1, "int", op="int", finite=True),
    NumberOp("", None, float, 1, "float", op="float"),
    NumberOp("", None, bool, 1, "bool", op="bool", boolean=True),
    NumberOp("", None, math.isfinite, 1, "_math.isfinite", op="isfinite", boolean=True),
    NumberOp("", None, _isint, 1, "type({0}) in (int, bool)", op="isint", prec=40, boolean=True),
)

BY_RELATION: dict[str, NumberOp] = {row.compare: row for row in PRIM_OPS if row.compare}

# Python's own number semantics on symbolic numbers, as python-executor operators metatrace
# registers (see metatrace.metas.python_executor). Not replayable: a guard on a value computed by
# one pins the inputs (correct; ``replay`` could learn them).
PY_OPS: tuple[NumberOp, ...] = (
    _py_op("where", _number_where, 3, None, lambda pred, a, b: _promoted(a, b)),
    _py_op("round", builtins.round, 1, "round", lambda x: int),
    _py_op("round_digits", _round_digits, 2, "round", lambda x, n: int if number_type(x) in (bool, int) else float),
    _py_op("pow_int", operator.pow, 2, "**", lambda a, b: int, prec=90, domain=_int_power),
    _py_op("pow_float", _pow_float, 2, "float({0} ** {1})", lambda a, b: float, domain=_float_power),
    *(_py_compare(relation) for relation in ("eq", "ne", "lt", "le", "gt", "ge")),
    _py_op("lshift", operator.lshift, 2, "<<", lambda a, b: int, prec=50),
    _py_op("rshift", operator.rshift, 2, ">>", lambda a, b: int, prec=50),
)

ROWS: tuple[NumberOp, ...] = PRIM_OPS + ALGEBRA_OPS + PY_OPS

# Lookups the rest of metatrace reads.
BY_ID: dict[Any, NumberOp] = {row.id: row for row in ROWS if row.id is not None}
BY_OP: dict[str, NumberOp] = {row.op: row for row in PRIM_OPS + ALGEBRA_OPS if row.op and (row.replay or not row.name)}
REPLAYABLE: dict[Any, NumberOp] = {row.id: row for row in PRIM_OPS if row.replay}

# Relation names (eq, ne, lt, le, gt, ge): their Python symbol, negation, mirror, and those that
# hold between a value and itself (an int's: a float NaN is not equal to itself).
SYMBOLS: dict[str, str] = {rel: row.python for rel, row in BY_RELATION.items()}
RELATIONS: dict[str, str] = {sym: rel for rel, sym in SYMBOLS.items()}
NEGATION: dict[str, str] = {rel: row.negation for rel, row in BY_RELATION.items()}
MIRROR: dict[str, str] = {rel: row.mirror for rel, row in BY_RELATION.items()}
REFLEXIVE: dict[str, bool] = {rel: bool(row.evaluate(1, 1)) for rel, row in BY_RELATION.items()}


def relation(sym_id) -> str | None:
    """The relation name (``"lt"``) a comparison symbol computes: thunder's comparison prims and
    metatrace's exact int/float comparison operators; None for any other symbol."""
    row = BY_ID.get(sym_id)
    return row.compare if row is not None else None


def conditions(row: NumberOp, operands) -> list[tuple[str, Any, Any, bool]]:
    """The row's domain on these operands: ``(relation, operand, constant, whether it holds on
    the operands' values)`` for each condition on a symbolic operand (a plain number's is known)."""
    if row.domain is None:
        return []
    found = []
    for rel, index, constant in row.domain(*operands):
        x = operands[index]
        value = number_value(x)
        if value is None:
            continue  # a value read from tensor data: no trace-time truth
        holds = bool(BY_RELATION[rel].evaluate(value, constant))
        found.append((rel, x, constant, holds))
    return found
