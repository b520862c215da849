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

import thunder.core.jit_ext as jit_ext
from thunder.core.interpreter import WrappedValue

from metatrace.state import compile_context
from metatrace.state.compile_session import session

def keep_result(result) -> None:
    """Holds the wrapper of a list or tuple made by ``+`` or ``*`` until the compile ends (a step
    of :mod:`metatrace.interpret.calls.sequence_lookasides`' wrapper of those operators)."""
    if type(result) is WrappedValue and compile_context.collector() is not None:  # (not a raised signal)
        try:
            session(jit_ext.get_jit_ctx()).sequence_results.append(result)
        except LookupError:
            pass
