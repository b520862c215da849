"""Marks the size-oblivious sites of the rewritten metas in the generated code itself.

A decision on a size read from tensor data (no trace-time value) is made only where it holds for
every value of the size, or where the site says that the answer it gives takes a path right for
the values it excludes (torch's ``guard_size_oblivious(expr)``, said at the call). The metas
listed in :data:`SIZE_OBLIVIOUS_METAS` run their body inside
``with _mt.size_oblivious("<meta name>"):`` (the runtime's table of answers for that name is
``metatrace.metas.oblivious_answers.REWRITTEN_META_SITES``; a test keeps the two lists equal). The
broadcast check of the metas in :data:`ONE_OR_SAME_CHECKS`, ``n == 1 or target == n``, becomes
``_mt.one_or_same(n, lambda: target, lambda: <the check as rewritten>)``, which answers it with no
guard where the target is ``n`` itself (``metatrace.metas.settled_checks``).

Runs last: it matches the conditions pass's output (``_mt.truth(_mt.eq(n, 1)) or
_mt.truth(_mt.eq(target, n))``). A listed meta without the check it is listed for fails the
rewrite (:class:`SiteNotFound`): thunder changed the code the site was written for.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from rewrites._runtime_calls import RUNTIME_NAME, runtime_call, thunk

SIZE_OBLIVIOUS_METAS = frozenset({"broadcast_in_dim_meta", "_argmin_argmax_meta", "take_meta"})
ONE_OR_SAME_CHECKS = frozenset({"broadcast_in_dim_meta"})


class SiteNotFound(ValueError):
    """A meta listed as a site no longer has the code the site was written for."""


def _truth_of_eq(left, right) -> m.Call:
    """The matcher of ``_mt.truth(_mt.eq(left, right))``."""
    runtime = m.Name(RUNTIME_NAME)
    eq = m.Call(func=m.Attribute(value=runtime, attr=m.Name("eq")), args=[m.Arg(left), m.Arg(right)])
    return m.Call(func=m.Attribute(value=runtime, attr=m.Name("truth")), args=[m.Arg(eq)])


def _one_or_same(node: cst.BooleanOperation) -> cst.Call | None:
    """``_mt.one_or_same(n, lambda: target, lambda: node)`` where ``node`` is the rewritten
    ``n == 1 or target == n`` (``n`` a name), else None."""
    if not isinstance(node.operator, cst.Or):
        return None
    if not m.matches(node.left, _truth_of_eq(m.Name(), m.Integer("1"))):
        return None
    size = node.left.args[0].value.args[0].value
    if not m.matches(node.right, _truth_of_eq(m.DoNotCare(), m.Name(size.value))):
        return None
    target = node.right.args[0].value.args[0].value
    as_written = node.with_changes(lpar=[], rpar=[])
    return runtime_call("one_or_same", size, thunk(target), thunk(as_written)).with_changes(lpar=node.lpar, rpar=node.rpar)


def _is_docstring(statement: cst.BaseStatement) -> bool:
    return m.matches(statement, m.SimpleStatementLine(body=[m.Expr(m.SimpleString() | m.ConcatenatedString())]))


def _inside_site(function: cst.FunctionDef) -> cst.FunctionDef:
    """``function`` with its body (after the docstring) inside ``with _mt.size_oblivious(name):``."""
    body = list(function.body.body)
    head = body[:1] if body and _is_docstring(body[0]) else []
    if len(body) > len(head):  # the blank line after a docstring is not the with's first line
        first = body[len(head)]
        body[len(head)] = first.with_changes(leading_lines=[line for line in first.leading_lines if line.comment])
    site = cst.With(
        items=[cst.WithItem(item=runtime_call("size_oblivious", cst.SimpleString(f'"{function.name.value}"')))],
        body=cst.IndentedBlock(body=body[len(head):]),
    )
    return function.with_changes(body=function.body.with_changes(body=[*head, site]))


class SizeObliviousSiteTransformer(cst.CSTTransformer):
    """Enters each listed meta's site around its body; answers its broadcast check by
    ``_mt.one_or_same``. Only top-level functions are sites (their names are the metas')."""

    def __init__(self) -> None:
        super().__init__()
        self._depth = 0
        self._checks = 0  # one_or_same checks made in the listed function being left

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self._depth += 1
        if self._depth == 1:
            self._checks = 0
        return self._depth > 1 or node.name.value in SIZE_OBLIVIOUS_METAS

    def leave_BooleanOperation(self, original_node, updated_node):
        if self._depth != 1 or (call := _one_or_same(updated_node)) is None:
            return updated_node
        self._checks += 1
        return call

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef):
        self._depth -= 1
        name = updated_node.name.value
        if self._depth or name not in SIZE_OBLIVIOUS_METAS:
            return updated_node
        if name in ONE_OR_SAME_CHECKS and self._checks == 0:
            raise SiteNotFound(f"{name}: no check 'n == 1 or target == n' to answer with _mt.one_or_same")
        if not isinstance(updated_node.body, cst.IndentedBlock):
            raise SiteNotFound(f"{name}: a one-line body cannot enter its size-oblivious site")
        return _inside_site(updated_node)
