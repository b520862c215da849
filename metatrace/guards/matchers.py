"""The matchers of the values the prologue checks: one class per kind of check.

:func:`metatrace.guards.classify.expect` picks the matcher of a value by its kind; each matcher
holds what the check compares with (a type, a value, an object held weakly where it can be) and
answers ``matches(v)`` in the prologue, once per call, and ``repr`` in explain(). Kept apart from
the classifier so the table of kinds reads on one page, and so the modules that only hold or
print a check (``value_checks``, ``content_reads``, the entry cache) need not import the table.
"""

from __future__ import annotations

import enum
import types
import weakref
from typing import Any

from metatrace.state.registry import compiled_by_this_call


def range_key(r: range) -> tuple:
    return (r.start, r.stop, r.step)


# What EQUAL compares where ``==`` says too little: equal ranges may differ in ``stop``
# (``range(0, 4, 2) == range(0, 3, 2)``), ``-0j == 0j`` and NaN is not equal to itself (a float
# is compared by value only where it was baked in: ``expect(exact=True)``).
# (named functions, not lambdas: a stored entry names them: metatrace.entry_cache.stable_refs)
EQUAL_KEY = {range: range_key, complex: repr, float: repr}


class Identity:
    """An object compared by ``is``. Held by a weak reference where its type allows one, so no
    cache entry keeps a user's object alive; otherwise strongly (builtins, objects of classes
    with ``__slots__``): an id alone could be taken by a new object once the old one is freed,
    and the check would then pass for the wrong object. Such objects are kept only as long as
    the jitted function's entries (``metatrace.state.registry`` releases them with it)."""

    __slots__ = ("ref", "strong", "type_name")

    def __init__(self, obj: Any):
        self.type_name = type(obj).__qualname__  # (the repr is made when explain() asks: it may cost)
        try:
            self.ref, self.strong = weakref.ref(obj), None
        except TypeError:
            self.ref, self.strong = None, obj

    def get(self) -> Any:
        return self.strong if self.ref is None else self.ref()

    def matches(self, v: Any) -> bool:
        if self.ref is None:
            return v is self.strong
        obj = self.ref()
        return obj is not None and v is obj  # (a dead reference matches nothing, not ``None``)

    def __repr__(self) -> str:
        obj = self.get()
        return f"<a {self.type_name}, freed>" if obj is None else short_repr(obj)


def short_repr(x: Any, limit: int = 60) -> str:
    """How explain() shows a checked value: an enum member and a function or class by name, any
    other value by its repr (a placeholder where the user's ``__repr__`` fails), cut at ``limit``."""
    try:
        if isinstance(x, enum.Enum):
            text = f"{type(x).__qualname__}.{x.name}"
        else:
            text = x.__qualname__ if isinstance(x, (type, types.FunctionType)) else repr(x)
    except Exception:  # a user's __repr__ may fail
        text = f"<{type(x).__qualname__} object>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---------------------------------------------------------------------------------------------
# Matchers: ``matches(v)`` in the prologue, ``repr`` in explain()
# ---------------------------------------------------------------------------------------------


class Anything:
    """A tensor (thunder checks it) or a module (its state is checked where it is read)."""

    __slots__ = ("cls", "text")

    def __init__(self, cls: type, text: str):
        self.cls, self.text = cls, text

    def matches(self, v) -> bool:
        return isinstance(v, self.cls)

    def __repr__(self) -> str:
        return self.text


class TypeIs:
    """NUMBER (symbolic value), MODULE and DATA (their reads are checked where they happen)."""

    __slots__ = ("cls",)

    def __init__(self, cls: type):
        self.cls = cls  # (a class is code: held strongly, like the functions the trace calls)

    def matches(self, v) -> bool:
        return type(v) is self.cls

    def __repr__(self) -> str:
        return self.cls.__qualname__


class Equal:
    __slots__ = ("cls", "value", "key")

    def __init__(self, x: Any):
        self.cls, self.key = type(x), EQUAL_KEY.get(type(x))
        self.value = x if self.key is None else self.key(x)

    def matches(self, v) -> bool:
        return type(v) is self.cls and (v == self.value if self.key is None else self.key(v) == self.value)

    def __repr__(self) -> str:
        return repr(self.value) if self.key is None else f"{self.cls.__name__} {self.value}"


class Same:
    __slots__ = ("identity",)

    def __init__(self, x: Any):
        self.identity = Identity(x)

    def matches(self, v) -> bool:
        return self.identity.matches(v)

    def __repr__(self) -> str:
        return f"is {self.identity!r}"


