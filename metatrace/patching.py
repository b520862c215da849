"""One mechanism for every change metatrace makes to thunder: a :class:`Patch` row per touch point.

A row names its target (an object, or the dotted path of a module or class resolved when it is
applied), the attribute, mapping key or set member it changes, the replacement (a value, or with
``wrap=True`` a function of the original: a wrapper), and why. :func:`apply` applies rows in
order (a later row may read what an earlier one installed) and returns an undo list;
:func:`undo` restores in reverse, deleting what was missing before. Each metatrace module
contributes its rows with a ``patches()`` function; :mod:`metatrace.install` collects them.
"""

from __future__ import annotations

import importlib
import types
from dataclasses import dataclass
from typing import Any

ATTRIBUTE = "attribute"  # setattr(target, key, new)
ITEM = "item"  # target[key] = new (a dict)
MEMBER = "member"  # target.add(key) (a set; ``new`` is unused)

# The label of a Symbol's meta (every prim, executors' copies and own prims, ltorch symbols).
SYMBOL_METAS = "thunder Symbol instances"

MISSING = object()  # what a row found when the attribute or key was not there: undone by deleting it


def thunder_modules() -> list[tuple[str, types.ModuleType]]:
    """(name, module) of ``thunder`` and every loaded ``thunder.*`` module."""
    import sys

    return [(name, module) for name, module in list(sys.modules.items())
            if module is not None and (name == "thunder" or name.startswith("thunder."))]


def thunder_symbols() -> list:
    """Every Symbol of thunder's modules (their globals) and of executors' op maps, each once (by
    identity), modules first: the objects whose metas rows labelled :data:`SYMBOL_METAS` may wrap."""
    from thunder.core.symbol import Symbol
    from thunder.extend import get_all_executors

    symbols = {}
    for _, module in thunder_modules():
        symbols.update((id(v), v) for v in list(vars(module).values()) if isinstance(v, Symbol))
    for ex in get_all_executors():
        symbols.update((id(s), s) for s in getattr(ex, "opmap", {}).values() if isinstance(s, Symbol))
    return list(symbols.values())


@dataclass(frozen=True)
class Patch:
    """One place where metatrace changes thunder while enabled.

    ``label``: where the change is, as tests/package/test_architecture.py names thunder's locations (a
    module's or class's dotted path, ``thunder... ._method_name_to_fn_map`` for a mapping, or
    :data:`metatrace.install.SYMBOL_METAS`); derived from the target for modules and classes.
    A label starting with ``metatrace.`` is metatrace's own state, set up with thunder's (the
    registered operators' symbols).
    """

    target: Any
    key: Any
    new: Any
    why: str
    kind: str = ATTRIBUTE
    wrap: bool = False
    label: str | None = None

    @property
    def where(self) -> str:
        if self.label is not None:
            return self.label
        if isinstance(self.target, str):
            return self.target
        if isinstance(self.target, types.ModuleType):
            return self.target.__name__
        if isinstance(self.target, type):
            return f"{self.target.__module__}.{self.target.__qualname__}"
        raise ValueError(f"a patch of {self.target!r} needs a label")

    @property
    def name(self) -> str:
        """The changed location's name as the architecture test sees it: the attribute, or ``[]``."""
        return self.key if self.kind == ATTRIBUTE else "[]"


def attribute(target, name: str, new, why: str, *, wrap: bool = False, label: str | None = None) -> Patch:
    return Patch(target, name, new, why, ATTRIBUTE, wrap, label)


def item(mapping, key, new, why: str, *, wrap: bool = False, label: str | None = None) -> Patch:
    return Patch(mapping, key, new, why, ITEM, wrap, label)


def member(collection, value, why: str, *, label: str | None = None) -> Patch:
    return Patch(collection, value, None, why, MEMBER, False, label)


def _resolve(target):
    if not isinstance(target, str):
        return target
    parts = target.split(".")
    for n in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:n]))
        except ImportError:
            continue
        for part in parts[n:]:
            obj = getattr(obj, part)
        return obj
    raise ImportError(target)


def _current(target, kind: str, key):
    if kind == ATTRIBUTE:
        if isinstance(target, (type, types.ModuleType)):
            return vars(target).get(key, MISSING)  # not inherited: undo then deletes the override
        return getattr(target, key, MISSING)
    if kind == ITEM:
        return target.get(key, MISSING)
    return key in target


def _set(target, kind: str, key, value) -> None:
    if kind == ITEM:
        if value is MISSING:
            target.pop(key, None)
        else:
            target[key] = value
    elif kind == MEMBER:
        (target.add if value else target.discard)(key)
    elif isinstance(target, (type, types.ModuleType)):
        if value is MISSING:
            delattr(target, key)
        else:
            setattr(target, key, value)
    elif value is MISSING:
        object.__delattr__(target, key)
    else:  # thunder's Symbol is a frozen dataclass
        object.__setattr__(target, key, value)


def apply(rows, undo: list | None = None) -> list:
    """Applies ``rows`` in order; returns (or extends) the undo list that :func:`undo` takes.
    Raising midway leaves the rows applied so far in ``undo``, for the caller to undo."""
    undo = [] if undo is None else undo
    for row in rows:
        target = _resolve(row.target)
        original = _current(target, row.kind, row.key)
        if row.kind == MEMBER:
            new = True
        elif row.wrap:
            new = row.new(_effective(target, row, original))
        else:
            new = row.new
        undo.append((target, row.kind, row.key, original))
        _set(target, row.kind, row.key, new)
    return undo


def _effective(target, row: Patch, original):
    """What the wrapper wraps: the inherited attribute when the class has none of its own."""
    if original is MISSING and row.kind == ATTRIBUTE:
        return getattr(target, row.key)
    return None if original is MISSING else original


def undo(applied: list) -> None:
    """Restores what :func:`apply` changed, in reverse order."""
    while applied:
        target, kind, key, original = applied.pop()
        _set(target, kind, key, original)

