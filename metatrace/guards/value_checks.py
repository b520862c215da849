"""Prologue checks of Python values that are not numbers: by contents, never by identity.

A trace bakes in every Python value it reads that thunder does not proxy: a dtype read from a
global (``x.to(DT)``), a list reached through a closure, a module attribute that is an enum or a
tuple. thunder's symbolic-values prologue checks none of them, so rebinding the global or
mutating the list in place reused an entry built for the old value. While metatrace is enabled,
every such value whose provenance the prologue can replay (it is read from the jitted function's
globals, closures, defaults or module, not computed inside) gets one check of its contents:

- leaves (``str``, ``bool``, ``None``, dtypes, devices, layouts, memory formats, enums, ranges)
  compare by type and value;
- containers (``list``, ``tuple``, ``dict``, ``set``) compare their structure and every leaf in
  one check (one prologue operation however many elements), floats exactly (``repr``: NaN equals
  NaN, ``-0.0`` differs from ``0.0``), tensors and modules by kind only (thunder's own checks
  cover a tensor's metadata; a module's state is checked through its own reads);
- anything else (functions, user objects) by identity of the object, held weakly where it can be
  (``metatrace.guards.matchers.Identity``).

The check runs as ``metatrace_structure(id, value)`` in the prologue (``metatrace.guards.structure``'s
operator); ``metatrace.explain`` prints it as ``<source> == <value>`` with the reason.
"""

from __future__ import annotations

import enum
from types import MethodType
from typing import Any

import torch
from thunder.core.interpreter import ProvenanceRecord
from thunder.core.proxies import Proxy

from metatrace.proxies.plain_trees import exact_nodes
from metatrace.guards import content_reads, matchers, provenance
from metatrace.guards.check_texts import NO_VALUE, CheckText
from metatrace.guards.matchers import ExpectedArgument, Identity, short_repr
from metatrace.metas.relations import Relation
from metatrace.state.compile_session import session
from metatrace.state.registry import EXPECTED, compiled_by_this_call, new_id, structure_symbol

LEAF_TYPES = (str, bool, int, float, complex, type(None), type(Ellipsis), torch.dtype, torch.device, torch.layout,
              torch.memory_format, range, bytes)
CONTAINER_TYPES = (list, tuple, dict, set, frozenset)
# Above this many elements a snapshot is not taken: the value is pinned by identity and length
# (still correct for rebinding; an in-place change of such a container keeps its identity and
# is caught by the length only).
MAX_SNAPSHOT = 4096


def snapshot(x: Any, budget: list[int] | None = None) -> Any:
    """A comparable description of ``x``'s contents (see the module docstring)."""
    if budget is None:
        budget = [MAX_SNAPSHOT]
    budget[0] -= 1
    if budget[0] < 0:
        raise OverflowError("value too large to snapshot")
    t = type(x)
    if t is float or t is complex:
        return (t.__name__, repr(x))
    if t in LEAF_TYPES:
        return (t.__name__, x)
    if isinstance(x, enum.Enum):
        return (t.__qualname__, x.name)
    if t in (list, tuple):
        return (t.__name__, tuple(snapshot(e, budget) for e in x))
    if t is dict:
        return ("dict", tuple((snapshot(k, budget), snapshot(v, budget)) for k, v in x.items()))
    if t in (set, frozenset):
        return (t.__name__, frozenset(snapshot(e, budget) for e in x))
    if isinstance(x, torch.Tensor):
        return ("tensor",)
    if isinstance(x, torch.nn.Module):
        return ("module", t.__qualname__)
    return ("object", _IdentityKey(x))


class _IdentityKey:
    """Inside a snapshot: equal to another key of the same object."""

    __slots__ = ("identity",)

    def __init__(self, obj: Any):
        self.identity = Identity(obj)

    def __eq__(self, other) -> bool:
        if not isinstance(other, _IdentityKey):
            return False
        # either side may be a check loaded from disk, which holds no object until it matched one
        # (metatrace.entry_cache.stable_refs): the live object is matched by the other side's check
        obj = other.identity.get()
        if obj is not None and self.identity.matches(obj):
            return True
        obj = self.identity.get()
        return obj is not None and other.identity.matches(obj)

    def __hash__(self) -> int:
        return id(self.identity.get())

    def __repr__(self) -> str:
        return repr(self.identity)


