"""Python-executor implementations for the number prims that recorded arithmetic uses.

thunder's python executor runs ``prims.add``/``prims.sub``/... on numbers, but not
``prims.maximum``/``minimum`` (recorded for ``max``/``min``) nor ``ceil``/``floor``/``trunc``/
``bitwise_not``. They are registered on enable, for numbers only, and removed on disable.

Also registered: operators with Python's exact number semantics (``math.floor``, ``round``,
``int ** int``, ``where`` on three numbers), which ``metatrace.proxies.python_number_semantics`` routes NumberProxy's
dunders to; see below.
"""

from __future__ import annotations

from numbers import Number

import thunder.core.prims as prims
from thunder.core.proxies import NumberProxy
from thunder.core.transforms import nondifferentiable_vjp_symbols

from metatrace.metas import number_ops
from metatrace.metas.number_ops import number_type, number_value  # noqa: F401  (where callers look for them)

# (prim, operator name, implementation) for the number prims thunder's python executor does not
# run on numbers: the rows of metatrace.metas.number_ops that name an ``impl``.
_IMPLS = tuple((getattr(prims, row.name), row.impl, row.evaluate) for row in number_ops.PRIM_OPS if row.impl)
from metatrace.patching import Patch, item, member
from metatrace.state.object_tables import PYTHON_EXECUTOR_OPERATORS


def _no_gradient(sym):
    """The grad transform of a number op: its result, no gradient (a Python number has none in
    eager either). thunder counts a FloatProxy argument as differentiable and looks for the tensor
    rule (``sqrt``'s backward then gets no cotangent)."""

    def grad_transform(*args, **kwargs):
        return sym(*args, **kwargs)

    grad_transform.__name__ = f"metatrace_{sym.name}_no_gradient"
    return grad_transform


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
        rows.append(item(ex.implmap, sym.id,
                         lambda _, name=name, sym=sym: ImplInfo(symbol=ex.opmap[name], checker=_numbers_only,
                                                                grad_transform=_no_gradient(sym)),
                         "python implementations of the recorded number prims", wrap=True, label=implmap))
    for name, (fn, _) in _PY_OPS.items():
        op_name = f"metatrace_py_{name}"
        rows += [
            item(ex.opmap, op_name, _operator(op_name, meta=_py_meta(name), fn=fn), "Python number semantics",
                 wrap=True, label=opmap),
            item(PYTHON_EXECUTOR_OPERATORS, name, lambda _, op_name=op_name: ex.opmap[op_name], "(py_op finds it)", wrap=True,
                 label="metatrace.metas.python_executor"),
            # Numbers carry no gradient: the grad transform passes these through (as prims.floor).
            member(nondifferentiable_vjp_symbols, op_name, "Python-semantics ops carry no gradient", label=nondiff),
        ]
    # Python's ``//`` on numbers (metatrace.proxies.python_number_semantics sends float ``a // b`` to it): piecewise
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
# instead, see ``metatrace.proxies.python_number_semantics``.) All of them are non-differentiable for the grad transform. The guards cannot replay these operators: a guard on a value computed
# by one pins the inputs (correct; their rows in metatrace.metas.number_ops could learn ``replay``).

# name -> (Python implementation, result type from the argument types): the rows of
# metatrace.metas.number_ops.PY_OPS.
_PY_OPS = {row.name[len(number_ops.PY_OP_PREFIX):]: (row.evaluate, row.result) for row in number_ops.PY_OPS}


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
    return PYTHON_EXECUTOR_OPERATORS.get(name)


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
