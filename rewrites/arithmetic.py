"""Routes binary, unary and augmented arithmetic through the runtime.

``a - b`` becomes ``_mt.sub(a, b)``. On plain Python values the runtime computes the result
directly; on NumberProxies it records a thunder prim (``prims.sub``) in the caller's scope so the
result symbol has a producer in the trace.
"""

from __future__ import annotations

import libcst as cst

from rewrites._runtime_calls import runtime_call, strip_parens

BINARY_OPS: dict[type[cst.BaseBinaryOp], str] = {
    cst.Add: "add",
    cst.Subtract: "sub",
    cst.Multiply: "mul",
    cst.Divide: "truediv",
    cst.FloorDivide: "floordiv",
    cst.Modulo: "mod",
    cst.Power: "pow",
    cst.BitAnd: "bitand",
    cst.BitOr: "bitor",
    cst.BitXor: "xor",
    cst.LeftShift: "lshift",
    cst.RightShift: "rshift",
}

AUGMENTED_OPS: dict[type[cst.BaseAugOp], str] = {
    cst.AddAssign: "add",
    cst.SubtractAssign: "sub",
    cst.MultiplyAssign: "mul",
    cst.DivideAssign: "truediv",
    cst.FloorDivideAssign: "floordiv",
    cst.ModuloAssign: "mod",
    cst.PowerAssign: "pow",
    cst.BitAndAssign: "bitand",
    cst.BitOrAssign: "bitor",
    cst.BitXorAssign: "xor",
    cst.LeftShiftAssign: "lshift",
    cst.RightShiftAssign: "rshift",
}

UNARY_OPS: dict[type[cst.BaseUnaryOp], str] = {
    cst.Minus: "neg",
    cst.Plus: "pos",
    cst.BitInvert: "invert",
}


class ArithmeticTransformer(cst.CSTTransformer):
    """``a <op> b`` -> ``_mt.<op>(a, b)``; ``-a`` -> ``_mt.neg(a)``; ``x += y`` -> ``x = _mt.iop("add", x, y)``.

    Annotations are left alone: ``int | None`` there is a type, not arithmetic. Negative literals
    (``-1``) stay literals. ``not`` belongs to the conditions pass.
    """

    def visit_Annotation(self, node: cst.Annotation) -> bool:
        return False

    def leave_BinaryOperation(
        self, original_node: cst.BinaryOperation, updated_node: cst.BinaryOperation
    ) -> cst.BaseExpression:
        name = BINARY_OPS.get(type(updated_node.operator))
        if name is None:  # matrix multiply: never on numbers
            return updated_node
        call = runtime_call(name, strip_parens(updated_node.left), strip_parens(updated_node.right))
        return call.with_changes(lpar=updated_node.lpar, rpar=updated_node.rpar)

    def leave_UnaryOperation(
        self, original_node: cst.UnaryOperation, updated_node: cst.UnaryOperation
    ) -> cst.BaseExpression:
        name = UNARY_OPS.get(type(updated_node.operator))
        if name is None:
            return updated_node
        if isinstance(updated_node.expression, (cst.Integer, cst.Float, cst.Imaginary)):
            return updated_node
        call = runtime_call(name, strip_parens(updated_node.expression))
        return call.with_changes(lpar=updated_node.lpar, rpar=updated_node.rpar)

    def leave_AugAssign(self, original_node: cst.AugAssign, updated_node: cst.AugAssign) -> cst.Assign:
        # The runtime's iop keeps in-place semantics (list += extends the same list) for
        # non-proxy operands, so aliases of a mutated list still see the change.
        name = AUGMENTED_OPS[type(updated_node.operator)]
        value = runtime_call("iop", cst.SimpleString(f'"{name}"'), updated_node.target, updated_node.value)
        return cst.Assign(targets=[cst.AssignTarget(target=updated_node.target)], value=value)
