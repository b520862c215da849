"""Routes comparisons and membership tests through the runtime.

``a <= b`` becomes ``_mt.le(a, b)``: on NumberProxies the runtime returns a symbolic boolean that
remembers the relation, so that the branch or check consuming it can be guarded by the relation
itself rather than by the operands' values. Chains keep Python's semantics (each middle operand
evaluated once, evaluation stops at the first false link) through ``_mt.compare_chain`` with
deferred operands. ``is``/``is not`` compare identities and are left alone.
"""

from __future__ import annotations

import libcst as cst

from rewrites._runtime_calls import runtime_call, strip_parens, thunk

COMPARISON_OPS: dict[type[cst.BaseCompOp], str] = {
    cst.Equal: "eq",
    cst.NotEqual: "ne",
    cst.LessThan: "lt",
    cst.LessThanEqual: "le",
    cst.GreaterThan: "gt",
    cst.GreaterThanEqual: "ge",
    cst.In: "in",
    cst.NotIn: "not in",
    cst.Is: "is",
    cst.IsNot: "is not",
}

IDENTITY_OPS = (cst.Is, cst.IsNot)


def _single(op: cst.BaseCompOp, left: cst.BaseExpression, right: cst.BaseExpression) -> cst.Call:
    if isinstance(op, cst.In):
        return runtime_call("contains", right, left)
    if isinstance(op, cst.NotIn):
        return runtime_call("not_contains", right, left)
    return runtime_call(COMPARISON_OPS[type(op)], left, right)


class ComparisonTransformer(cst.CSTTransformer):
    """``a < b`` -> ``_mt.lt(a, b)``, ``x in s`` -> ``_mt.contains(s, x)``,
    ``a < b <= c`` -> ``_mt.compare_chain(a, "lt", lambda: b, "le", lambda: c)``."""

    def visit_Annotation(self, node: cst.Annotation) -> bool:
        return False

    def leave_Comparison(self, original_node: cst.Comparison, updated_node: cst.Comparison) -> cst.BaseExpression:
        targets = updated_node.comparisons
        left = strip_parens(updated_node.left)
        if len(targets) == 1:
            (target,) = targets
            if isinstance(target.operator, IDENTITY_OPS):
                return updated_node
            call = _single(target.operator, left, strip_parens(target.comparator))
        else:
            args: list[cst.BaseExpression] = [left]
            for target in targets:
                args.append(cst.SimpleString(f'"{COMPARISON_OPS[type(target.operator)]}"'))
                args.append(thunk(strip_parens(target.comparator)))
            call = runtime_call("compare_chain", *args)
        return call.with_changes(lpar=updated_node.lpar, rpar=updated_node.rpar)
