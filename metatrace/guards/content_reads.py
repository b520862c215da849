"""Containers the trace only writes to are checked by their type, not their contents.

A list, dict or set that existed before the call (an argument, a global, a module's attribute, an
attribute of an argument) is checked by contents where the trace reads it: what the trace read of
it is baked in. But a training loop's ``self.seen.append(n)``, ``log.append(loss)`` or
``cache[k] = v`` never reads the container: the store is replayed on every call by the epilogue
(``metatrace.mutations.replay``), with that call's values, on whatever object the prologue finds
there. A contents check of such a container fails on the next call (the list grew), so every call
recompiled. Here the trace's uses of each container are watched; a container the trace never read
is checked by its exact type only (the replay needs ``list.append`` to apply).

What counts as reading is decided by default deny: every call thunder's interpreter dispatches
(``metatrace.interpret.calls.dispatch``) with a list, dict or set among its arguments reads it, except

- the target of a method in :data:`WRITE_ONLY` (its result and its errors do not depend on what the
  container holds: ``append``, ``extend``, ``dict.__setitem__``, ``set.add``);
- callables in :data:`CONTENT_FREE`, which look at an object's type or identity only;
- a Python function thunder interprets opcode by opcode (no lookaside): what its body reads comes
  through the same hook.

A bound method comes back to the hook unbound, as thunder canonicalizes it. Direct paths that skip
the dispatch (``metatrace.interpret.costs.fast_paths``) report their reads through :func:`observe`.
A container inside another one is checked with the outer one (by contents when the outer one is
read: C code such as ``str(outer)`` reads the inner one without passing it to any call).

The decision is made once tracing is over (:func:`settle`, before the prologue is built): a check
registered while tracing starts as a contents check and is relaxed only then.
"""

from __future__ import annotations

import types
from dataclasses import dataclass, field
from typing import Any

import thunder.core.interpreter as interpreter
import torch
import thunder.core.jit_ext as jit_ext

from metatrace.guards.matchers import ExpectedArgument, TypeIs
from metatrace.state.registry import EXPECTED

# Exact types only: a subclass may read itself in any method.
WRITABLE = (list, dict, set)
_WRITABLE = frozenset(WRITABLE)

# Methods whose first argument (the target) they change without reading: the same result and
# the same errors whatever the container holds. ``insert`` and ``__setitem__`` on a list depend
# on its length (an index out of range), ``pop``/``remove``/``setdefault`` read it.
WRITE_ONLY = frozenset({
    list.append, list.extend, list.__iadd__,
    dict.__setitem__, dict.update,
    set.add, set.update, set.discard,
})

# Look at an object's type or identity, never at its contents; binding a builtin method or a
# function to an object (``list.append.__get__(l, list)``: how ``l.append`` is read) too.
CONTENT_FREE = frozenset({
    type, isinstance, issubclass, id, callable, getattr, hasattr, object.__getattribute__,
    types.MethodDescriptorType.__get__, types.WrapperDescriptorType.__get__,
    types.ClassMethodDescriptorType.__get__, types.FunctionType.__get__,
})


@dataclass(eq=False)
class ContentReads:
    """One compile's watch over containers: the containers the trace read by id (each held beside
    its id, so that a temporary's id is not another container's once it is freed), and the checks
    to settle."""

    read: dict = field(default_factory=dict)  # id(container) -> the container
    # (expected id, the container, its readable source); the container is held so its id stays its own
    pending: list = field(default_factory=list)

    def note_call(self, fn: Any, args: tuple, kwargs: dict) -> None:
        """A call thunder's interpreter dispatches: ``fn`` unwrapped, ``args`` wrapped."""
        for a in args:  # (the hottest path of a compile: no allocation unless a container is passed)
            if type(getattr(a, "value", None)) in _WRITABLE:
                break
        else:
            if not kwargs or not any(type(getattr(v, "value", None)) in _WRITABLE for v in kwargs.values()):
                return
        if _reads_nothing(fn):
            return
        containers = [a.value for a in (*args, *kwargs.values()) if type(getattr(a, "value", None)) in _WRITABLE]
        if _only_writes(fn) and args and type(getattr(args[0], "value", None)) in _WRITABLE:
            containers = containers[1:]  # the target
        for c in containers:
            self.read[id(c)] = c

    def observe(self, container: Any) -> None:
        if type(container) in _WRITABLE:
            self.read[id(container)] = container

    def observe_reachable(self, result: Any, budget: int = 100_000) -> None:
        """Every container reachable from the function's result is read: thunder builds the
        outputs from their contents (a returned ``{"d": d}`` holds a copy of ``d``'s items made
        while tracing), not through a call this hook sees. Past ``budget`` objects, every
        container is taken as read."""
        seen: set = set()
        todo = [result]
        while todo:
            x = todo.pop()
            if id(x) in seen or isinstance(x, (str, bytes, int, float, type, types.ModuleType)):
                continue
            seen.add(id(x))
            if len(seen) > budget:
                self.pending.clear()  # (nothing is relaxed)
                return
            if type(x) in _WRITABLE:
                self.read[id(x)] = x
            if isinstance(x, dict):
                todo.extend(x.keys())
                todo.extend(x.values())
            elif isinstance(x, (list, tuple, set, frozenset)):
                todo.extend(x)
            elif type(getattr(x, "__dict__", None)) is dict and not isinstance(x, torch.nn.Module):
                todo.extend(vars(x).values())

    def was_read(self, container: Any) -> bool:
        return id(container) in self.read

    def watch(self, expected_id: str, container: Any, source: str) -> None:
        self.pending.append((expected_id, container, source))

    def settle(self) -> None:
        """Relaxes the contents check of every watched container the trace never read."""
        for expected_id, container, source in self.pending:
            if id(container) not in self.read and expected_id in EXPECTED:
                EXPECTED[expected_id] = only_its_type(container, source)
        self.pending.clear()


def only_its_type(container: Any, source: str) -> ExpectedArgument:
    return ExpectedArgument(TypeIs(type(container)),
                            f"type({source}) is {type(container).__name__} (the trace only writes to it)")


def _only_writes(fn: Any) -> bool:
    try:
        return fn in WRITE_ONLY
    except TypeError:  # unhashable
        return False


def _reads_nothing(fn: Any) -> bool:
    try:
        if fn in CONTENT_FREE:
            return True
    except TypeError:  # unhashable
        return False
    if type(fn) is types.MethodType:
        return True  # thunder calls ``__func__`` with ``__self__`` next, through the same hook
    if isinstance(fn, (types.BuiltinMethodType, types.MethodWrapperType)) and type(fn.__self__) in _WRITABLE:
        return True  # canonicalized by thunder to ``list.append(l, ...)``, which comes back here
    return type(fn) is types.FunctionType and not _has_lookaside(fn)


def _has_lookaside(fn: types.FunctionType) -> bool:
    """Whether thunder's interpreter runs ``fn`` through a lookaside (thunder's or metatrace's
    table rows, an executor's) rather than opcode by opcode: a lookaside reads its arguments in
    Python, unseen."""
    try:
        ctx = jit_ext.get_jit_ctx()
        return (fn in ctx._executor_lookasides or fn in ctx.ad_hoc_executor._lookasides or fn in jit_ext._clang_fn_set
                or fn in jit_ext._general_jit_lookaside_map
                or fn in interpreter._default_provenance_tracking_lookaside_map
                or fn in interpreter._default_lookaside_map)
    except (LookupError, TypeError):
        return True
