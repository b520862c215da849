"""A table of metatrace's state beside thunder's objects, weakly keyed by them.

metatrace keeps what it learns about a thunder object (a compile's ``JitCtx``, a ``TraceCtx``)
in a table here instead of an attribute on the object: the entry dies with the object, and
thunder's objects carry nothing of metatrace's. The object asked for last is remembered (by a
weak reference) beside its entry: the hooks ask for the same one many times in a row (a shape
read on every read, the wrap callback for every value), and a weak dictionary's lookup makes a
weak reference each time. The remembered entry is let go when its object dies (the weak
reference's callback), so a dead object's entry is not kept alive until the next lookup.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable


class WeakTable:
    """object -> entry, made by ``make()`` on first use; weakly keyed."""

    def __init__(self, make: Callable[[], object]):
        self._make = make
        self._entries: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._last: tuple = (lambda: None, None)  # (weak reference to the last object, its entry)

    def get(self, obj, create: bool = True):
        """The entry of ``obj`` (made if missing and ``create``, else None)."""
        ref, entry = self._last
        if ref() is obj:
            return entry
        entry = self._entries.get(obj)
        if entry is None:
            if not create:
                return None
            entry = self._entries[obj] = self._make()
        self._last = (weakref.ref(obj, self._forget_last), entry)
        return entry

    def _forget_last(self, ref) -> None:
        if self._last[0] is ref:
            self._last = (lambda: None, None)


class IdentityTable:
    """object -> entry, made by ``make()`` on first use; keyed by identity, held weakly.

    For objects whose ``==`` is not an identity test (thunder's proxies: ``a == b`` records a
    comparison, and a weak dictionary compares keys with ``==`` on a hash collision). An entry
    goes when its object dies; an object's ``id`` reused by a new object never finds the old
    entry (the entry keeps a weak reference to its object and is checked against it)."""

    def __init__(self, make: Callable[[], object]):
        self._make = make
        self._entries: dict[int, tuple] = {}  # id(obj) -> (weak reference to obj, entry)

    def get(self, obj, create: bool = True):
        """The entry of ``obj`` (made if missing and ``create``, else None)."""
        key = id(obj)
        held = self._entries.get(key)
        if held is not None and held[0]() is obj:
            return held[1]
        if not create:
            return None
        entry = self._make()
        self._entries[key] = (weakref.ref(obj, functools.partial(self._forget, key)), entry)
        return entry

    def _forget(self, key: int, ref) -> None:
        held = self._entries.get(key)
        if held is not None and held[0] is ref:
            del self._entries[key]

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
