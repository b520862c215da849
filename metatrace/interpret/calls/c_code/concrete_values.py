"""Values given to C code with their number proxies replaced by the numbers, each guarded by
equality: the one walk :mod:`values_as_text` (``str``, ``repr``, ``format``, ``hash``) and
:mod:`opaque_calls` (any other C function) share.

C code renders, hashes or reads a proxy as the Python object it is (``slice(i2=-2, None, None)``,
``{i0=2: 4}`` where eager prints ``slice(-2, None, None)`` and ``{2: 4}``), so every container C
code walks itself is walked here: exact lists, tuples, sets, dicts, slices and SimpleNamespaces,
and the standard library's containers built on them (namedtuples, ``OrderedDict``,
``defaultdict``, ``Counter``, ``deque``), rebuilt as the same type, and a tensor's shape
(:class:`EagerSize`), rebuilt as eager's ``torch.Size``. Any other object is C code's
own business (its attributes are read through the interpreter, which sees them).
"""

from __future__ import annotations

import collections
import types

import torch
from thunder.core.proxies import NumberProxy

from metatrace.metas import concretizations


class EagerSize(tuple):
    """A tensor's shape as eager holds it (a ``torch.Size``) while its sizes are proxies, which a
    ``torch.Size`` cannot hold: made by :mod:`metatrace.interpret.calls.c_code.eager_views` for C code, and made
    a ``torch.Size`` of the values by :func:`concrete` before C code reads it."""

    __slots__ = ()


# Not the walk of :func:`metatrace.interpret.calls.c_code.eager_views.eager_view`, on purpose: that
# one walks the interpreter's wrappers (``item_wrappers``, tracking an input's items) of the
# containers thunder tracks (lists, tuples, dicts, namedtuples) and puts the proxies in where the
# value holds plain numbers; this one walks the plain value C code is about to read, over every
# container C code walks itself (sets, deques, slices, namespaces, a shape too), and takes the
# proxies out (their values, guarded). A call into C code runs that walk, then this one; the opcode
# handlers of eager_views run that walk only (a comparison of the proxies decides a guarded relation
# where this walk would bake in each value).
_SEQUENCES = frozenset({list, tuple, set, frozenset, collections.deque, EagerSize})
_DICTS = frozenset({dict, collections.OrderedDict, collections.defaultdict, collections.Counter})


def _parts(x) -> list | None:
    """What C code reads of ``x`` when it renders or hashes it, or None for a leaf."""
    t = type(x)
    if t in _SEQUENCES or (issubclass(t, tuple) and hasattr(t, "_fields")):  # (a namedtuple)
        return list(x)
    if t in _DICTS:
        return [e for kv in x.items() for e in kv]
    if t is slice:
        return [x.start, x.stop, x.step]
    if t is types.SimpleNamespace:
        return list(vars(x).values())
    return None


def _rebuilt(x, parts: list):
    t = type(x)
    if t in _DICTS:
        pairs = zip(parts[::2], parts[1::2])
        if t is collections.defaultdict:
            return collections.defaultdict(x.default_factory, pairs)
        return t(dict(pairs)) if t is collections.Counter else t(pairs)
    if t is slice:
        return slice(*parts)
    if t is types.SimpleNamespace:
        return types.SimpleNamespace(**dict(zip(vars(x), parts)))
    if t is collections.deque:
        return collections.deque(parts, x.maxlen)
    if t is EagerSize:
        return torch.Size(parts)
    return t._make(parts) if hasattr(t, "_fields") else t(parts)


def _not_walked(x, parts: list | None, depth: int | None, length: int | None) -> bool:
    if parts is None or depth == -1:
        return True
    return length is not None and len(parts) > (2 * length if type(x) in _DICTS else length)


def has_number_proxy(x, depth: int | None = None, length: int | None = None, seen: set | None = None) -> bool:
    """Whether ``x`` holds a number proxy, looking ``depth`` containers deep (None: all) into
    containers of at most ``length`` parts (None: any)."""
    if isinstance(x, NumberProxy):
        return True
    parts = _parts(x)
    if _not_walked(x, parts, depth, length):
        return False
    seen = set() if seen is None else seen
    if id(x) in seen:  # (a container holding itself)
        return False
    seen.add(id(x))
    below = None if depth is None else depth - 1
    return any(has_number_proxy(p, below, length, seen) for p in parts)


def concrete(x, why: str, depth: int | None = None, length: int | None = None, seen: set | None = None):
    """``x`` with every number proxy :func:`has_number_proxy` finds replaced by its value, baked
    in with an equality guard (``why`` says what read it)."""
    if isinstance(x, NumberProxy):
        concretizations.bake_in(x, x.value, why)
        return x.value
    parts = _parts(x)
    if _not_walked(x, parts, depth, length):
        return x
    seen = set() if seen is None else seen
    if id(x) in seen:  # (a container holding itself: rendered as ``[...]`` from the original)
        return x
    seen.add(id(x))
    below = None if depth is None else depth - 1
    new = [concrete(p, why, below, length, seen) for p in parts]
    return x if all(a is b for a, b in zip(new, parts)) else _rebuilt(x, new)