class ExpectedValue:
    """An expected value in ``metatrace.state.registry.EXPECTED``: checked by ``matches``.

    After a call matched, the value is pinned (:func:`_pins`): the next call that passes the same
    object, whose dicts have the versions they had (CPython changes a dict's version on every
    change), holds the same contents and matches without a new snapshot. A hit's prologue checks
    the same module state on every call, so this is the common case."""

    __slots__ = ("expected", "text", "length", "pinned")

    def __init__(self, value: Any, text: str):
        self.text = text
        self.pinned = None  # (the object, its dicts' versions, its modules' types) of the last match
        try:
            self.expected = snapshot(value)
            self.length = None
            if type(self.expected[1]) is _IdentityKey:  # a function, an object: compared by identity
                self.expected = self.expected[1].identity  # without a snapshot per check
        except OverflowError:
            self.expected = Identity(value)
            self.length = len(value) if hasattr(value, "__len__") else None

    def __reduce__(self):
        # a stored entry (metatrace.entry_cache): the expected value, not the last object it matched
        return _restored_expected_value, (self.expected, self.text, self.length)

    def matches(self, value: Any) -> bool:
        if isinstance(self.expected, Identity):
            return self.expected.matches(value) and (self.length is None or len(value) == self.length)
        pinned = self.pinned
        if pinned is not None:
            if value is pinned[0] and _unchanged(pinned) or pinned[3] and _same_strings(value, pinned[0]):
                return True
        try:
            same = snapshot(value) == self.expected
        except OverflowError:
            return False
        if same and _dict_version is not None:
            self.pinned = _pins(value)
        return same


def _restored_expected_value(expected, text: str, length) -> ExpectedValue:
    restored = ExpectedValue.__new__(ExpectedValue)
    restored.expected, restored.text, restored.length, restored.pinned = expected, text, length, None
    return restored


try:  # CPython's per-dict version (PEP 509), as torch's dynamo reads it for its dict guards
    from torch._C._dynamo.guards import dict_version as _dict_version
except ImportError:  # pragma: no cover - a torch without it: every check takes a snapshot
    _dict_version = None


def _pins(x: Any) -> tuple | None:
    """What keeps ``x``'s snapshot valid while ``x`` is the same object: the version of each dict
    in it, the type of each module in it (the snapshot compares a module by type); and whether it
    is a tuple of exact strings (then an equal tuple matches too). None where a container has no
    version (a list, a set: the next call takes a snapshot)."""
    dicts: list = []
    types: list = []
    for v in exact_nodes(x, dict_keys=True):
        t = type(v)
        if t is dict:
            dicts.append((v, _dict_version(v)))
        elif t is list or t is set or t is bytearray:
            return None
        elif isinstance(v, torch.nn.Module):
            types.append((v, t))
        # leaves, enums, tensors and objects compared by identity cannot change under the same container
    strings = type(x) is tuple and all(type(e) is str for e in x)
    return (x, tuple(dicts), tuple(types), strings)


def _same_strings(value: Any, pinned: tuple) -> bool:
    """An equal tuple of exact strings (``code.co_varnames`` builds a new tuple on every read):
    ``==`` between exact strings compares their contents, as the snapshot does."""
    return type(value) is tuple and value == pinned and all(type(e) is str for e in value)


def _unchanged(pinned: tuple) -> bool:
    for d, version in pinned[1]:
        if _dict_version(d) != version:
            return False
    for obj, t in pinned[2]:
        if type(obj) is not t:
            return False
    return True


class ValueConstraint:
    """A prologue constraint: thunder calls it with the proxy that unpacks the value."""

    def __init__(self, value_id: str):
        self.value_id = value_id

    def __call__(self, value_proxy, *more_proxies):
        structure_symbol()(self.value_id, value_proxy, *more_proxies)


# Values a check's structured form keeps (explain compares them with thunder's checks of one value).
_SHOWN_VALUES = frozenset({int, float, bool, complex, str, type(None)})


def add_value_check(ctx, record: ProvenanceRecord, value: Any, why: str, source: str | None = None,
                    matcher: Any = None, reads_seen: bool = True) -> None:
    """Adds a prologue check that the value read through ``record`` has ``value``'s contents (or,
    given a ``metatrace.guards.matchers`` ``matcher``, matches it). Once per provenance and trace
    (the compile session's ``value_checks``). ``reads_seen``: the trace's reads of the value's
    contents go through its provenance, so a container only written to may be checked by type
    (:mod:`metatrace.guards.content_reads`); not so for a value bound as a constant (defaults)."""
    checked = session(ctx).value_checks
    key = provenance.key(record)
    if key in checked:
        return
    checked.add(key)
    value_id = new_id("v")
    source = source or provenance.text(record, session(ctx).fn)
    if matcher is None:
        shown = value if type(value) in _SHOWN_VALUES else NO_VALUE  # (no reference to a module, a tensor)
        text = CheckText(f"{source} == {short_repr(value)} ({why})", source, Relation.EQ, shown, why)
        EXPECTED[value_id] = ExpectedValue(value, text)
    else:
        EXPECTED[value_id] = ExpectedArgument(matcher, CheckText(f"{matchers.text(source, matcher)} ({why})",
                                                                 source, reason=why))
    if reads_seen and type(value) in content_reads.WRITABLE and session(ctx).content_reads is not None:
        session(ctx).content_reads.watch(value_id, value, source)  # by type if the trace only writes it
    from thunder.core.trace import tracectx

    with tracectx(ctx.computation_trace):
        proxy = Proxy(prefix="value", history=record)
    ctx.add_constraint((ValueConstraint(value_id), proxy))


