"""Python-executor implementations for the number prims that recorded arithmetic uses.

thunder's python executor runs ``prims.add``/``prims.sub``/... on numbers, but not
``prims.maximum``/``minimum`` (recorded for ``max``/``min``) nor ``ceil``/``floor``/``trunc``/
``bitwise_not``. They are registered on enable, for numbers only, and removed on disable.

Also registered: operators with Python's exact number semantics (``math.floor``, ``round``,
``int ** int``, ``where`` on three numbers), which ``metatrace.proxies.number_semantics`` routes NumberProxy's
dunders to; see below.
"""

from __future__ import annotations

import builtins
import math
import operator
from numbers import Number

import thunder.core.prims as prims
from thunder.core.proxies import NumberProxy
from thunder.core.transforms import nondifferentiable_vjp_symbols

from metatrace.patching import Patch, item, member

_IMPLS = (
    (prims.maximum, "metatrace_max", builtins.max),
    (prims.minimum, "metatrace_min", builtins.min),
    (prims.ceil, "metatrace_ceil", math.ceil),
    (prims.floor, "metatrace_floor", math.floor),
    (prims.trunc, "metatrace_trunc", math.trunc),
    (prims.bitwise_not, "metatrace_invert", operator.invert),
)


def _numbers_only(*args) -> bool:
    return all(isinstance(a, (Number, NumberProxy)) for a in args)


def _operator(name: str, **kwargs):
    def register(previous):
        from thunder.executors.pythonex import ex

        # register_operator stores the new symbol in ex.opmap itself; the row stores the same object
        return ex.register_operator(name, **kwargs)

    return register


def patches() -> list[Patch]:
    """Registers the implementations and the Python-semantics operators while enabled."""
    from thunder.executors.pythonex import ex
    from thunder.extend import ImplInfo

    opmap, implmap = "executor python.opmap", "executor python.implmap"
    nondiff = "thunder.core.transforms.nondifferentiable_vjp_symbols"
    rows = []
    for sym, name, fn in _IMPLS:
        rows.append(item(ex.opmap, name, _operator(name, like=sym, fn=fn), "number prims the prologue replays",
                         wrap=True, label=opmap))
        rows.append(item(ex.implmap, sym.id, lambda _, name=name: ImplInfo(symbol=ex.opmap[name], checker=_numbers_only),
                         "python implementations of the recorded number prims", wrap=True, label=implmap))
    for name, (fn, _) in _PY_OPS.items():
        op_name = f"metatrace_py_{name}"
        rows += [
            item(ex.opmap, op_name, _operator(op_name, meta=_py_meta(name), fn=fn), "Python number semantics",
                 wrap=True, label=opmap),
            item(_py_symbols, name, lambda _, op_name=op_name: ex.opmap[op_name], "(py_op finds it)", wrap=True,
                 label="metatrace.metas.python_executor"),
            # Numbers carry no gradient: the grad transform passes these through (as prims.floor).
            member(nondifferentiable_vjp_symbols, op_name, "Python-semantics ops carry no gradient", label=nondiff),
        ]
    # Python's ``//`` on numbers (metatrace.proxies.number_semantics sends float ``a // b`` to it): piecewise
    # constant like floor, which thunder lists; without this the grad transform finds no rule.
    rows.append(member(nondifferentiable_vjp_symbols, prims.PrimIDs.PY_FLOORDIV, "py_floordiv carries no gradient",
                       label=nondiff))
    return rows


# ---------------------------------------------------------------------------------------------
# Python's own number semantics on symbolic numbers
# ---------------------------------------------------------------------------------------------
#
# thunder 0.2.6 lowers Python's number builtins on NumberProxies through its tensor ops, which
# do not match Python: ``math.floor(-3.25)`` became ``floor(int(-3.25))`` (-3), ``7 ** -2`` an
# int (0), ``round(2.5)`` fails its meta's type check, ``round(x, n)`` has no method, and
# ``prims.where`` has no meta for three numbers (clang's compositions on numbers). While enabled, these run
# as python-executor operators whose implementation *is* the Python function: the trace
# computes them at run time (symbolic, no guard), with the result type Python gives, which
# depends only on the argument types (checked by the prologue's structure guard), except
# ``int ** int``, whose type depends on the exponent's sign: that sign is guarded.
# (``math.floor``/``ceil``/``trunc`` and float ``//`` are written with replayable number prims
# instead, see ``metatrace.proxies.number_semantics``.) All of them are non-differentiable for the grad transform. The guards cannot replay these operators: a guard on a value computed
# by one pins the inputs (correct; guards.REPLAYABLE could learn them).

_NUMBER_TYPES = (bool, int, float, complex)


def number_type(x) -> type:
    if isinstance(x, NumberProxy):
        return x.python_type
    return type(x)


def _promoted(*xs) -> type:
    return _NUMBER_TYPES[max(_NUMBER_TYPES.index(number_type(x)) for x in xs)]


def number_value(x):
    return x.value if isinstance(x, NumberProxy) else x


def _number_where(pred, a, b):
    return _promoted(a, b)(a if pred else b)


def _round_digits(x, ndigits):
    return builtins.round(x, ndigits)


# name -> (Python implementation, result type from the argument types)
_PY_OPS = {
    "where": (_number_where, lambda pred, a, b: _promoted(a, b)),
    "round": (builtins.round, lambda x: int),
    "round_digits": (_round_digits, lambda x, n: int if number_type(x) in (bool, int) else float),
    "pow_int": (operator.pow, lambda a, b: int),
    "pow_float": (lambda a, b: float(operator.pow(a, b)), lambda a, b: float),
    # an int compared with a float compares exactly in Python (2**53 + 1 != 2.0**53); thunder's
    # comparison prims promote the int to float first
    **{f"cmp_{op}": (getattr(operator, op), lambda a, b: bool) for op in ("eq", "ne", "lt", "le", "gt", "ge")},
    "lshift": (operator.lshift, lambda a, b: int),
    "rshift": (operator.rshift, lambda a, b: int),
}
_py_symbols: dict = {}


def _py_meta(name: str):
    fn, result_type = _PY_OPS[name]

    def meta(*args):
        from thunder.core.proxies import numberproxy

        typ = result_type(*args)
        value = fn(*(number_value(a) for a in args))
        return numberproxy(typ, typ(value))

    meta.__name__ = f"metatrace_py_{name}_meta"
    return meta


def py_op(name: str):
    """The registered operator computing ``_PY_OPS[name]`` (a Symbol), or None when disabled."""
    return _py_symbols.get(name)


def exact_comparison(a, b) -> str | None:
    """The comparison operator name when ``a`` and ``b`` are an integer and a float (Python
    compares them exactly: the python executor's operator, not thunder's promoting prim)."""
    types = {number_type(a), number_type(b)}
    if (
        float in types
        and types & {int, bool}
        and any(isinstance(x, NumberProxy) for x in (a, b))
        and number_value(a) is not None  # a value read from tensor data has none: thunder's own
        and number_value(b) is not None
    ):
        return "exact"
    return None


def comparison_op(sym_id) -> str | None:
    """``"lt"`` for the exact comparison operator ``metatrace_py_cmp_lt``, else None."""
    for op in ("eq", "ne", "lt", "le", "gt", "ge"):
        sym = _py_symbols.get(f"cmp_{op}")
        if sym is not None and sym.id == sym_id:
            return op
    return None
