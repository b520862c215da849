"""The mutating callables, as one table, and metatrace's one lookaside of each (a row per
callable of :data:`MUTATORS`), its steps in order:

1. a call on a pre-existing object (below) is recorded: an iterator argument of a method that
   consumes one is read into a list, for the replay, and the object snapshotted, for the undo
   (:func:`run_recorded`);
2. the call runs as thunder would run it (:func:`_inner`): thunder's lookaside, metatrace's
   Python version, or C code; a set's in-place update (``s.update(l)``) as C code given its
   arguments' eager views
   (:func:`metatrace.interpret.calls.c_code.eager_views.set_update_lookaside`);
3. the outermost such call that did not raise is logged for the epilogue's replay.

A call is recorded when its target existed before the call: its provenance is rooted in the
call's arguments, the jitted function or module, or the function's globals, closure and
defaults, and not read through an installed library's module (a library's own state, which
its own code keeps, is left to thunder as before). A target the trace built itself is the
trace's business: its mutations are part of the computation.

List methods thunder's interpreter refuses (``sort``, ``insert``, ``remove``, ``clear``,
``*=``) get Python versions it interprets, for any list: the comparisons ``sort`` makes are
traced (and guarded) like the user's own.
"""

from __future__ import annotations

import collections
import functools
import operator
import types

import thunder.core.interpreter as interpreter
import thunder.core.jit_ext as jit_ext
from thunder.core.compile_data import using_symbolic_values
from thunder.core.interpreter import INTERPRETER_SIGNALS, WrappedValue, _interpret_call
from thunder.core.proxies import Proxy

from metatrace.guards import provenance
from metatrace.guards.collect import interpreted_line
from metatrace.interpret.calls.c_code import eager_views
from metatrace.state.compile_session import current_jit_ctx, session
from metatrace.mutations.log import Mutation, MutationLog
from metatrace.mutations.snapshots import restorer
from metatrace.patching import Patch, item


# Python versions of the list methods thunder's interpreter refuses; interpreted, so the
# comparisons and slice stores they make go through thunder (and this module) like the user's.
def _list_insert(self, index, value, /):
    self[index:index] = [value]


def _list_remove(self, value, /):
    for i, item in enumerate(self):
        if item is value or item == value:
            del self[i]
            return
    raise ValueError("list.remove(x): x not in list")


def _list_clear(self, /):
    del self[:]


def _list_imul(self, n, /):
    self[:] = list(self) * n
    return self


def _list_sort(self, /, *, key=None, reverse=False):
    keys = [key(x) for x in self] if key is not None else list(self)
    order = list(range(len(keys)))
    width = 1
    while width < len(order):  # bottom-up merge sort: stable, comparing with ``<`` only, as list.sort does
        merged = []
        for lo in range(0, len(order), 2 * width):
            left, right = order[lo:lo + width], order[lo + width:lo + 2 * width]
            i = j = 0
            while i < len(left) and j < len(right):
                a, b = keys[left[i]], keys[right[j]]
                if (a < b) if reverse else (b < a):
                    merged.append(right[j])
                    j += 1
                else:
                    merged.append(left[i])
                    i += 1
            merged += left[i:] + right[j:]
        order = merged
        width *= 2
    self[:] = [self[i] for i in order]


# The operator module's statement functions, as the statements they are: interpreted, the
# store reaches the container's own (recorded) method instead of mutating it inside C code.
def _setitem(a, b, c, /):
    a[b] = c


def _delitem(a, b, /):
    del a[b]


def _in_place(op):
    namespace: dict = {}
    exec(f"def in_place(a, b, /):\n    a {op}= b\n    return a", namespace)
    return namespace["in_place"]


OPERATOR_STATEMENTS = {operator.setitem: _setitem, operator.delitem: _delitem,
                       **{getattr(operator, f"i{name}"): _in_place(op) for name, op in (
                           ("add", "+"), ("sub", "-"), ("mul", "*"), ("or", "|"), ("and", "&"), ("xor", "^"),
                           ("concat", "+"))}}

