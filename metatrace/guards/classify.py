"""One classifier for every value a trace reads from the call's arguments: default deny.

thunder's prologue checks what it proxies (tensors, numbers) and nothing else: an enum, a
function, a class, a range, a ``Fraction``, bytes, a bool compared with ``is`` or an attribute of
a plain object passed as an argument was baked into the trace unchecked, and a call with another
one reused the entry. Every value reached from the arguments (an argument, an element of a
container argument, an attribute the trace read) is classified here by one table, and the kind
says how the prologue checks it:

====================  =========================================================================
kind                  check
====================  =========================================================================
TENSOR                none here: thunder checks each tensor's metadata
NUMBER                its type (the value is symbolic: thunder unpacks what the trace reads)
EQUAL                 type and value (``str``, ``bytes``, ``bool``, ``None``, dtypes, ranges, ...)
CONTAINER             type, length (dict: keys) and every element, classified again
MODULE                its type (its state: ``metatrace.interpret.module_state``, ``called_modules``)
IDENTITY              ``is`` (enum members, functions, classes, generators: what they are is
                      which object they are); a bound method by ``__func__`` and ``__self__``
ONCE                  an entry for this call only (iterators, generators: ``next(it)`` in the
                      trace gave a value the same object never gives again)
DATA                  its type by identity; each attribute the trace reads is checked where it is
                      read (``metatrace.interpret.state_reads``), so a fresh but equal object
                      reuses the entry
DEFAULT               anything else: type and identity. Never skipped: a value the table does not
                      know may mean anything to the trace
====================  =========================================================================

:func:`expect` turns a value into a matcher (one object per checked value, walked once per call:
one comparison per leaf). An identity holds its object weakly where the type allows it, else
strongly (:class:`Identity`).
"""

from __future__ import annotations

import collections.abc
import enum
import fractions
import functools
import types
import weakref
from typing import Any

import numpy
import torch

from metatrace.guards.registry import compiled_by_this_call


class Kind(enum.Enum):
    TENSOR = "tensor"
    NUMBER = "number"
    EQUAL = "equal"
    CONTAINER = "container"
    MODULE = "module"
    IDENTITY = "identity"
    DATA = "data"
    ONCE = "once"
    DEFAULT = "default"


# By exact type (a subclass is not its base: an IntEnum member is an enum, a namedtuple is
# looked up below). bool before int: ``True is True`` decides branches, ``True + 0`` an int.
BY_TYPE: dict[type, Kind] = {
    int: Kind.NUMBER, float: Kind.NUMBER,
    bool: Kind.EQUAL, str: Kind.EQUAL, bytes: Kind.EQUAL, type(None): Kind.EQUAL, type(Ellipsis): Kind.EQUAL,
    torch.dtype: Kind.EQUAL, torch.device: Kind.EQUAL, torch.layout: Kind.EQUAL, torch.memory_format: Kind.EQUAL,
    range: Kind.EQUAL, fractions.Fraction: Kind.EQUAL,
    # thunder's ComplexProxy has no ``.real``: a complex is static (value_proxies), checked by value
    complex: Kind.EQUAL,
    list: Kind.CONTAINER, tuple: Kind.CONTAINER, dict: Kind.CONTAINER,
    # its numbers stay symbolic (value_proxies): which parts are None is its structure
    slice: Kind.CONTAINER,
}
# By isinstance, first match wins.
BY_CLASS: tuple[tuple[type | tuple[type, ...], Kind], ...] = (
    (torch.Tensor, Kind.TENSOR),
    (torch.nn.Module, Kind.MODULE),
    ((enum.Enum, types.FunctionType, types.BuiltinFunctionType, types.MethodType, functools.partial, type,
      types.ModuleType, torch.Generator), Kind.IDENTITY),
    # ``numpy.float64`` is a float: thunder proxies it like one
    (numpy.float64, Kind.NUMBER),
    # other numpy scalars (``np.int64``, ``np.float32``): thunder bakes them in as constants
    (numpy.generic, Kind.EQUAL),
    # any other subclass of a number or of str (a user's ``class Count(int)``): a constant
    # (metatrace.interpret.value_proxies keeps it the object it is), which may carry more than its value
    ((int, float, complex, str, bytes), Kind.DEFAULT),
    # an iterator changes as it is read: the trace baked in what ``next`` gave while it was made
    ((collections.abc.Iterator, types.CoroutineType, types.AsyncGeneratorType), Kind.ONCE),
    ((list, tuple, dict), Kind.CONTAINER),  # namedtuples, torch.Size, OrderedDict: by their own type
)

# What EQUAL compares where ``==`` says too little: equal ranges may differ in ``stop``
# (``range(0, 4, 2) == range(0, 3, 2)``), ``-0j == 0j`` and NaN is not equal to itself (a float
# is compared by value only where it was baked in: ``expect(exact=True)``).
def range_key(r: range) -> tuple:
    return (r.start, r.stop, r.step)


