"""Applies every rewrite, in order, to source text.

Order matters in three places: the call renamers run first, while callee names still resolve to
their qualified names; the conditions pass runs after the others, because it recognises
``_mt.check`` (from the checks pass) and ``_mt.truth`` calls; the size-oblivious sites pass runs
last, matching the checks the conditions pass wrote. Everything here is source to source: no thunder import.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import MetadataWrapper

from rewrites.arithmetic import ArithmeticTransformer
from rewrites.builtin_calls import BuiltinCallTransformer
from rewrites.checks import CheckCallTransformer
from rewrites.comparisons import ComparisonTransformer
from rewrites.concretize import ConcretizingCallTransformer, SubscriptIndexTransformer, ValueAttributeTransformer
from rewrites.conditions import ConditionTransformer
from rewrites.call_renamer import merged
from rewrites.size_oblivious import SizeObliviousSiteTransformer
from rewrites.unsupported import Finding, find_unsupported

# Renamers share one qualified-name resolution (the costly part), so they run as one pass.
CALL_RENAMERS = (CheckCallTransformer, BuiltinCallTransformer, ConcretizingCallTransformer)
CallRenamers = merged(*CALL_RENAMERS)
# Then the structural rewrites, which need no metadata. Rewrites that handle disjoint node types
# share one traversal (each tree walk costs a few hundred milliseconds on prims.py); the
# conditions pass must see the others' output, so it runs after them on its own; the size-oblivious
# sites pass matches the conditions pass's output (and touches only the metas it lists).


class _ExpressionRewrites(SubscriptIndexTransformer, ComparisonTransformer, ArithmeticTransformer):
    """Subscripts, comparisons and arithmetic in one walk: their leave_* hooks never overlap."""


STRUCTURAL_TRANSFORMERS: tuple[type[cst.CSTTransformer], ...] = (
    ValueAttributeTransformer,
    _ExpressionRewrites,
    ConditionTransformer,
    SizeObliviousSiteTransformer,
)


class RewriteError(Exception):
    """The source could not be parsed or rewritten; names the file."""


def rewrite_module(module: cst.Module, wrapper: MetadataWrapper | None = None) -> cst.Module:
    """Every rewrite applied to ``module`` (``wrapper``: its already-resolved metadata, if any)."""
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True) if wrapper is None else wrapper
    module = wrapper.visit(CallRenamers())
    for transformer in STRUCTURAL_TRANSFORMERS:
        module = module.visit(transformer())
    return module


def rewrite_source(source: str) -> str:
    """All rewrites applied to a module's source text (what the golden tests exercise)."""
    return rewrite_module(cst.parse_module(source)).code


def parse(source: str, filename: str) -> cst.Module:
    try:
        return cst.parse_module(source)
    except cst.ParserSyntaxError as e:
        raise RewriteError(f"cannot parse {filename}: {e}") from e


def top_level_functions(module: cst.Module) -> dict[str, cst.FunctionDef]:
    return {stmt.name.value: stmt for stmt in module.body if isinstance(stmt, cst.FunctionDef)}


def _imports(module: cst.Module) -> list[cst.BaseStatement]:
    """Module-level import statements: they let qualified names resolve in an extracted module."""
    out = []
    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine) and all(
            isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body
        ):
            out.append(stmt)
    return out


@dataclass(frozen=True)
class ExtractedFunctions:
    """Selected functions of one module, rewritten, with the findings of each."""

    code: str  # the rewritten function definitions, in source order, without the imports
    findings: dict[str, list[Finding]]  # function name -> findings (lines relative to the original file)


def rewrite_functions(module: cst.Module, names: Sequence[str], *, first_lines: dict[str, int]) -> ExtractedFunctions:
    """Rewrites the named top-level functions of ``module``.

    ``first_lines`` maps each name to the line of its ``def`` in the original file so findings
    point at thunder's source. Only the selected functions are transformed (with the module's
    imports, so qualified names still resolve): rewriting all of prims.py would be several times
    slower.
    """
    functions = top_level_functions(module)
    selected = [functions[n] for n in sorted(names, key=lambda n: first_lines[n])]
    imports = _imports(module)
    wrapper = MetadataWrapper(cst.Module(body=[*imports, *selected]), unsafe_skip_copy=True)
    found = find_unsupported(wrapper, first_lines)
    findings = {fn.name.value: found.get(fn.name.value, []) for fn in selected}
    rewritten = rewrite_module(wrapper.module, wrapper)
    body = rewritten.body[len(imports):]
    return ExtractedFunctions(code=cst.Module(body=body).code, findings=findings)


def rewrite_grad_rules(module: cst.Module, names: Sequence[str]) -> str:
    """The named autograd rules of ``module`` with only the converter rewrite applied.

    Rules run inside thunder's grad transform, where thunder itself records the arithmetic of
    NumberProxies (no meta recorder is active), so the meta pipeline's arithmetic and condition
    rewrites do not apply: only the places that would bake a symbol in are changed.
    """
    from rewrites.int_as_function import IntAsFunctionTransformer

    functions = top_level_functions(module)
    selected = [functions[n] for n in names]
    imports = _imports(module)
    wrapper = MetadataWrapper(cst.Module(body=[*imports, *selected]), unsafe_skip_copy=True)
    rewritten = wrapper.visit(IntAsFunctionTransformer())
    return cst.Module(body=rewritten.body[len(imports):]).code