def _dict_popitem(self, /):
    # (thunder's version passes ``last=`` to every mapping's popitem; a dict's takes none)
    if not self:
        raise KeyError("popitem(): dictionary is empty")
    key = list(self)[-1]
    return key, self.pop(key)


# Python versions of the methods thunder's interpreter refuses or gets wrong, for every object of the type.
PYTHON_VERSIONS = {list.insert: _list_insert, list.remove: _list_remove, list.clear: _list_clear,
                   list.__imul__: _list_imul, list.sort: _list_sort, dict.popitem: _dict_popitem}

# What mutates its first argument: the methods of the mutable builtin containers, and the
# attribute stores. ``True``: the mutation is of the object's attributes, whatever its type.
MUTATORS: dict = {
    **{getattr(list, n): False for n in ("append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse",
                                         "__setitem__", "__delitem__", "__iadd__", "__imul__")},
    **{getattr(dict, n): False for n in ("__setitem__", "__delitem__", "pop", "popitem", "setdefault", "update",
                                         "clear", "__ior__")},
    **{getattr(collections.OrderedDict, n): False for n in ("__setitem__", "__delitem__", "pop", "popitem",
                                                            "setdefault", "update", "clear", "move_to_end",
                                                            "__ior__")},
    **{getattr(set, n): False for n in ("add", "discard", "remove", "pop", "clear", "update", "difference_update",
                                        "intersection_update", "symmetric_difference_update", "__ior__", "__iand__",
                                        "__isub__", "__ixor__")},
    setattr: True, delattr: True, object.__setattr__: True, object.__delattr__: True,
    # C types' own attribute stores (reached from setattr through ``type(o).__setattr__``): run on
    # the unwrapped values, as the generic store they are; thunder would otherwise take one with a
    # tensor argument for an unknown torch operation
    types.SimpleNamespace.__setattr__: True, types.SimpleNamespace.__delattr__: True,
}


def current_log() -> MutationLog | None:
    """The mutation log of the compile running now (symbolic values only), else None."""
    ctx = current_jit_ctx()
    if ctx is None:
        return None
    if not using_symbolic_values():
        return None
    compile_session = session(ctx)
    if compile_session.mutations is None:
        compile_session.mutations = MutationLog()
    return compile_session.mutations


def _unmutated(pr):
    """The record of the object as the call gave it (thunder re-records a list as it is appended to)."""
    while pr is not None and pr.inst in (interpreter.PseudoInst.LIST_APPEND, interpreter.PseudoInst.LIST_EXTEND):
        pr = pr.inputs[0]
    return pr


def _mutable_default(obj):
    """(obj, record) if ``obj`` is a mutable default of a function the trace called."""
    try:
        return session(jit_ext.get_jit_ctx()).mutable_defaults.get(id(obj))
    except LookupError:
        return None


_PRE_EXISTING_ROOTS = (provenance.Root.ARGS, provenance.Root.KWARGS, provenance.Root.FUNCTION)


def source(log: MutationLog, wrapped: WrappedValue):
    """The record the prologue reads ``wrapped``'s object by, if the object existed before the call, else None."""
    obj = wrapped.value
    known = log.sources.get(id(obj))
    if known is None and (known := _mutable_default(obj)) is not None and known[0] is obj:
        log.sources[id(obj)] = known
    if known is not None and known[0] is obj:
        return known[1]
    if isinstance(obj, Proxy):
        return None
    pr = _unmutated(getattr(wrapped, "provenance", None))
    if provenance.parse(pr).root not in _PRE_EXISTING_ROOTS or provenance.through_library_module(pr):
        return None
    log.sources[id(obj)] = (obj, pr)
    return pr


