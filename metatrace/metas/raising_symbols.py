"""A symbol that raises leaves the trace's scopes as it found them.

``Symbol.__call__`` pushes a scope (``None`` around a prim's meta, a subsymbol list around a
composite) and pops it after the meta returns, with no ``finally``. Under constant values a
number op that raises (``10 // n`` with ``n == 0``) raises in plain Python before any symbol
runs; under symbolic values it raises inside ``prims.py_floordiv``'s meta, and a ``try/except
ZeroDivisionError`` in the user's code went on with the scope still pushed: everything after it
was recorded into the dead scope, and thunder failed with ``IndexError: pop from empty list``
where eager returned the except branch's result. The number op's row declares where it does not
raise (its ``domain`` in :mod:`metatrace.metas.number_ops`: ``n != 0``): the failed condition is
guarded (``n == 0``), so the entry that took the except branch serves only calls that raise too.
Both are steps (:func:`after_raise`, :func:`after_return`) of metatrace's one wrapper of
``Symbol.__call__``, :mod:`metatrace.grad.requires_grad`.
"""

from __future__ import annotations

from thunder.core.proxies import NumberProxy

from metatrace.state import compile_context
from metatrace.metas import concretizations, number_ops


# Rows whose domain is guarded where they succeed too (``math.sqrt(n)``: ``n >= 0``, else a call
# with a negative number reused the entry and raised from the compiled function, past the user's
# ``except``). A divisor's ``!= 0`` too: the guard algebra adds it only where the quotient reaches
# a guard, and ``r / r`` returned as is, then called with ``r == 0.0``, raised past the user's
# ``except ZeroDivisionError``. Powers guard theirs where they choose the row (metatrace.proxies.powers).
_GUARDED_WHERE_THEY_SUCCEED = frozenset(
    row.id for row in number_ops.PRIM_OPS if row.domain is not None and row.runtime_name != "pow")


def guard_domain(symbol_id, args) -> None:
    """Report the conditions of the number op ``symbol_id`` on symbolic operands, as they hold."""
    try:
        row = number_ops.BY_ID.get(symbol_id)
    except TypeError:
        return
    if row is None or row.domain is None or len(args) != row.arity:
        return
    if not all(isinstance(x, (NumberProxy, bool, int, float, complex)) for x in args):
        return  # the same prim on a tensor (``prims.sqrt(t)``): elementwise, it raises on no value
    for rel, x, constant, holds in number_ops.conditions(row, args):
        if isinstance(x, NumberProxy):
            concretizations.relation(rel, x, constant, holds)


def after_raise(symbol, args, trace, depth: int) -> None:
    """A call of ``symbol`` raised: the scopes it pushed on ``trace`` (those past ``depth``, the
    stack's length before the call) are popped, and the condition of its row's domain that failed
    is guarded."""
    if trace is not None:
        del trace.scopes[depth:]
    if compile_context.collector() is not None:
        guard_domain(symbol.id, args)


def after_return(symbol, args) -> None:
    """A call of ``symbol`` returned: a row whose domain is guarded where it succeeds too reports
    its conditions."""
    if symbol.id in _GUARDED_WHERE_THEY_SUCCEED and compile_context.collector() is not None:
        guard_domain(symbol.id, args)
