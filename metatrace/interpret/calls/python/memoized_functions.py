"""A function memoized by ``functools.lru_cache`` (or ``functools.cache``) is interpreted itself.

The cache's C wrapper called the user's function outside the interpreter: a mask built with
``torch.tril(torch.ones(n, n))`` came back as a real tensor the prologue could not unpack, and the
cache kept a function of one size. A memo of a pure function returns what calling it returns, so
the trace computes it for every size; the cache's own state (its hits and entries) is not kept
while tracing. :func:`metatrace.interpret.calls.c_code.opaque_calls.before_call` swaps the callee.
"""

from __future__ import annotations

import functools

from thunder.core.interpreter import WrappedValue, wrap_attribute, wrap_const

LRU_CACHE_WRAPPER = type(functools.lru_cache(None)(lambda: None))


def memoized_function(fn: WrappedValue) -> WrappedValue:
    """The function the ``lru_cache`` wrapper ``fn`` wraps, read as its ``__wrapped__``."""
    return wrap_attribute(fn.value.__wrapped__, fn, wrap_const("__wrapped__"))
