"""Routes numeric builtins that combine several numbers through the runtime.

``max(a, b)`` becomes ``_mt.max_(a, b)``: on NumberProxies the runtime records ``prims.maximum``
(and ``prims.add``/``prims.mul`` for ``sum``/``math.prod``/``reduce(operator.add, ...)``), so the
result has a producer instead of being a value picked by a silent comparison. Calls are matched by
qualified name, so a local variable that shadows a builtin is left alone. A builtin's qualified name
is always ``builtins.<name>``; the bare name is what libcst gives a module's own ``def max``, which
is not the builtin and is not rewritten.
"""

from __future__ import annotations

from rewrites.call_renamer import CallRenamer

BUILTIN_CALLS: dict[str, str] = {
    "builtins.max": "max_",
    "builtins.min": "min_",
    "builtins.abs": "abs_",
    "builtins.sum": "sum_",
    "builtins.divmod": "divmod_",
    "functools.reduce": "reduce_",
    "math.prod": "prod_",
    "math.ceil": "ceil",
    "math.floor": "floor",
    "math.trunc": "trunc",
}


class BuiltinCallTransformer(CallRenamer):
    """``max``/``min``/``abs``/``sum``/``divmod``/``functools.reduce``/``math.prod``/``math.ceil``... -> runtime."""

    TABLE = BUILTIN_CALLS