class BoundMethod:
    """A bound method is a new object on every read: the same function bound to the same object."""

    __slots__ = ("func", "owner")

    def __init__(self, m: types.MethodType):
        self.func, self.owner = Identity(m.__func__), Identity(m.__self__)

    def matches(self, v) -> bool:
        return type(v) is types.MethodType and self.func.matches(v.__func__) and self.owner.matches(v.__self__)

    def __repr__(self) -> str:
        return f"method {self.func!r} of {self.owner!r}"


class BuiltinBound:
    """A C method bound to its object (``int.from_bytes``, ``d.get``) is a new object on every
    read too: the same name bound to the same object (its ``__self__`` is not a module: a C
    function of a module, ``math.sqrt``, is one object, checked by identity)."""

    __slots__ = ("name", "owner")

    def __init__(self, m: types.BuiltinMethodType):
        self.name, self.owner = m.__name__, Identity(m.__self__)

    def matches(self, v) -> bool:
        return type(v) is types.BuiltinMethodType and v.__name__ == self.name and self.owner.matches(v.__self__)

    def __repr__(self) -> str:
        return f"method {self.name} of {self.owner!r}"


class MethodOf:
    """A method read from the object it is bound to (``obj.scale``): its function; its
    ``__self__`` is that object by construction (the object is checked on its own)."""

    __slots__ = ("func",)

    def __init__(self, func: Any):
        self.func = Identity(func)

    def matches(self, v) -> bool:
        return self.func.matches(getattr(v, "__func__", None))

    def __repr__(self) -> str:
        return f"method {self.func!r}"


class Sequence:
    __slots__ = ("cls", "items")

    def __init__(self, x: Any, items: tuple):
        self.cls, self.items = type(x), items

    def matches(self, v) -> bool:
        if type(v) is not self.cls or len(v) != len(self.items):
            return False
        for m, e in zip(self.items, v):
            if not m.matches(e):
                return False
        return True

    def __repr__(self) -> str:
        return f"{self.cls.__name__}[{', '.join(map(repr, self.items))}]"


class Slice(Sequence):
    __slots__ = ()

    def matches(self, v) -> bool:
        if type(v) is not slice:
            return False
        start, stop, step = self.items
        return start.matches(v.start) and stop.matches(v.stop) and step.matches(v.step)

    def __repr__(self) -> str:
        return f"slice({', '.join(map(repr, self.items))})"


class Mapping:
    """Keys in order (a trace that iterates a dict bakes the order in), each value classified."""

    __slots__ = ("cls", "keys", "items")

    def __init__(self, x: Any, items: tuple):
        self.cls, self.keys, self.items = type(x), tuple(x), items

    def matches(self, v) -> bool:
        if type(v) is not self.cls or tuple(v) != self.keys:
            return False
        for m, e in zip(self.items, v.values()):
            if not m.matches(e):
                return False
        return True

    def __repr__(self) -> str:
        return f"{self.cls.__name__}{{{', '.join(f'{k!r}: {m!r}' for k, m in zip(self.keys, self.items))}}}"


class Once:
    """Passes only on the call that compiled the entry (thunder runs the new prologue on the same
    arguments): every later call compiles anew, and its trace reads the iterator as eager does."""

    __slots__ = ("cls",)

    def __init__(self, x: Any):
        self.cls = type(x)

    def matches(self, v) -> bool:
        return compiled_by_this_call()

    def __repr__(self) -> str:
        return f"a {self.cls.__qualname__} (once: it changes as it is read)"


class DataExact:
    """A data object read whole by code the prologue cannot replay (``vars(o)``, ``str(o)``): its
    type and every attribute, numbers by value (what that code read is baked in)."""

    __slots__ = ("cls", "attributes")

    def __init__(self, x: Any, attributes: Mapping):
        self.cls, self.attributes = type(x), attributes

    def matches(self, v) -> bool:
        return type(v) is self.cls and self.attributes.matches(vars(v))

    def __repr__(self) -> str:
        return f"{self.cls.__qualname__}({self.attributes!r})"


def text(where: str, matcher: Any) -> str:
    """How explain() names a check: ``m is Mode.A``, ``s == 'ab'``, ``type(cfg) is Config``,
    ``l: list[int, is Mode.A]``."""
    if isinstance(matcher, Same):
        return f"{where} {matcher!r}"
    if isinstance(matcher, TypeIs):
        return f"type({where}) is {matcher!r}"
    return f"{where} == {matcher!r}" if isinstance(matcher, Equal) else f"{where}: {matcher!r}"


class ExpectedArgument:
    """An expected value in ``metatrace.state.registry.EXPECTED`` (``check_structure`` calls
    ``matches``; explain() prints ``text``)."""

    __slots__ = ("matcher", "text")

    def __init__(self, matcher: Any, text: str):
        self.matcher, self.text = matcher, text

    def matches(self, value: Any, *aliased: Any) -> bool:
        return self.matcher.matches(value)