class ExpectedPresence:
    """Whether an object has an attribute (``hasattr``), as the trace decided on it: a
    ``getattr(obj, name, default)`` that took the default, a ``hasattr`` (lazy state stored on a
    module or an object by an earlier call)."""

    __slots__ = ("name", "present", "text")

    def __init__(self, name: str, present: bool, text: CheckText):
        self.name, self.present, self.text = name, present, text

    def matches(self, obj: Any, *aliased: Any) -> bool:
        return hasattr(obj, self.name) is self.present


def add_presence_check(ctx, record: ProvenanceRecord, name: str, present: bool, why: str) -> None:
    """Adds a prologue check that the object read through ``record`` has (or lacks) the attribute
    ``name``. Once per provenance, name and trace."""
    checked = session(ctx).value_checks
    key = (provenance.key(record), "hasattr", name)
    if key in checked:
        return
    checked.add(key)
    value_id = new_id("v")
    subject = f"hasattr({provenance.text(record, session(ctx).fn)}, {name!r})"
    EXPECTED[value_id] = ExpectedPresence(name, present, CheckText(f"{subject} is {present} ({why})", subject,
                                                                   Relation.EQ, present, why))
    from thunder.core.trace import tracectx

    with tracectx(ctx.computation_trace):
        proxy = Proxy(prefix="value", history=record)
    ctx.add_constraint((ValueConstraint(value_id), proxy))


class ExpectedSameObject:
    """Two paths of the user's state that led to one object when the trace read it through both
    (``metatrace.interpret.reads.aliases``): still one object (equal leaves of one type, for the
    immutable values Python may or may not share)."""

    __slots__ = ("text", "made_by_the_call")

    def __init__(self, text: CheckText):
        self.text, self.made_by_the_call = text, False

    def matches(self, second: Any, first: Any) -> bool:
        if self.made_by_the_call or _same_object(second, first):
            return True
        if compiled_by_this_call():
            # the paths were not one object before the call that compiled the entry: its own store
            # made them one (``self.cache = self.cfg``; a cached property), and the trace read the
            # second path's value from that store, which it replays, not from the state before a call
            self.made_by_the_call = True
            return True
        return False

    def __reduce__(self):
        return _restored_same_object, (self.text, self.made_by_the_call)


def _restored_same_object(text: CheckText, made_by_the_call: bool) -> ExpectedSameObject:
    check = ExpectedSameObject(text)
    check.made_by_the_call = made_by_the_call
    return check


def _same_object(second: Any, first: Any) -> bool:
    if second is first:
        return True
    if type(second) is MethodType and type(first) is MethodType:
        # (a method read through an object is a new bound method on every read: the trace ran the
        # function, ``type(obj).f`` looked up through both objects)
        return second.__func__ is first.__func__
    return type(second) is type(first) and type(first) in LEAF_TYPES and second == first


def add_alias_check(ctx, second: ProvenanceRecord, first: ProvenanceRecord, value: Any) -> None:
    """Adds the prologue check that ``second`` leads to the object ``first`` leads to (the trace read
    ``value`` through both). Once per pair of paths and trace."""
    checked = session(ctx).value_checks
    key = ("alias", provenance.key(second), provenance.key(first))
    if key in checked:
        return
    checked.add(key)
    value_id = new_id("v")
    fn = session(ctx).fn
    subject, other = provenance.text(second, fn), provenance.text(first, fn)
    relation = "==" if type(value) in LEAF_TYPES else "is"
    own = all(provenance.parse(r).root is provenance.Root.FUNCTION for r in (second, first))
    EXPECTED[value_id] = ExpectedSameObject(CheckText(
        f"{subject} {relation} {other} (the trace read one {type(value).__name__} through both)", subject,
        reason="one object read through two paths", own_state=own))
    from thunder.core.trace import tracectx

    with tracectx(ctx.computation_trace):
        proxies = (Proxy(prefix="value", history=second), Proxy(prefix="value", history=first))
    ctx.add_constraint((ValueConstraint(value_id), *proxies))


class ExpectedContiguity:
    """An input tensor's ``is_contiguous(memory_format=...)`` as the trace saw it: thunder models no
    strides (its answer comes from a contiguous fake tensor), so the real answer is read from the
    argument at trace time and checked in the prologue."""

    __slots__ = ("memory_format", "expected", "text")

    def __init__(self, memory_format, expected: bool, text: str):
        self.memory_format, self.expected, self.text = memory_format, expected, text

    def matches(self, t) -> bool:
        return isinstance(t, torch.Tensor) and t.is_contiguous(memory_format=self.memory_format) == self.expected
