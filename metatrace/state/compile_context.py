"""Every piece of compile-time context metatrace keeps, declared in one place (after inductor's
``virtualized.py``): each with its default and the one context manager that sets it, so nothing
outlives the call or the step that set it, and a reader finds here all that a hook may depend on
besides its arguments.

What lives beside thunder's objects instead (a cache entry's programs, a trace's shape reads, a
jitted function's record) is in weakly keyed tables (``metatrace.state.weak_tables``), not here.
"""

from __future__ import annotations

import contextlib
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True)
class CompileStep:
    """The phase of a compile that is running.

    ``interpreting``: metas may record (while thunder interprets the jitted function, and through
    the grad transform and the executor passes, so every trace's sizes have producers); False
    outside a compile, where a meta records nothing. ``functional``: the step transforms a trace in
    which a proxy is one value wherever it appears (the grad transform, the executor passes); while
    thunder interprets the function an in-place write keeps the proxy of the tensor it changes
    until thunder's functionalization pass. ``collector``: the guard collector concretizations go
    to (``metatrace.guards.collect.GuardCollector``); None drops them, thunder's behaviour."""

    interpreting: bool = False
    functional: bool = False
    collector: Any = None


NOT_COMPILING = CompileStep()
_STEP: ContextVar[CompileStep] = ContextVar("metatrace_compile_step", default=NOT_COMPILING)


def step() -> CompileStep:
    return _STEP.get()


def collector() -> Any:
    """The guard collector of the compile step running, or None."""
    return _STEP.get().collector


def interpreting() -> bool:
    return _STEP.get().interpreting


@contextlib.contextmanager
def compile_step(collector: Any = None, *, collect: bool = True, functional: bool = False):
    """A compile step in which metas record: concretizations go to ``collector`` (None drops
    them), unless ``collect`` is False (the executor passes: the collector of an enclosing step,
    if any, stays). ``functional``: see :class:`CompileStep`."""
    current = _STEP.get()
    token = _STEP.set(CompileStep(True, functional, collector if collect else current.collector))
    try:
        yield
    finally:
        _STEP.reset(token)


@contextlib.contextmanager
def collecting(collector: Any):
    """Concretizations go to ``collector`` in the block, the step otherwise unchanged (tests that
    drive the runtime directly)."""
    token = _STEP.set(replace(_STEP.get(), collector=collector))
    try:
        yield
    finally:
        _STEP.reset(token)


class _Declared:
    """A piece of context: a context variable with its default, set only by :meth:`set_to`."""

    def __init__(self, name: str, default: Any):
        self._var: ContextVar = ContextVar(f"metatrace_{name}", default=default)

    def get(self) -> Any:
        return self._var.get()

    @contextlib.contextmanager
    def set_to(self, value: Any):
        token = self._var.set(value)
        try:
            yield value
        finally:
            self._var.reset(token)


# The rewritten meta running (``metas.record_state.RecordingFrame``: the scope its ops go to, the
# sizes it may bind, the ops it recorded); None: record nothing, behave like thunder.
RECORDING_FRAME = _Declared("recording_frame", None)

# True while a test observer re-runs an original meta beside the rewritten one
# (``metas.recording.OBSERVER``): nothing may be recorded then.
RECORDING_SUSPENDED = _Declared("recording_suspended", False)

# The name of the checked in-place operator whose meta is running (``metas.torch_ops.inplace_casts``).
INPLACE_CHECKING = _Declared("inplace_checking", None)

# Per flat output of the cache entry whose outputs ``connect_to_autograd`` is connecting, True
# where eager returns it without grad (``grad.requires_grad``; read by the autograd.Function's
# forward that call runs).
CONNECTING_OUTPUTS = _Declared("connecting_outputs", None)

# While thunder interprets a function for a compile that collects guards: the containers whose
# contents the trace read (``guards.content_reads.ContentReads``, noted by ``interpret.call_hooks``).
CONTENT_READS = _Declared("content_reads", None)

# The name of the size-oblivious site running (``metas.oblivious_answers.THUNDER_SITES``, ``REWRITTEN_META_SITES``:
# the answers it gives to decisions on sizes read from tensor data), set by the site itself: the rewritten
# metas' generated ``with _mt.size_oblivious(...)``, the Patch rows wrapping thunder's functions,
# metatrace's own copies of them. None: no decision is size-oblivious.
SIZE_OBLIVIOUS = _Declared("size_oblivious", None)

# While thunder interprets a function for a compile that collects guards: the code objects of the
# Python functions it ran (``interpret.call_hooks``), whose files a stored entry depends on
# (``entry_cache.stored_entry``).
INTERPRETED_CODES = _Declared("interpreted_codes", None)

# While stored entries are rebuilt (``entry_cache.load``): what unpickling needs from the loading
# process (``entry_cache.load.Loading``: the stored registry ids' new names, the jitted module's
# ThunderModule). None outside a load.
ENTRY_LOADING = _Declared("entry_loading", None)


def renamed(stored_id: str) -> str:
    """The id a stored program or check gets in this process (its stored id outside a load)."""
    loading = ENTRY_LOADING.get()
    return stored_id if loading is None else loading.ids[stored_id]
