"""``int`` handed to a mapping function as a converter keeps integer symbols symbolic.

thunder's autograd rules convert computed sizes with ``tree_map(int, padding)`` (the slice
rule: ``np.subtract(a.shape, end_indices)`` gives numpy integers or symbols). Called on an
IntegerProxy, ``int`` bakes its value in, so the backward pads by stale constants. The
builtin as the function argument of ``tree_map``/``map`` becomes ``_mt.symbolic_int``: a
symbol stays a symbol (the consumer's rewritten meta records what it computes from it),
anything else is ``int(x)``. Names are matched by qualified name, so a parameter or local
called ``int`` is left alone, and ``isinstance(x, int)`` is not a conversion.
"""

from __future__ import annotations

import libcst as cst
from libcst.metadata import QualifiedNameProvider

from rewrites._runtime_calls import runtime_attr

MAPPING_FUNCTIONS = frozenset({"map", "builtins.map", "tree_map", "thunder.core.pytree.tree_map"})
_BUILTIN_INT = frozenset({"int", "builtins.int"})


class IntAsFunctionTransformer(cst.CSTTransformer):
    METADATA_DEPENDENCIES = (QualifiedNameProvider,)

    def _names(self, node: cst.CSTNode) -> set[str]:
        return {q.name for q in self.get_metadata(QualifiedNameProvider, node, set())}

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        if not original.args or not self._names(original.func) & MAPPING_FUNCTIONS:
            return updated
        first = original.args[0]
        if first.keyword is not None or not isinstance(first.value, cst.Name):
            return updated
        names = self._names(first.value)
        if not names or not names <= _BUILTIN_INT:
            return updated
        new_first = updated.args[0].with_changes(value=runtime_attr("symbolic_int"))
        return updated.with_changes(args=[new_first, *updated.args[1:]])
