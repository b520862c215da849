"""What C code is given for a wrapped value: the object eager would give it, its numbers proxies.

Two things thunder's interpreter hands C code differ from eager's objects:

- A number of a list, tuple or dict argument is proxied only when the function reads it (``l[0]``,
  a ``for``): ``set(l)``, ``str(l)``, ``json.dumps(l)``, ``{*l}``, ``f"{l}"`` or ``l == [1, 2]``
  gave C code the list itself, which hashed, compared and printed the plain numbers of the
  compiling call. Nothing reached the guards, and the structure check of ``l`` (its length, its
  elements' types) let a call with other numbers reuse the entry: ``len(set(l))`` was 3 for
  ``[1, 1, 3]`` after ``[1, 2, 3]``, stock thunder too. Here such a container's items are read
  through the interpreter first (thunder's own ``track_items``, the reads ``l[i]`` would make).
- A tensor's shape is a plain tuple of proxies where eager has a ``torch.Size``
  (:mod:`metatrace.interpret.calls.numbers.eager_sizes` notes which): ``str(x.shape)`` was ``(2, 3)``. Here it
  is a ``torch.Size``, or an :class:`~metatrace.interpret.calls.c_code.concrete_values.EagerSize` while it
  holds proxies (which :mod:`metatrace.interpret.calls.c_code.concrete_values` turns into a ``torch.Size`` of
  the values).

So C code is given the same objects with number proxies in them, which
:mod:`metatrace.interpret.calls.c_code.concrete_values` bakes in with their guards where C code reads them (a
proxy hashed pins itself, :mod:`metatrace.proxies.python_number_semantics`; one compared decides
a guarded relation). Only numbers are read: every other item stays the object it is (C code given
a list of tensors gets the tensors, not their proxies). A container the function built holds the
wrappers of what it was built from (``(l,)`` for ``"%s" % (l,)``), which are followed in turn.

Who asks: the calls C code answers (``metatrace.interpret.calls.c_code.opaque_calls``), the lookasides that
give C code a number's value (``metatrace.interpret.calls.c_code.values_as_text``), and here the opcode
handlers that give C code an unwrapped value, ``FORMAT_VALUE`` (``f"{l}"``: thunder formats a
constant of the value), ``SET_UPDATE`` (``{*l}``: ``set.update`` in the handler itself) and
``COMPARE_OP`` (``l == [1, 2, 3]``: the comparison of the unwrapped operands), and a set's
in-place updates (``s.update(l)``), which thunder runs as C code with no lookaside
(:func:`set_update_lookaside`, a step of the mutation records' one lookaside of each,
:mod:`metatrace.mutations.record`).
"""

from __future__ import annotations

import functools

import thunder.core.interpreter as interpreter
import torch
from thunder.core.interpreter import WrappedValue, wrap_const
from thunder.core.proxies import NumberProxy

from metatrace.guards.provenance import rooted_in_prologue
from metatrace.interpret.calls.c_code.concrete_values import EagerSize
from metatrace.interpret.calls.numbers.eager_sizes import is_size
from metatrace.patching import Patch, item
from metatrace.state import compile_context


# Not the walk of :func:`metatrace.interpret.calls.c_code.concrete_values.concrete`, on purpose: this
# one goes from the interpreter's wrappers to values, puts proxies in (an input's plain numbers
# become the proxies the interpreter reads them as) and follows only the containers whose items
# thunder tracks; that one goes over a plain value, takes proxies out (their values, guarded) and
# follows every container C code walks itself. C code's calls run this walk, then that one; the
# opcode handlers here run this one only (the proxies' own dunders then hash, format or compare).
def _walked(t: type) -> bool:
    """Containers whose items thunder's interpreter tracks (a namedtuple is a tuple to it)."""
    return t is list or t is tuple or t is dict or (issubclass(t, tuple) and hasattr(t, "_fields"))


def _item_wrappers(w: WrappedValue) -> list | None:
    """The wrappers of ``w``'s items in its order (a dict's values), or None where they are not
    all known and ``w`` is no input (its items can only be read by C code, as before)."""
    v = w.value
    wrappers = w.item_wrappers
    known = wrappers is not None and len(wrappers) == len(v) and (
        all(x is not None for x in wrappers) if type(v) is not dict else all(k in wrappers for k in v))
    if not known:
        if not rooted_in_prologue(w.provenance):
            return None
        w.track_items()  # (the reads ``l[i]`` make: each number becomes its proxy)
        wrappers = w.item_wrappers
    if type(v) is dict:
        return [wrappers.get(k) for k in v]
    return list(wrappers)


def _same_item(wrapper, item) -> bool:
    return type(wrapper) is WrappedValue and (wrapper.value is item or wrapper.original_value is item)


