"""Makes every truth test on a possibly symbolic value explicit.

A condition (``if``/``elif``/``while``/``assert`` test, the test of a conditional expression, the
first argument of ``_mt.check``) becomes ``_mt.truth(...)``; ``and``/``or``/``not`` inside a
condition distribute over it, so ``if a > 0 and b:`` becomes
``if _mt.truth(_mt.gt(a, 0)) and _mt.truth(b):`` and keeps Python's short-circuiting.

Outside conditions ``and``/``or`` return an operand, not a bool, so ``x or y`` becomes
``_mt.or_(x, lambda: y)`` and ``not x`` becomes ``_mt.not_(x)``: the runtime takes the truth of the
left operand (recording the guard) and evaluates the right one only when Python would.

A condition ``A or B`` (``A and B``) of two comparisons of plain operands (names, attributes,
literals: evaluating them early has no effect) becomes ``_mt.settled_first(True, A, lambda: B)``
(``False`` for ``and``): an operand that settles the answer without a guard decides alone, so the
other's relation is not guarded. thunder's cat meta checks ``sd == sad or d == dim`` for every
dimension: on the cat dimension Python compared the two lengths first and guarded them different.

Run after CheckCallTransformer: it recognises ``_mt.check`` calls.
"""

from __future__ import annotations

import libcst as cst

from rewrites._runtime_calls import is_runtime_call, runtime_call, strip_parens, thunk


def _is_truth_call(node: cst.BaseExpression) -> bool:
    return any(is_runtime_call(node, name) for name in ("truth", "not_", "settled_first"))


_RELATIONS = frozenset({"eq", "ne", "lt", "le", "gt", "ge"})  # the comparisons pass's runtime names


def _is_plain_operand(expr: cst.BaseExpression) -> bool:
    """A name, an attribute of one, a literal: nothing that calls, indexes or computes."""
    if isinstance(expr, cst.Attribute):
        return _is_plain_operand(expr.value)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        return isinstance(expr.expression, (cst.Integer, cst.Float))
    return isinstance(expr, (cst.Name, cst.Integer, cst.Float))


def _is_plain_comparison(expr: cst.BaseExpression) -> bool:
    return (isinstance(expr, cst.Call) and is_runtime_call(expr) and expr.func.attr.value in _RELATIONS
            and len(expr.args) == 2 and all(a.keyword is None and not a.star and _is_plain_operand(a.value) for a in expr.args))


def _settled_first(expr: cst.BooleanOperation) -> cst.BaseExpression:
    settles = cst.Name("True" if isinstance(expr.operator, cst.Or) else "False")
    call = runtime_call("settled_first", settles, strip_parens(expr.left), thunk(strip_parens(expr.right)))
    return call.with_changes(lpar=expr.lpar, rpar=expr.rpar)


# Tests that are bools whatever their operands: no truth to take, nothing to guard. Matched by
# name: thunder shadowing isinstance & co. would break thunder itself before it reached us.
_BOOL_BUILTINS = frozenset({"isinstance", "issubclass", "callable", "hasattr"})


def _is_plain_bool(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name):
        return expr.func.value in _BOOL_BUILTINS
    if isinstance(expr, cst.Comparison):  # only is / is not remain after the comparisons pass
        return all(isinstance(t.operator, (cst.Is, cst.IsNot)) for t in expr.comparisons)
    return False


def as_condition(expr: cst.BaseExpression) -> cst.BaseExpression:
    """The truth of ``expr`` with every operand of ``and``/``or``/``not`` made explicit."""
    if isinstance(expr, cst.BooleanOperation):
        if _is_plain_comparison(strip_parens(expr.left)) and _is_plain_comparison(strip_parens(expr.right)):
            return _settled_first(expr)
        return expr.with_changes(left=as_condition(expr.left), right=as_condition(expr.right))
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        return expr.with_changes(expression=as_condition(expr.expression))
    if _is_truth_call(expr) or _is_plain_bool(expr) or (isinstance(expr, cst.Name) and expr.value in ("True", "False")):
        return expr
    return runtime_call("truth", strip_parens(expr)).with_changes(lpar=expr.lpar, rpar=expr.rpar)


