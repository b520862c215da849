"""What the rewritten metas call for ``+``, ``*``, ``//``, ``max(a, b)``, ``a += b``...

On NumberProxies while a recorder is active, arithmetic is recorded as an ordinary thunder bound
symbol (``prims.sub``, ``prims.maximum``, ...) in the scope of the prim's caller, so the result has
a producer in the trace; an identity (``x - 0``) is folded instead, and so is a chain of constant
offsets (``(x + 1) - 1`` is ``x``). Otherwise each operator is Python's.

The recording operators are one row each below, read off ``number_ops``' rows with a
``runtime_name`` (the row gives the prim and its value on numbers; the row's name here is that name).
"""

from __future__ import annotations

import inspect
import operator
from collections.abc import Callable
from numbers import Number

import thunder.core.prims as prims
from thunder.core.proxies import IntegerProxy, NumberProxy, TensorProxy
from thunder.core.proxies import pyval as thunder_pyval

from metatrace.state.object_tables import OFFSET_CHAINS
from metatrace.metas import number_ops, unbacked
from metatrace.metas.folds import MISSING, fold_add, fold_floordiv, fold_mod, fold_mul, fold_sub, is_symbolic_int
from metatrace.metas.record_state import current_recorder
from metatrace.metas.record_state import record as record_op
from metatrace.metas.runtime_truth import concretize, is_symbolic


def _operator(sym, fn: Callable, arity: int, fold: Callable | None = None) -> Callable:
    """An arithmetic operator of ``arity`` operands that records ``sym`` on symbolic numbers (``fn``
    computes the value).

    ``fold(a, b)`` returns an operand when the operation is an identity (``x - 0``) so nothing
    needs recording, or ``MISSING``.
    """

    def op(*args):
        if current_recorder() is None or not any(map(is_symbolic, args)):
            if any(thunder_pyval(a) is None for a in args if is_symbolic(a)):
                # outside a compile (thunder's check_trace re-running metas): the identity the
                # compile folded (``n + 0`` is n), or the symbol it recorded (unbacked.recorded_op)
                if fold is not None and (folded := fold(*args)) is not MISSING:
                    return folded
                if (recorded := unbacked.recorded_op(sym.name, args)) is not None:
                    return recorded
                if sym.name == "mul" and all(isinstance(a, IntegerProxy) or type(a) is int for a in args):
                    return unbacked.product_outside_compile(*args)
            return fn(*args)
        if not all(isinstance(a, (Number, NumberProxy)) and not isinstance(a, TensorProxy) for a in args):
            return fn(*args)
        if fold is not None and (folded := fold(*args)) is not MISSING:
            return folded
        values = tuple(map(thunder_pyval, args))
        if any(v is None for v in values):  # an operand read from tensor data: no value
            return _record_unbacked(sym, *args)
        return record_op(sym, fn(*values), *args)

    op.__name__ = fn.__name__
    op.__signature__ = inspect.Signature([inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in "ab"[:arity]])
    return op


# Identities fold for an integer symbol and an integer literal only: ``i * 1.0`` is a float, and
# for a float ``-0.0 + 0`` is 0.0 and ``inf // 1`` is nan, so a float (or a float literal) is
# recorded. One table for the rewritten metas' operators and NumberProxy's (proxies.number_concretizations).
_ROW_FOLDS = {"add": fold_add, "sub": fold_sub, "mul": fold_mul, "py_floordiv": fold_floordiv, "remainder": fold_mod}
_ROWS = {row.runtime_name: row for row in number_ops.PRIM_OPS if row.runtime_name}


def _row_operator(runtime_name: str) -> Callable:
    """The recording operator of the ``number_ops`` row whose ``runtime_name`` this is."""
    row = _ROWS[runtime_name]
    return _operator(getattr(prims, row.name), row.evaluate, row.arity, _ROW_FOLDS.get(row.name))


# The recording operators, one per number_ops row with a runtime_name (add and sub are wrapped
# below to fold chains of offsets first; max_ and min_ of the runtime combine with maximum/minimum).
recorded_add = _row_operator("recorded_add")
recorded_sub = _row_operator("recorded_sub")
mul = _row_operator("mul")
floordiv = _row_operator("floordiv")
mod = _row_operator("mod")
pow = _row_operator("pow")  # noqa: A001 (the name the rewrites emit for ``**``)
bitand = _row_operator("bitand")
bitor = _row_operator("bitor")
xor = _row_operator("xor")
neg = _row_operator("neg")
abs_ = _row_operator("abs_")
maximum = _row_operator("maximum")
minimum = _row_operator("minimum")
ceil = _row_operator("ceil")
floor = _row_operator("floor")
trunc = _row_operator("trunc")
invert = _row_operator("invert")


