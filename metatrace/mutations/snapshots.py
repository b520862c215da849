"""An object's state before the trace mutated it, and how to put it back.

Restores go through the base types' own methods (``list.__setitem__``, ``dict.clear``), not the
object's: a subclass may override them (a list that logs its appends), and the restore must not
run user code or record anything. An object of a kind that cannot be snapshotted is refused
where it is first mutated (:class:`metatrace.MetatraceError`), not silently left changed.
"""

from __future__ import annotations

import collections
import types
from typing import Any, Callable

from metatrace.errors import MetatraceError

_ABSENT = object()
_IMMUTABLE_TYPE = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE: a builtin or C type (its attributes cannot be set)


def _list(obj: list) -> Callable[[Any], None]:
    saved = list(list.__iter__(obj))  # (the base type's iterator: a subclass's __iter__ may be user code)
    return lambda o: list.__setitem__(o, slice(None), saved)


def _ordered_dict(obj: collections.OrderedDict) -> Callable[[Any], None]:
    saved = list(collections.OrderedDict.items(obj))

    def restore(o):
        collections.OrderedDict.clear(o)
        for k, v in saved:
            collections.OrderedDict.__setitem__(o, k, v)

    return restore


def _refill(cls: type, saved: list) -> Callable[[Any], None]:
    """Restores an object of ``cls`` by ``cls.clear`` then ``cls.update`` with ``saved``."""

    def restore(o):
        cls.clear(o)
        cls.update(o, saved)

    return restore


def _dict(obj: dict) -> Callable[[Any], None]:
    return _refill(dict, list(dict.items(obj)))


def _set(obj: set) -> Callable[[Any], None]:
    return _refill(set, list(set.__iter__(obj)))


def _bytearray(obj: bytearray) -> Callable[[Any], None]:
    saved = bytes(obj)
    return lambda o: bytearray.__setitem__(o, slice(None), saved)


def _cell(obj) -> Callable[[Any], None]:
    try:
        saved = obj.cell_contents
    except ValueError:  # an empty cell (a nonlocal not yet bound)
        saved = _ABSENT

    def restore(o):
        if saved is _ABSENT:
            try:
                del o.cell_contents
            except ValueError:
                pass
        else:
            o.cell_contents = saved

    return restore


def _class(cls: type) -> Callable[[Any], None]:
    """A class's own attributes (``Registry.items``, ``type(self).calls += 1``), through
    ``type.__setattr__``/``type.__delattr__`` (its ``__dict__`` is a read-only mapping proxy)."""
    saved = dict(cls.__dict__)

    def restore(c):
        for name in [n for n in c.__dict__ if n not in saved]:
            type.__delattr__(c, name)
        for name, value in saved.items():
            if c.__dict__.get(name, _ABSENT) is not value:
                type.__setattr__(c, name, value)

    return restore


def _slots(cls: type) -> list[str]:
    names = []
    for klass in cls.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        names += [slots] if isinstance(slots, str) else [s for s in slots if s not in ("__dict__", "__weakref__")]
    return names


def _attributes(obj: Any) -> Callable[[Any], None] | None:
    """An object's ``__dict__`` and slots (``object.__getattribute__``: no user ``__getattr__`` runs)."""
    try:
        d = object.__getattribute__(obj, "__dict__")
    except (AttributeError, TypeError):
        d = None
    slots = _slots(type(obj))
    if (d is None or type(d) is not dict) and not slots:
        return None
    saved_dict = None if d is None else dict(d)
    saved_slots = {}
    for name in slots:
        try:
            saved_slots[name] = object.__getattribute__(obj, name)
        except AttributeError:
            saved_slots[name] = _ABSENT

    def restore(o):
        if saved_dict is not None:
            live = object.__getattribute__(o, "__dict__")
            live.clear()
            live.update(saved_dict)
        for name, value in saved_slots.items():
            if value is _ABSENT:
                try:
                    object.__delattr__(o, name)
                except AttributeError:
                    pass
            else:
                object.__setattr__(o, name, value)

    return restore


# The most derived base first: an OrderedDict is a dict, a defaultdict is a dict.
_BY_BASE = ((collections.OrderedDict, _ordered_dict), (dict, _dict), (list, _list), (set, _set),
            (bytearray, _bytearray))


def restorer(obj: Any, *, attributes: bool, where: str) -> Callable[[Any], None]:
    """A function that puts ``obj`` back as it is now. ``attributes``: the mutation stores an
    attribute (``setattr``), so the object's attributes are what is saved, whatever its type."""
    if type(obj) is types.CellType:  # its one attribute, stored or deleted (``nonlocal n; del n``)
        return _cell(obj)
    if isinstance(obj, type) and attributes and not (obj.__flags__ & _IMMUTABLE_TYPE):
        return _class(obj)
    if not attributes:
        for base, take in _BY_BASE:
            if isinstance(obj, base):
                return take(obj)
    restore = _attributes(obj)
    if restore is None:
        raise MetatraceError(
            f"the function mutates a {type(obj).__name__} object that existed before the call ({where}), and "
            "metatrace cannot save and restore objects of that kind to replay the mutation on every call"
        )
    return restore