def eager_view(w, depth: int | None = None, length: int | None = None, sizes: bool = True):
    """``w``'s value (unwrapped) as eager's object: the numbers of the input containers in it
    replaced by the proxies the interpreter reads them as, and (``sizes``) a tensor's shape as a
    ``torch.Size``; the value itself where nothing changes. Looks ``depth`` containers deep
    (None: all) into containers of at most ``length`` items."""
    if type(w) is not WrappedValue:
        return w
    v = w.value
    if sizes and is_size(w):
        return EagerSize(v) if any(isinstance(n, NumberProxy) for n in v) else torch.Size(v)
    if not _walked(type(v)) or not v or depth == -1 or (length is not None and len(v) > length):
        return v
    wrappers = _item_wrappers(w)
    if wrappers is None:
        return v
    items = list(v.values()) if type(v) is dict else list(v)
    below = None if depth is None else depth - 1
    new = []
    for wrapper, item in zip(wrappers, items):
        if not _same_item(wrapper, item):  # (a stale wrapper: the item as C code sees it)
            new.append(item)
        elif isinstance(wrapper.value, NumberProxy):
            new.append(wrapper.value)
        else:
            new.append(eager_view(wrapper, below, length, sizes) if _walked(type(item)) else item)
    if all(a is b for a, b in zip(new, items)):
        return v
    if type(v) is dict:
        return dict(zip(v, new))
    return type(v)._make(new) if hasattr(type(v), "_fields") else type(v)(new)


def may_differ(w) -> bool:
    """The cheap test: :func:`eager_view` of ``w`` may differ from its value (``w`` is a
    non-empty container thunder tracks items of, or a tensor's shape)."""
    return type(w) is WrappedValue and _walked(type(w.value)) and (bool(w.value) or is_size(w))


def _viewing_at(positions_of, sizes: bool = True):
    """An opcode handler that first puts :func:`eager_view` of the values at the stack positions
    ``positions_of(inst)`` (-1: the top) in their places."""

    def wrapper(original):
        @functools.wraps(original)
        def handler(inst, /, stack, **kwargs):
            if compile_context.collector() is not None:
                for at in positions_of(inst):
                    if len(stack) >= -at and may_differ(found := stack.getitem_wrapped(at)):
                        value = eager_view(found, sizes=sizes)
                        if value is not found.value:
                            # (the handlers unwrap what they pop: the record is not read)
                            _replace(stack, at, wrap_const(value))
            return original(inst, stack=stack, **kwargs)

        return handler

    return wrapper


def _replace(stack, at: int, new: WrappedValue) -> None:
    kept = [stack.pop_wrapped() for _ in range(-at - 1)]
    stack.pop_wrapped()
    stack.append(new)
    stack.extend(reversed(kept))


_HAS_SPEC = 0x4  # FORMAT_VALUE's flag: a format spec above the value

# A set's methods that consume an iterable in place: thunder has no lookaside for them, so they
# run as C code on the unwrapped arguments, bypassing ``opaque_calls``.
SET_UPDATES = (set.update, set.difference_update, set.intersection_update, set.symmetric_difference_update)


def _viewed(a):
    value = eager_view(a, sizes=False)
    return a if type(a) is not WrappedValue or value is a.value else wrap_const(value)


def set_update_lookaside(fn):
    """The call of ``fn`` (one of :data:`SET_UPDATES`) as C code given its arguments' eager views:
    ``s.update(l)`` of an input list hashes its numbers' proxies (pinned to their values)."""
    opaque = interpreter.interpreter_needs_wrap(fn)

    def lookaside(target, *args, **kwargs):
        if compile_context.collector() is not None:
            args = tuple(_viewed(a) for a in args)
        return opaque(target, *args, **kwargs)

    lookaside.__name__ = f"metatrace_set_{fn.__name__}_lookaside"
    return lookaside


def patches() -> list[Patch]:
    label = "thunder.core.interpreter._default_opcode_handler_map"
    handlers = interpreter._default_opcode_handler_map
    return [
        item(handlers, "FORMAT_VALUE", _viewing_at(lambda inst: (-2,) if inst.arg & _HAS_SPEC else (-1,)),
             "f\"{l}\" of an input list formats its numbers' values, guarded; f\"{x.shape}\" a torch.Size",
             wrap=True, label=label),
        item(handlers, "SET_UPDATE", _viewing_at(lambda inst: (-1,), sizes=False),
             "{*l} of an input list hashes its numbers' proxies (pinned to their values)", wrap=True, label=label),
        item(handlers, "COMPARE_OP", _viewing_at(lambda inst: (-1, -2), sizes=False),
             "l == [1, 2] of an input list compares its numbers' proxies (guarded relations)", wrap=True, label=label),
    ]
