"""A list or tuple made by ``+`` or ``*`` keeps the wrappers of its items.

thunder's binary-operator handler calls the sequence's ``__add__`` lookaside, whose result records
its items' wrappers (an input list's numbers as their proxies), then unwraps that result and wraps
it again for the stack: thunder's wrapper cache holds wrappers weakly, the first one was gone,
and the new one knew none of its items. So ``max(l + [1])``, ``sum(l + [1])``, ``set(l + [n])``
and ``str(l + [1])`` read the compiling call's plain numbers of ``l``, with no guard, and a call
with other numbers reused the entry (stock thunder too). While metatrace compiles, the compile's
session keeps each such result's wrapper (:attr:`CompileSession.sequence_results`) until the
compile ends, so the cache finds it again, items and all.
"""

from __future__ import annotations

import functools

import thunder.core.interpreter as interpreter
import thunder.core.jit_ext as jit_ext
from thunder.core.interpreter import WrappedValue

from metatrace.patching import Patch, item
from metatrace.state import compile_context
from metatrace.state.compile_session import session

_OPERATORS = (list.__add__, list.__mul__, list.__rmul__, tuple.__add__, tuple.__mul__, tuple.__rmul__)


def _keeping_results(original):
    @functools.wraps(original)
    def lookaside(*args, **kwargs):
        result = original(*args, **kwargs)
        if type(result) is WrappedValue and compile_context.collector() is not None:  # (not a raised signal)
            try:
                session(jit_ext.get_jit_ctx()).sequence_results.append(result)
            except LookupError:
                pass
        return result

    return lookaside


def patches() -> list[Patch]:
    return [item(interpreter._default_provenance_tracking_lookaside_map, op, _keeping_results,
                 "a list or tuple made by + or * keeps its items' wrappers (held until the compile ends)",
                 wrap=True, label="thunder.core.interpreter._default_provenance_tracking_lookaside_map")
            for op in _OPERATORS]
