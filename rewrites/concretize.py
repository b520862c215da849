"""Makes every place that turns a possibly symbolic number into a Python value explicit.

These are the reads that thunder bakes into a trace silently: ``int(x)``, ``float(x)``,
``bool(x)``, ``pyval(x)``, ``x.value``, ``range(x)``, ``set(xs)``, ``sorted(xs)``, ``seq[x]`` and ``seq[a:b]`` (through
``__index__``), ``d[x]`` (through hashing). Each becomes a runtime call that returns the same
Python value and reports the concretization, so it can become a guard.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from rewrites._runtime_calls import is_runtime_call, runtime_call, strip_parens
from rewrites.call_renamer import CallRenamer

# Builtins by their qualified names only (``builtins.int``): a bare ``int`` is a module's own
# ``def int``. The bare ``pyval`` is thunder's own helper (a module-local definition of it).
CONCRETIZING_CALLS: dict[str, str] = {
    "builtins.int": "int_",
    "builtins.float": "float_",
    "builtins.bool": "truth",
    "builtins.range": "range_",
    "thunder.core.proxies.pyval": "pyval",
    "pyval": "pyval",
    # These hash or order their elements: each symbolic element's value is baked in.
    "builtins.set": "set_",
    "builtins.frozenset": "frozenset_",
    "builtins.sorted": "sorted_",
    "builtins.hash": "hash_",
    "builtins.round": "round_",
}


class ConcretizingCallTransformer(CallRenamer):
    """``int(x)``/``float(x)``/``bool(x)``/``range(...)``/``pyval(x)``/``set(xs)``/``sorted(xs)``... -> runtime."""

    TABLE = CONCRETIZING_CALLS


class ValueAttributeTransformer(cst.CSTTransformer):
    """``x.value`` (read) -> ``_mt.value_of(x)``; assignments to ``.value`` and method calls are kept."""

    def __init__(self) -> None:
        super().__init__()
        # Attributes that are not reads: callees (x.value() is a method) and store/del targets.
        self._not_reads: set[int] = set()

    def visit_Call(self, node: cst.Call) -> None:
        self._not_reads.add(id(node.func))

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._not_reads.add(id(node.target))

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._not_reads.add(id(node.target))

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._not_reads.add(id(node.target))

    def visit_Del(self, node: cst.Del) -> None:
        self._not_reads.add(id(node.target))

    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute) -> cst.BaseExpression:
        if original_node.attr.value != "value" or id(original_node) in self._not_reads:
            return updated_node
        return runtime_call("value_of", strip_parens(updated_node.value)).with_changes(
            lpar=updated_node.lpar, rpar=updated_node.rpar
        )


def _is_literal(expr: cst.BaseExpression) -> bool:
    return m.matches(
        expr,
        m.Integer()
        | m.SimpleString()
        | m.Name("None")
        | m.Name("True")
        | m.Name("False")
        | m.UnaryOperation(operator=m.Minus(), expression=m.Integer()),
    )


def _index(expr: cst.BaseExpression | None) -> cst.BaseExpression | None:
    if expr is None or _is_literal(expr) or is_runtime_call(expr, "index"):
        return expr
    return runtime_call("index", strip_parens(expr))


class SubscriptIndexTransformer(cst.CSTTransformer):
    """``s[i]`` -> ``s[_mt.index(i)]`` and ``s[a:b]`` -> ``s[_mt.index(a):_mt.index(b)]``.

    Literal indices are kept (nothing to concretize). Annotations are skipped: ``Sequence[int]``
    there is a type.
    """

    def visit_Annotation(self, node: cst.Annotation) -> bool:
        return False

    def leave_SubscriptElement(
        self, original_node: cst.SubscriptElement, updated_node: cst.SubscriptElement
    ) -> cst.SubscriptElement:
        sl = updated_node.slice
        if isinstance(sl, cst.Index):
            if sl.star is not None:
                return updated_node
            return updated_node.with_changes(slice=sl.with_changes(value=_index(sl.value)))
        if isinstance(sl, cst.Slice):
            return updated_node.with_changes(
                slice=sl.with_changes(lower=_index(sl.lower), upper=_index(sl.upper), step=_index(sl.step))
            )
        return updated_node
