"""Building and recognising calls into metatrace's runtime from rewritten code.

Every transformer emits calls of the form ``_mt.<name>(...)``; the generated module binds ``_mt``
to ``metatrace.metas.runtime``. Keeping the name and the call builder in one place lets the
transformers recognise each other's output (e.g. the conditions pass skips ``_mt.truth`` calls).
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

RUNTIME_NAME = "_mt"


def runtime_attr(name: str) -> cst.Attribute:
    return cst.Attribute(value=cst.Name(RUNTIME_NAME), attr=cst.Name(name))


def runtime_call(name: str, *args: cst.BaseExpression | cst.Arg) -> cst.Call:
    """``_mt.name(*args)``; plain expressions become positional arguments."""
    return cst.Call(
        func=runtime_attr(name),
        args=[a if isinstance(a, cst.Arg) else cst.Arg(value=a) for a in args],
    )


def is_runtime_call(node: cst.CSTNode, name: str | None = None) -> bool:
    attr = m.Name(name) if name is not None else m.Name()
    return m.matches(node, m.Call(func=m.Attribute(value=m.Name(RUNTIME_NAME), attr=attr)))


def thunk(expr: cst.BaseExpression) -> cst.Lambda:
    """``lambda: expr``: defers evaluation so the runtime keeps Python's short-circuiting."""
    return cst.Lambda(params=cst.Parameters(), body=expr)


# Expressions whose parentheses are redundant as a call argument or a lambda body. Tuples,
# generator expressions and := keep theirs: there the parentheses are part of the syntax.
_PAREN_FREE = (
    cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.BinaryOperation, cst.UnaryOperation,
    cst.Comparison, cst.BooleanOperation, cst.IfExp, cst.Integer, cst.Float, cst.SimpleString,
)


def strip_parens(expr: cst.BaseExpression) -> cst.BaseExpression:
    """Drops redundant parentheses: a call's own parentheses delimit the argument."""
    if isinstance(expr, _PAREN_FREE) and expr.lpar:
        return expr.with_changes(lpar=[], rpar=[])
    return expr
