"""Finds constructs the rewrite cannot make safe, so their function falls back to static values.

Each finding names the construct and its line. A prim whose meta (or a helper it calls) has a
finding is a fallback: it runs thunder's original meta with its symbolic inputs made static.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
import libcst.matchers as m
from libcst.metadata import QualifiedNameProvider

# Builtins that convert or compare their (possibly symbolic) arguments without going through
# the runtime (set, sorted, hash, round... are rewritten to concretizing runtime calls).
COMPARING_BUILTINS = frozenset({"builtins.complex", "complex"})
# Sequence methods that compare elements with == internally.
COMPARING_METHODS = frozenset({"index", "count", "remove", "sort"})


@dataclass(frozen=True)
class Finding:
    construct: str
    line: int

    def __str__(self) -> str:
        return f"{self.construct} (line {self.line})"


_MARKER = "__metatrace_finding__"


def line_of(fn: cst.FunctionDef, node: cst.CSTNode, def_line: int) -> int:
    """Line of ``node`` in the original file, given the line of ``fn``'s ``def`` there.

    Rendering with a marker is cheap for the few nodes that have findings, and spares the
    codegen a PositionProvider pass over every rewritten function.
    """
    marked = cst.Module(body=[fn.with_changes(leading_lines=[])]).deep_replace(node, cst.Name(_MARKER))
    lines = marked.code.splitlines()
    def_index = next(i for i, ln in enumerate(lines) if ln.startswith(("def ", "async def ")))
    marker_index = next(i for i, ln in enumerate(lines) if _MARKER in ln)
    return def_line + marker_index - def_index


class UnsupportedConstructCollector(cst.CSTVisitor):
    """Collects (top-level function, node, construct) for each finding in the visited module."""

    METADATA_DEPENDENCIES = (QualifiedNameProvider,)

    def __init__(self) -> None:
        super().__init__()
        self.raw: list[tuple[cst.FunctionDef, cst.CSTNode, str]] = []
        self._function: list[cst.FunctionDef] = []
        self._deferred_depth = 0  # inside an and/or operand or comparison chain that becomes a lambda
        # and/or in a condition position stay and/or (of explicit truths): no lambda, no scope change
        self._conditions: set[int] = set()

    def _add(self, node: cst.CSTNode, construct: str) -> None:
        self.raw.append((self._function[0], node, construct))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._function.append(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._function.pop()

    def visit_Call(self, node: cst.Call) -> None:
        names = {q.name for q in self.get_metadata(QualifiedNameProvider, node.func, set())}
        for name in sorted(names & COMPARING_BUILTINS):
            self._add(node, f"call to {name.removeprefix('builtins.')}() converts numbers silently")
        if m.matches(node.func, m.Attribute(attr=m.Name())) and node.func.attr.value in COMPARING_METHODS:
            self._add(node, f"method .{node.func.attr.value}() compares elements silently")

    def _condition(self, test: cst.BaseExpression) -> None:
        if isinstance(test, cst.BooleanOperation):
            self._conditions.add(id(test))
            self._condition(test.left)
            self._condition(test.right)

    def visit_If(self, node: cst.If) -> None:
        self._condition(node.test)

    def visit_While(self, node: cst.While) -> None:
        self._condition(node.test)

    # Operands that the rewrite turns into lambdas change scope for these constructs.
    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> None:
        if id(node) not in self._conditions:
            self._deferred_depth += 1

    def leave_BooleanOperation(self, original_node: cst.BooleanOperation) -> None:
        if id(original_node) not in self._conditions:
            self._deferred_depth -= 1

    def visit_Comparison(self, node: cst.Comparison) -> None:
        if len(node.comparisons) > 1:
            self._deferred_depth += 1

    def leave_Comparison(self, original_node: cst.Comparison) -> None:
        if len(original_node.comparisons) > 1:
            self._deferred_depth -= 1

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        if self._deferred_depth:
            self._add(node, "assignment expression (:=) inside and/or or a comparison")

    def visit_Yield(self, node: cst.Yield) -> None:
        if self._deferred_depth:
            self._add(node, "yield inside and/or or a comparison")

    def visit_Await(self, node: cst.Await) -> None:
        self._add(node, "await")

    def visit_Global(self, node: cst.Global) -> None:
        self._add(node, "global statement")


def find_unsupported(wrapper: cst.metadata.MetadataWrapper, def_lines: dict[str, int]) -> dict[str, list[Finding]]:
    """Top-level function name -> its findings, with lines numbered as in the original file
    (``def_lines``: the original line of each function's ``def``)."""
    collector = UnsupportedConstructCollector()
    wrapper.visit(collector)
    findings: dict[str, list[Finding]] = {}
    for fn, node, construct in collector.raw:
        name = fn.name.value
        findings.setdefault(name, []).append(Finding(construct, line_of(fn, node, def_lines[name])))
    return findings
