"""Compiled entries that outlive the process: stored on disk by a key that names the program,
loaded by a fresh process before it interprets anything, their prologues deciding hits as for any
entry (``cache_list``: the hook into thunder's entry list; ``stored_entry``: what an entry needs in
another process; ``stable_refs``: how objects are named across processes; ``program_key`` and
``code_files``: what must be the same for a stored entry to apply; ``entry_files``: the disk)."""

from __future__ import annotations

import functools

import thunder
from thunder.core import baseutils

from metatrace.entry_cache import settings
from metatrace.entry_cache.cache_list import _jit, entry_cache_stats
from metatrace.patching import Patch, attribute
from metatrace.state.callable_sources import SOURCES, CallableSource

__all__ = ["entry_cache_stats", "patches"]


def _recording_sources(original):
    @functools.wraps(original)
    def build_callable(fn_name, python_str, file_name, ctx):
        fn = original(fn_name, python_str, file_name, ctx)
        if settings.enabled():
            try:
                SOURCES[fn] = CallableSource(fn_name, python_str, ctx)
            except TypeError:  # (not weakly referenceable: never an entry's function)
                pass
        return fn

    return build_callable


def patches() -> list[Patch]:
    return [
        attribute(thunder, "jit", _jit, "a jitted callable under symbolic values loads and stores its entries",
                  wrap=True),
        attribute(baseutils, "build_callable", _recording_sources,
                  "the text and context of each function thunder builds from a trace are kept for storing",
                  wrap=True),
    ]
