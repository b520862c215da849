"""Compiled entries that outlive the process: stored on disk by a key that names the program,
loaded by a fresh process before it interprets anything, their prologues deciding hits as for any
entry (``cache_list``: the hook into thunder's entry list; ``stored_entry``: what an entry needs in
another process; ``stable_refs``: how objects are named across processes; ``program_key`` and
``code_files``: what must be the same for a stored entry to apply; ``entry_files``: the disk).

metatrace's one wrapper of torch.compile's region builder (``torch_compile.make_compiled``) is
here, past passes/; its steps, in order:

1. the region's bound symbols name no number outputs
   (:func:`metatrace.passes.fusion_regions.bound_symbols_to_compile`);
2. thunder's builder;
3. the compiled region keeps the function it was built from, for storing (:data:`COMPILED_REGIONS`).
"""

from __future__ import annotations

import functools

import thunder
from thunder.core import baseutils

from metatrace.entry_cache import settings
from metatrace.entry_cache.cache_list import entry_cache_stats, jit_hook
from metatrace.passes import fusion_regions
from metatrace.patching import Patch, attribute
from metatrace.state.callable_sources import COMPILED_REGIONS, SOURCES, CallableSource

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


def _make_compiled(original):
    @functools.wraps(original)
    def make_compiled(bsyms, sorted_unique_inputs, sorted_unique_outputs, *, mode=None):
        bsyms = fusion_regions.bound_symbols_to_compile(bsyms)
        compiled = original(bsyms, sorted_unique_inputs, sorted_unique_outputs, mode=mode)
        if settings.enabled():
            # the function make_compiled built from the region's trace (the last one built here)
            region = next((fn for fn, _ in _closure_functions(compiled) if fn in SOURCES), None)
            if region is not None:
                COMPILED_REGIONS[compiled] = (region, mode)
        return compiled

    return make_compiled


def _closure_functions(fn, depth: int = 4):
    """The functions in ``fn``'s closures, and theirs, with torch.compile's original callables."""
    for cell in getattr(fn, "__closure__", None) or ():
        inner = cell.cell_contents
        if callable(inner):
            yield inner, depth
            original = getattr(inner, "_torchdynamo_orig_callable", None)
            if original is not None:
                yield original, depth
            if depth:
                yield from _closure_functions(inner, depth - 1)


def patches() -> list[Patch]:
    from thunder.executors import torch_compile

    return [
        attribute(torch_compile, "make_compiled", _make_compiled,
                  "regions name no int outputs; a torch.compile fusion region keeps the text it was compiled from, "
                  "for storing", wrap=True),
        attribute(thunder, "jit", jit_hook, "a jitted callable under symbolic values loads and stores its entries",
                  wrap=True),
        attribute(baseutils, "build_callable", _recording_sources,
                  "the text and context of each function thunder builds from a trace are kept for storing",
                  wrap=True),
    ]
