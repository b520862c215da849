"""The source and context thunder built each trace's Python callable from, weakly keyed by the callable.

thunder turns a trace into a function with ``baseutils.build_callable(name, python_str, file_name,
ctx)`` (``TraceCtx.python_callable``); a stored entry (``metatrace.entry_cache``) keeps that text
and context, so another process can build the same function without the trace. Lifetime: an item
goes with its callable (the cache entry holding it).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass


@dataclass(frozen=True)
class CallableSource:
    name: str  # the function's name in the text (``prologue``, ``computation``, ``backward_fn``)
    text: str
    ctx: dict  # the globals it ran with (thunder adds the function itself and ``__builtins__`` on exec)


SOURCES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # callable -> CallableSource

# thunder's torch.compile fusion regions: the function ``make_compiled`` returns -> (the function it
# built from the region's trace, the executor's torch.compile mode); a stored entry keeps the
# region's text and compiles it again in the loading process (metatrace.entry_cache.stable_refs)
COMPILED_REGIONS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