# Methods that consume an iterable argument: an iterator there (``d.update(zip(keys, values))``)
# is read into a list first, so the replay gets its items (the trace's iterator cannot be made
# again for every call).
_CONSUMING = frozenset({list.extend, list.__iadd__, dict.update, collections.OrderedDict.update, set.update,
                        set.difference_update, set.intersection_update, set.symmetric_difference_update})
_REPLAYABLE_ITERABLES = (list, tuple, dict, set, frozenset, str, bytes, range)


def run_recorded(log: MutationLog, fn, target: WrappedValue, args: tuple, kwargs: dict, run, attributes: bool):
    """Runs ``run()`` (how thunder makes the mutation ``fn(target, *args, **kwargs)`` on a
    pre-existing ``target``) with the target snapshotted first and the mutation logged for the
    replay if it is the outermost one and did not raise."""
    obj = target.value
    if id(obj) not in log.snapshots:
        log.snapshots[id(obj)] = (obj, restorer(obj, attributes=attributes, where=interpreted_line()))
    outermost = log.depth == 0
    log.depth += 1
    try:
        result = run()
    finally:
        log.depth -= 1
    if outermost and result is not INTERPRETER_SIGNALS.EXCEPTION_RAISED:
        log.mutations.append(Mutation(fn, obj, args, kwargs, interpreted_line()))
    return result


def _recording(fn, inner, attributes: bool):
    def lookaside(target, *args, **kwargs):
        log = current_log()
        if log is None or not isinstance(target, WrappedValue) or source(log, target) is None:
            return inner(target, *args, **kwargs)
        if fn in _CONSUMING and args and not isinstance(interpreter.unwrap(args[0]), _REPLAYABLE_ITERABLES):
            items = _interpret_call(list, args[0])
            if items is INTERPRETER_SIGNALS.EXCEPTION_RAISED:
                return items
            args = (items, *args[1:])
        return run_recorded(log, fn, target, args, kwargs, lambda: inner(target, *args, **kwargs), attributes)

    return lookaside


def _none_wrapped(lookaside):
    """thunder's ``dict.clear`` lookaside returns a bare None, which its interpreter rejects."""

    def wrapped(*args, **kwargs):
        result = lookaside(*args, **kwargs)
        return interpreter.wrap_const(None) if result is None else result

    return wrapped


def _inner(fn, previous):
    """How thunder runs ``fn``: a set's in-place update as C code given its arguments' eager
    views, its general lookaside, its interpreter's provenance-tracking one, metatrace's Python
    version, or the call itself on unwrapped values (an opaque call)."""
    if fn in eager_views.SET_UPDATES:  # (thunder has no lookaside for them)
        return eager_views.set_update_lookaside(fn)
    if previous is not None:
        return previous
    if fn in PYTHON_VERSIONS:
        python_version = PYTHON_VERSIONS[fn]
        return lambda *args, **kwargs: _interpret_call(python_version, *args, **kwargs)
    tracking = interpreter._default_provenance_tracking_lookaside_map.get(fn)
    if tracking is not None:
        return _none_wrapped(tracking)
    return jit_ext.interpreter_needs_wrap(fn)


def _statement(python_version):
    return lambda *args, **kwargs: _interpret_call(python_version, *args, **kwargs)


def patches() -> list[Patch]:
    return [
        item(jit_ext._general_jit_lookaside_map, fn, _statement(python_version),
             "operator.setitem and the in-place operators run as the statements they stand for",
             label="thunder.core.jit_ext._general_jit_lookaside_map")
        for fn, python_version in OPERATOR_STATEMENTS.items()
    ] + [
        item(jit_ext._general_jit_lookaside_map, fn,
             functools.partial(lambda fn, attributes, previous: _recording(fn, _inner(fn, previous), attributes),
                               fn, attributes),
             "a mutation of an object that existed before the call is recorded, undone and replayed every call",
             wrap=True, label="thunder.core.jit_ext._general_jit_lookaside_map")
        for fn, attributes in MUTATORS.items()
    ]
