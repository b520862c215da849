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
