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
MODULE                its type (its state: ``metatrace.interpret.modules.module_state``, ``called_modules``)
IDENTITY              ``is`` (enum members, functions, classes, generators: what they are is
                      which object they are); a bound method by ``__func__`` and ``__self__``
ONCE                  an entry for this call only (iterators, generators: ``next(it)`` in the
                      trace gave a value the same object never gives again)
DATA                  its type by identity; each attribute the trace reads is checked where it is
                      read (``metatrace.interpret.reads.state_reads``), so a fresh but equal object
                      reuses the entry
DEFAULT               anything else: type and identity. Never skipped: a value the table does not
                      know may mean anything to the trace
====================  =========================================================================

:func:`expect` turns a value into a matcher (one object per checked value, walked once per call:
one comparison per leaf; the matchers are :mod:`metatrace.guards.matchers`). An identity holds its
object weakly where the type allows it, else strongly (``matchers.Identity``).
"""

from __future__ import annotations

import collections.abc
import enum
import fractions
import functools
import types
from typing import Any

import numpy
import torch

from metatrace.guards.matchers import (Anything, BoundMethod, BuiltinBound, DataExact, Equal, Mapping, MethodOf,
                                       Once, Same, Sequence, Slice, TypeIs)


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
    # (metatrace.interpret.reads.value_proxies keeps it the object it is), which may carry more than its value
    ((int, float, complex, str, bytes), Kind.DEFAULT),
    # an iterator changes as it is read: the trace baked in what ``next`` gave while it was made
    ((collections.abc.Iterator, types.CoroutineType, types.AsyncGeneratorType), Kind.ONCE),
    ((list, tuple, dict), Kind.CONTAINER),  # namedtuples, torch.Size, OrderedDict: by their own type
)


def kind(x: Any) -> Kind:
    k = BY_TYPE.get(type(x))
    if k is not None:
        return k
    for classes, k in BY_CLASS:
        if isinstance(x, classes):
            return k
    return Kind.DATA if hasattr(x, "__dict__") else Kind.DEFAULT


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
