"""Shared mechanism of the rewrites that redirect known callees to the runtime.

A renamer has a table from qualified callee name (``builtins.max``, ``thunder.core.utils.check``)
to a runtime function name. Matching by qualified name (libcst's QualifiedNameProvider) means a
local variable that shadows a builtin is left alone. Resolving qualified names is the costliest
step of the codegen, so the pipeline runs all tables in one pass (``merged``).
"""

from __future__ import annotations

import libcst as cst
from libcst.metadata import QualifiedNameProvider

from rewrites._runtime_calls import runtime_attr


class CallRenamer(cst.CSTTransformer):
    """Replaces the callee of calls whose qualified name is in ``TABLE`` by ``_mt.<TABLE[name]>``."""

    METADATA_DEPENDENCIES = (QualifiedNameProvider,)
    TABLE: dict[str, str] = {}

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        names = self.get_metadata(QualifiedNameProvider, original_node.func, ())
        for name in sorted(q.name for q in names):
            target = self.TABLE.get(name)
            if target is not None:
                return updated_node.with_changes(func=runtime_attr(target))
        return updated_node


def merged(*renamers: type[CallRenamer]) -> type[CallRenamer]:
    """One renamer applying every table (tables must not disagree on a name)."""
    table: dict[str, str] = {}
    for renamer in renamers:
        for name, target in renamer.TABLE.items():
            assert table.setdefault(name, target) == target, f"renamers disagree on {name}"
    return type("MergedCallRenamer", (CallRenamer,), {"TABLE": table})