def _record_unbacked(sym, *args):  # an operand has no value: neither has the result (metas.unbacked)
    if (folded := unbacked.fold_division(sym.name, *args)) is not None:
        return folded
    python_type = int if all(number_ops.number_type(a) in (int, bool) for a in args) else float
    return record_op(sym, None, *args, python_type=python_type, tags=unbacked.tag_of(sym.name, *args))


# ---------------------------------------------------------------------------------------------
# Chains of constant offsets (each number's chain: state.object_tables.OFFSET_CHAINS)
# ---------------------------------------------------------------------------------------------


def forget_offset(a) -> None:
    """``a`` is no longer folded through its chain of offsets (its base lives in another trace)."""
    entry = OFFSET_CHAINS.get(a, create=False)
    if entry:
        entry.clear()


def _offset(a, k: int):
    """``a + k`` for a symbolic int and a literal int, folding chains of constant offsets:
    ``(x + 1) - 1`` is ``x`` and ``(x + 1) + 2`` is ``x + 3``, so shape formulas like
    ``(stop - start + stride - 1) // stride`` record only what they compute."""
    recorder = current_recorder()
    base, total, scope = OFFSET_CHAINS.get(a, create=False) or (a, 0, recorder)
    if scope is not recorder:  # the chain's base may not be bound in this scope: start from a
        base, total = a, 0
    total += k
    if total == 0:
        return base
    if thunder_pyval(base) is None:  # no value (read from tensor data)
        if recorder is None:  # outside a compile (a checker re-running metas): the compile's symbol
            name, k = ("add", total) if total > 0 else ("sub", -total)
            out = unbacked.recorded_op(name, (base, k))
            if out is None:
                out = base + total if total > 0 else base - (-total)
        else:
            out = _record_unbacked(prims.add, base, total) if total > 0 else _record_unbacked(prims.sub, base, -total)
        OFFSET_CHAINS.get(out)[:] = (base, total, recorder)
        return out
    value = thunder_pyval(base) + total
    out = record_op(prims.add, value, base, total) if total > 0 else record_op(prims.sub, value, base, -total)
    OFFSET_CHAINS.get(out)[:] = (base, total, recorder)
    return out


def _offsets(a) -> bool:  # while recording; on a number with no value always (a checker's re-run)
    return current_recorder() is not None or (is_symbolic_int(a) and thunder_pyval(a) is None)


def add(a, b):
    if is_symbolic_int(a) and type(b) is int and _offsets(a):
        return _offset(a, b)
    if is_symbolic_int(b) and type(a) is int and _offsets(b):
        return _offset(b, a)
    return recorded_add(a, b)


def sub(a, b):
    if is_symbolic_int(a) and type(b) is int and _offsets(a):
        return _offset(a, -b)
    return recorded_sub(a, b)


# The identity fold of each operator NumberProxy's arithmetic methods call (proxies.number_concretizations
# folds ``size - size`` and ``n * 1`` there with the same rules); mul and floordiv are rows' operators.
FOLDS = {add: fold_add, sub: fold_sub, mul: fold_mul, floordiv: fold_floordiv, mod: fold_mod}


# ---------------------------------------------------------------------------------------------
# Operators with no number_ops row of their own
# ---------------------------------------------------------------------------------------------

# Python's ``/`` on floats; prims.div's own evaluation truncates ints (see truediv).
_true_division = _operator(prims.div, operator.truediv, 2)


def truediv(a, b):
    # prims.div is C-style (truncating) on integers, so only float division can be recorded;
    # int / int on a symbol is rare in metas and is concretized instead.
    if (is_symbolic(a) or is_symbolic(b)) and current_recorder() is not None:
        if isinstance(thunder_pyval(a), float) or isinstance(thunder_pyval(b), float):
            return _true_division(a, b)
        return concretize(a, "int / int") / concretize(b, "int / int")
    return a / b


def lshift(a, b):
    return concretize(a, "<<") << concretize(b, "<<")


def rshift(a, b):
    return concretize(a, ">>") >> concretize(b, ">>")


def pos(a):
    return a if is_symbolic(a) else +a


# ``a <op>= b``: the recording operator and Python's in-place one, by the name the rewriter uses.
_INPLACE = {"add": (add, operator.iadd), "sub": (sub, operator.isub), "mul": (mul, operator.imul),
            "truediv": (truediv, operator.itruediv), "floordiv": (floordiv, operator.ifloordiv),
            "mod": (mod, operator.imod), "pow": (pow, operator.ipow), "bitand": (bitand, operator.iand),
            "bitor": (bitor, operator.ior), "xor": (xor, operator.ixor), "lshift": (lshift, operator.ilshift),
            "rshift": (rshift, operator.irshift)}


def iop(name: str, a, b):
    """``a <op>= b``: records on symbols, mutates in place otherwise (``lst += [x]``)."""
    recording, inplace = _INPLACE[name]
    if is_symbolic(a) or is_symbolic(b):
        return recording(a, b)
    return inplace(a, b)
