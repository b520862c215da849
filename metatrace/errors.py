"""The base of every error metatrace raises to a user: ``except metatrace.MetatraceError``.

Each error also keeps the built-in class it had (``RandomCallError`` is a ``RuntimeError``,
``CacheDirectoryError`` an ``OSError``, ``TraceCheckError`` an ``AssertionError``), so code that
caught those still does. The errors live with the stage that raises them; ``metatrace`` exports
them all.
"""

from __future__ import annotations


class MetatraceError(Exception):
    """An error metatrace raises: a value it cannot reason about, a trace it finds broken, a cache
    it cannot write, or a guard that failed."""


class ProcessLocal(MetatraceError):
    """A value a compiled entry needs has no name that another process could resolve to the same
    value (a lambda, a module instance, a hook known by its handle): the entry stays in this
    process (``metatrace.entry_cache``)."""


class StaleReference(MetatraceError):
    """A stored entry names a value that now leads elsewhere (its code changed, it is gone): the
    entry is skipped, never reused (``metatrace.entry_cache``)."""
