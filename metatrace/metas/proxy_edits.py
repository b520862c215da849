"""The one place metatrace changes a thunder object in place: a proxy, or the interpreter's
provenance records and wrappers.

thunder's proxies are shared between traces and have no API to change them, so metatrace edits
them in place, here only, in five cases:

- a tensor's sizes renamed (:func:`set_shape`): thunder renames input proxies after interpreting
  (``i3`` becomes the argument ``i``) but not the size symbols inside tensor shapes
  (``metatrace.proxies.renames``), and executor passes rename sizes again
  (``metatrace.passes.keep_size_names``);
- a fallback prim's output sizes made constants (:func:`set_shape` too): the cache entry pins
  them, and no size symbol may lack a producer (``metatrace.metas.recording.fallback_meta``);
- a tensor's ``requires_grad`` set as eager sets it (:func:`set_requires_grad`): thunder's metas
  give an output its first input's flag, and an in-place write changes its destination's
  (``metatrace.grad``); an input's is given back after interpretation (:func:`restore_input_flags`);
- a number just recorded as a tensor's element count given a callable class
  (:func:`give_class`): thunder calls ``a.numel()`` as well as reading ``a.numel``
  (``metatrace.proxies.numel``). Only a proxy nothing else holds yet may change class;
- a proxy copied with tags of its own (:func:`copy_with_own_tags`), for a trace that renames its
  sizes while another trace holds the original (``metatrace.passes.keep_size_names``).

The interpreter's provenance records and wrapped values are thunder's too, and change only here:

- a flag added to a record (:func:`add_record_flag`): thunder's own flags (``EXT_FLAG_IS_CALLABLE``
  for an attribute read from the user's module, ``EXT_FLAG_IS_PROXY_DERIVED``) and metatrace's
  library-module bit decide how the prologue reads a value; thunder's proxy flags taken off a
  value metatrace keeps as the object it is, an enum member (:func:`clear_record_flags`);
- a record's input replaced by an equal one (:func:`replace_record_input`): the epilogue's replay
  shares one root record per kind (``metatrace.mutations.replay``);
- an item or attribute wrapper set on a wrapped value (:func:`set_item_wrapper`,
  :func:`set_attribute_wrapper`): a dict literal's items and a number's attribute answered from
  its value are tracked as thunder tracks a list literal's.
"""

from __future__ import annotations

import copy
import functools
import operator
from typing import Any

from thunder.core.proxies import Proxy, TensorProxy

from metatrace.state.view_families import VIEW_FAMILIES


def numel_of_current_shape(p: TensorProxy):
    """A tensor's ``numel`` that reads its shape when called. Under symbolic values thunder's is a
    closure over the shape the tensor was built with, so a renamed shape would bring the stale
    names back (the grad transform's ``a.numel``, into backward traces). A plain function like
    thunder's own lambda (pytree flattens functions, not partials)."""

    def numel(*args):
        return functools.reduce(operator.mul, p._shape, 1)

    return numel


def set_shape(p: TensorProxy, shape: tuple) -> None:
    """``p``'s sizes are ``shape`` from now on, in every trace that holds ``p``; its ``numel``
    follows (a computed ``numel`` reads the new shape; a constant one is the same product)."""
    p._shape = tuple(shape)
    if callable(p._numel):
        p._numel = numel_of_current_shape(p)


def give_class(p: Proxy, cls: type) -> None:
    """``p`` becomes an instance of ``cls`` (a subclass of its class adding behaviour, no state)."""
    assert issubclass(cls, type(p)), (cls, type(p))
    p.__class__ = cls


def set_requires_grad(p: TensorProxy, flag: bool) -> None:
    """``p.requires_grad`` is ``flag`` from now on: thunder's metas give an output its first
    input's flag, and an in-place write changes its destination's (``metatrace.grad``)."""
    p._requires_grad = flag


def restore_input_flags(trace, inputs) -> None:
    """The inputs (thunder's Variables) among the proxies an in-place write made require grad
    (``metatrace.grad.inplace_writes``) get their flag back once the function is interpreted: the
    caller's tensor keeps its own, and the prologue checks it by the proxy's."""
    families = VIEW_FAMILIES.get(trace, create=False)
    if families is None or not families.raised:
        return
    raised = {id(p) for p in families.raised}
    for v in inputs:
        if id(v.proxy) in raised:
            set_requires_grad(v.proxy, False)


def copy_with_own_tags(p: Proxy) -> Proxy:
    """A shallow copy of ``p`` whose tag set is its own (edits to the copy leave ``p`` alone)."""
    p = copy.copy(p)
    p._tags = set(p._tags)
    return p


def add_record_flag(record, flag: int) -> None:
    """``flag`` added to a provenance record's flags."""
    record.ext_flag |= flag


def clear_record_flags(record, flags: int) -> None:
    """``flags`` taken off a provenance record's flags."""
    record.ext_flag &= ~flags


def replace_record_input(record, i: int, new) -> None:
    """A provenance record's ``i``-th input replaced by ``new`` (a record of the same root)."""
    record.inputs[i] = new


def set_item_wrapper(wrapped, key, item, key_wrapper=None) -> None:
    """The wrapper of ``wrapped``'s item ``key`` (and of the key itself, for a dict)."""
    wrapped.item_wrappers[key] = item
    if key_wrapper is not None:
        wrapped.key_wrappers[key] = key_wrapper


def set_attribute_wrapper(wrapped, name, attribute) -> None:
    """The wrapper of ``wrapped``'s attribute ``name``."""
    wrapped.attribute_wrappers[name] = attribute


def renamed_copy(p: Proxy, name: str, history: Any, shape: tuple | None) -> Proxy:
    """A copy of ``p`` (its class, value, tags and flags) named ``name``, read through
    ``history``, and for a tensor with sizes ``shape`` (a stamped block's proxy:
    ``metatrace.interpret.modules.block_renaming``)."""
    q = copy_with_own_tags(p)
    q._name = name
    q._has_weak_name = False
    q.history = history
    if shape is not None:
        set_shape(q, shape)
    return q