def _is_explicit_condition(expr: cst.BaseExpression) -> bool:
    """True when ``expr`` is already built from truth calls only (bool-valued, exact in Python)."""
    if isinstance(expr, cst.BooleanOperation):
        return _is_explicit_condition(expr.left) and _is_explicit_condition(expr.right)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        return _is_explicit_condition(expr.expression)
    return _is_truth_call(expr) or _is_plain_bool(expr) or (isinstance(expr, cst.Name) and expr.value in ("True", "False"))


class ConditionTransformer(cst.CSTTransformer):
    def __init__(self) -> None:
        super().__init__()
        # and/or/not nodes that sit in a condition position: as_condition rewrites them when the
        # enclosing statement is left, so the value-position rewrite must not touch them first.
        self._in_condition: set[int] = set()

    def _mark_condition(self, expr: cst.BaseExpression) -> None:
        if isinstance(expr, cst.BooleanOperation):
            self._in_condition.add(id(expr))
            self._mark_condition(expr.left)
            self._mark_condition(expr.right)
        elif isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
            self._in_condition.add(id(expr))
            self._mark_condition(expr.expression)

    def visit_Annotation(self, node: cst.Annotation) -> bool:
        return False

    def visit_If(self, node: cst.If) -> None:
        self._mark_condition(node.test)

    def visit_While(self, node: cst.While) -> None:
        self._mark_condition(node.test)

    def visit_Assert(self, node: cst.Assert) -> None:
        self._mark_condition(node.test)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self._mark_condition(node.test)

    def visit_CompIf(self, node: cst.CompIf) -> None:
        self._mark_condition(node.test)

    def visit_Call(self, node: cst.Call) -> None:
        if is_runtime_call(node, "check") and node.args:
            self._mark_condition(node.args[0].value)

    # Condition positions: rewritten on the way out, after their children.
    def leave_If(self, original_node: cst.If, updated_node: cst.If) -> cst.If:
        return updated_node.with_changes(test=as_condition(updated_node.test))

    def leave_While(self, original_node: cst.While, updated_node: cst.While) -> cst.While:
        return updated_node.with_changes(test=as_condition(updated_node.test))

    def leave_Assert(self, original_node: cst.Assert, updated_node: cst.Assert) -> cst.Assert:
        return updated_node.with_changes(test=as_condition(updated_node.test))

    def leave_IfExp(self, original_node: cst.IfExp, updated_node: cst.IfExp) -> cst.IfExp:
        return updated_node.with_changes(test=as_condition(updated_node.test))

    def leave_CompIf(self, original_node: cst.CompIf, updated_node: cst.CompIf) -> cst.CompIf:
        return updated_node.with_changes(test=as_condition(updated_node.test))

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        if is_runtime_call(updated_node, "check") and updated_node.args:
            first = updated_node.args[0]
            return updated_node.with_changes(args=[first.with_changes(value=as_condition(first.value)), *updated_node.args[1:]])
        return updated_node

    # Value positions: and/or/not whose operands are not already explicit truths.
    def leave_BooleanOperation(
        self, original_node: cst.BooleanOperation, updated_node: cst.BooleanOperation
    ) -> cst.BaseExpression:
        # Only the left operand's truth is taken: when it is a bool already, Python's and/or is exact.
        if id(original_node) in self._in_condition or _is_explicit_condition(updated_node.left):
            return updated_node
        name = "and_" if isinstance(updated_node.operator, cst.And) else "or_"
        call = runtime_call(name, strip_parens(updated_node.left), thunk(strip_parens(updated_node.right)))
        return call.with_changes(lpar=updated_node.lpar, rpar=updated_node.rpar)

    def leave_UnaryOperation(
        self, original_node: cst.UnaryOperation, updated_node: cst.UnaryOperation
    ) -> cst.BaseExpression:
        if not isinstance(updated_node.operator, cst.Not):
            return updated_node
        if id(original_node) in self._in_condition or _is_explicit_condition(updated_node.expression):
            return updated_node
        return runtime_call("not_", strip_parens(updated_node.expression)).with_changes(
            lpar=updated_node.lpar, rpar=updated_node.rpar
        )
