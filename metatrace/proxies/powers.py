"""``a ** b`` on symbolic numbers has the type and value Python gives it.

The result type of a power depends on the values: ``int ** int`` is a float where the exponent
is negative, a float power of a negative base is complex (``(-4) ** 0.5``), and 0 to a negative
power raises. thunder's ``NumberProxy.__pow__`` gave a float proxy for ``n ** 0.5`` whatever the
sign of ``n`` (``isinstance(n ** 0.5, float)`` was True for ``n = -4``, unguarded). The rows of
:mod:`metatrace.metas.number_ops` declare where their type holds (``domain``); here those
conditions are guarded as relations (``n >= 0``), and where no row's type holds (a negative base
with a non-integral exponent) the operands are baked in and Python computes the complex number.
"""

from __future__ import annotations

from thunder.core.proxies import NumberProxy

from metatrace.metas import concretizations, number_ops, python_executor
from metatrace.metas.relations import Relation
from metatrace.metas.raising_symbols import guard_domain
from metatrace.metas.torch_ops.torch_metas import tracing

_WHY = "a power whose type depends on the exponent's value (a negative base)"


def power(a, b, original):
    """``a ** b``; ``original()`` is thunder's."""
    types = (python_executor.number_type(a), python_executor.number_type(b))
    if not tracing() or complex in types or not all(t in (bool, int, float) for t in types):
        return original()  # (``n ** t`` with a tensor: elementwise, thunder's)
    if all(t in (bool, int) for t in types):
        # int ** int is an int, unless the exponent is negative: its type depends on the sign.
        name = "pow_float" if python_executor.number_value(b) < 0 else "pow_int"
        guard_domain(number_ops.PY_OP_PREFIX + name, (a, b))
        return python_executor.py_op(name)(a, b)
    found = number_ops.conditions(number_ops.BY_ID[number_ops.PrimIDs.POW], (a, b))
    for rel, x, constant, holds in found:
        if isinstance(x, NumberProxy):
            concretizations.relation(rel, x, constant, holds)
    if all(holds for rel, _, constant, holds in found if Relation(rel) is Relation.GE):
        return original()  # a real power (or 0 to a negative power: thunder's raises, as eager)
    # a negative base: real only for an integral exponent, which no relation states
    exponent = _value(b)
    if float(exponent).is_integer():
        return original()
    return _value(a) ** exponent


def _value(x):
    if isinstance(x, NumberProxy):
        concretizations.bake_in(x, x.value, _WHY)
        return x.value
    return x


def power_method(name: str, original):
    if name == "__rpow__":
        return lambda self, other: power(other, self, lambda: original(self, other))
    return lambda self, other: power(self, other, lambda: original(self, other))