# (named functions, not lambdas: a stored entry names them: metatrace.entry_cache.stable_refs)
_EQUAL_KEY = {range: range_key, complex: repr, float: repr}


def kind(x: Any) -> Kind:
    k = BY_TYPE.get(type(x))
    if k is not None:
        return k
    for classes, k in BY_CLASS:
        if isinstance(x, classes):
            return k
    return Kind.DATA if hasattr(x, "__dict__") else Kind.DEFAULT


class Identity:
    """An object compared by ``is``. Held by a weak reference where its type allows one, so no
    cache entry keeps a user's object alive; otherwise strongly (builtins, objects of classes
    with ``__slots__``): an id alone could be taken by a new object once the old one is freed,
    and the check would then pass for the wrong object. Such objects are kept only as long as
    the jitted function's entries (``metatrace.guards.registry`` releases them with it)."""

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
        return f"<a {self.type_name}, freed>" if obj is None else _short_repr(obj)


def _short_repr(x: Any, limit: int = 60) -> str:
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
        self.cls, self.key = type(x), _EQUAL_KEY.get(type(x))
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


# An exact matcher of more elements, or deeper (a cycle of objects), is a single-use entry.
MAX_ELEMENTS, MAX_DEPTH = 4096, 32


def expect(x: Any, owner: Any = None, exact: bool = False) -> Any:
    """The matcher of ``x``'s kind. ``owner``: the object ``x`` was read from as an attribute
    (a method bound to it is checked by its function only). ``exact``: numbers by value and data
    objects with all their attributes (``x`` was read by code the prologue cannot replay)."""
    if not exact:
        return _expect(x, owner, None)
    try:
        return _expect(x, owner, [MAX_ELEMENTS, 0])
    except OverflowError:
        return Once(x)


def _expect(x: Any, owner: Any, budget: list[int] | None) -> Any:
    if budget is not None:
        budget[0] -= 1
        if budget[0] < 0:
            raise OverflowError("too many elements for an exact check")
    k = kind(x)
    if budget is not None and k in (Kind.DATA, Kind.CONTAINER):
        budget[1] += 1
        try:
            if budget[1] > MAX_DEPTH:
                raise OverflowError("too deep for an exact check")
            return _expect_inside(x, k, budget)
        finally:
            budget[1] -= 1
    if k is Kind.TENSOR:
        return _TENSOR
    if budget is not None and k is Kind.NUMBER:
        return Equal(x)
    if k is Kind.NUMBER or k is Kind.DATA or k is Kind.MODULE:
        return TypeIs(type(x))
    if k is Kind.EQUAL:
        return Equal(x)
    if k is Kind.CONTAINER:
        return _expect_inside(x, k, budget)
    if k is Kind.ONCE:
        return Once(x)
    if type(x) is types.MethodType:
        return MethodOf(x.__func__) if owner is not None and x.__self__ is owner else BoundMethod(x)
    if type(x) is types.BuiltinMethodType and x.__self__ is not None and not isinstance(x.__self__, types.ModuleType):
        return BuiltinBound(x)
    return Same(x)  # IDENTITY, DEFAULT


def _expect_inside(x: Any, k: Kind, budget: list[int] | None) -> Any:
    """A container's matcher, its elements classified again; exact: a data object's too."""
    if k is Kind.DATA:
        attributes = vars(x)
        return DataExact(x, _expect(attributes, None, budget)) if type(attributes) is dict else Same(x)
    if type(x) is slice:
        return Slice(x, tuple(_expect(e, None, budget) for e in (x.start, x.stop, x.step)))
    if isinstance(x, dict):
        return Mapping(x, tuple(_expect(v, None, budget) for v in x.values()))
    return Sequence(x, tuple(_expect(e, None, budget) for e in x))


_TENSOR = Anything(torch.Tensor, "a tensor")


def text(where: str, matcher: Any) -> str:
    """How explain() names a check: ``m is Mode.A``, ``s == 'ab'``, ``type(cfg) is Config``,
    ``l: list[int, is Mode.A]``."""
    if isinstance(matcher, Same):
        return f"{where} {matcher!r}"
    if isinstance(matcher, TypeIs):
        return f"type({where}) is {matcher!r}"
    return f"{where} == {matcher!r}" if isinstance(matcher, Equal) else f"{where}: {matcher!r}"


class ExpectedArgument:
    """An expected value in ``metatrace.guards.registry.EXPECTED`` (``check_structure`` calls
    ``matches``; explain() prints ``text``)."""

    __slots__ = ("matcher", "text")

    def __init__(self, matcher: Any, text: str):
        self.matcher, self.text = matcher, text

    def matches(self, value: Any, *aliased: Any) -> bool:
        return self.matcher.matches(value)
