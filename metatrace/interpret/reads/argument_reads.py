"""Values the trace reads through an attribute of an argument: checked by their kind.

An argument's own value and its containers' elements are checked by
:mod:`metatrace.guards.structure`; a plain data object there (a ``SimpleNamespace``, a dataclass
instance, an object of the user's class) only by its type, so that a fresh but equal object
reuses the entry. What the trace reads from such an object (``cfg.mode``, ``cfg.act``,
``cfg.inner.flag``, ``batch[0].kind``) is checked here, where it is read, through thunder's wrap
callback (:mod:`metatrace.interpret.reads.state_reads` calls :func:`check_argument_read`): once per
path and trace, by the kind :mod:`metatrace.guards.classify` gives it. Numbers, strings, bools
and complex numbers are thunder's proxify's (symbolic, or static with a check of their value:
:mod:`metatrace.interpret.reads.value_proxies`), tensors thunder's checks; modules keep the checks
of their state.

A value that code thunder does not trace computed from arguments (``vars(cfg)["mode"]``: its
provenance is an opaque call, which the prologue cannot replay) makes each argument value that
code was given checked whole instead (:func:`_check_opaque_inputs`).

``getattr(obj, name)`` with a name that is not a constant of the code (a closure's, an
argument's string): thunder records the read with the name's own record as its key, and the
prologue that reads the value again printed ``obj.<Proxy(name="obj6")>`` (a SyntaxError). The
name is a plain ``str``, checked by value where it was read (strings are static:
:mod:`metatrace.interpret.reads.value_proxies`), so the read's key is that constant
(:func:`constant_attribute_name`, a step of metatrace's one wrapper of thunder's
``wrap_attribute``, :mod:`metatrace.grad.requires_grad`).
"""

from __future__ import annotations

import inspect
import types

import thunder.core.jit_ext as jit_ext
import torch
from thunder.core.interpreter import PseudoInst, WrappedValue, wrap_const
from thunder.core.proxies import Proxy

from metatrace.guards import classify, provenance
from metatrace.guards.classify import Kind
from metatrace.state.compile_session import current_jit_ctx, session
from metatrace.guards.provenance import Root
from metatrace.guards.value_checks import add_value_check

# Checked elsewhere: thunder's own checks (tensors), its proxies (numbers), module state.
_NOT_HERE = (Kind.TENSOR, Kind.NUMBER, Kind.MODULE)


def _read_through_attribute(value: WrappedValue) -> bool:
    """Rooted in the call's arguments, read through at least one attribute (an argument or its
    items: ``metatrace.guards.structure``), not an interpreter's step (``__class__``, ``__func__``)."""
    pr = value.provenance
    if not provenance.rooted_in_arguments(pr) or provenance.an_argument_or_its_item(pr):
        return False
    name = provenance.attribute_name(pr)
    if isinstance(name, str) and name.startswith("__"):
        return False
    return not pr.ext_flag & (jit_ext.EXT_FLAG_IS_TENSOR_PROXY | jit_ext.EXT_FLAG_IS_PROXY_DERIVED) or type(
        value.value) is slice  # (a slice's numbers are proxies; which parts are None is checked here)


def _builtin_method_of_its_object(u, step) -> bool:
    """``obj.name`` is the builtin method ``type(obj).name`` bound to ``obj`` (the object itself is
    checked where it was read)."""
    if type(u) is not types.BuiltinMethodType or step is None or step.kind is not provenance.Read.ATTR:
        return False
    owner = u.__self__
    return (owner is not None and not isinstance(owner, types.ModuleType) and isinstance(step.key, str)
            and type(inspect.getattr_static(type(owner), step.key, None)) is types.MethodDescriptorType)


def check_argument_read(value: WrappedValue) -> None:
    u = value.value
    if isinstance(u, (Proxy, torch.Tensor)):
        return  # thunder's
    if provenance.parse(value.provenance).root is Root.OPAQUE:
        _check_opaque_inputs(value)
        return
    if not _read_through_attribute(value):
        return
    if classify.kind(u) in _NOT_HERE or not provenance.rooted_in_prologue(value.provenance):
        return
    ctx = current_jit_ctx()
    if ctx is None:
        return
    step = provenance.last_read(value.provenance)
    owner = None
    if step is not None and step.kind is provenance.Read.ATTR:
        owner = provenance.replay(step.base, call=session(ctx).call)  # (a method bound to it: by its function)
    if _builtin_method_of_its_object(u, step):
        return  # ``kwargs.items``, ``l.index``: a builtin type's method, code that cannot change
    matcher = classify.expect(u, owner=owner)
    parameters = provenance.parameter_names(session(ctx).fn)
    source = provenance.argument_name(value.provenance, parameters) or provenance.text(value.provenance)
    add_value_check(ctx, value.provenance, u, "read from an argument", source=source, matcher=matcher)


# Records an opaque call's arguments go through on the way to it: its argument tuple and dict.
_BUILDS = (PseudoInst.BUILD_TUPLE, PseudoInst.BUILD_DICT, PseudoInst.BUILD_NAMEDTUPLE, PseudoInst.OPAQUE)


def _constructs(record) -> bool:
    """An opaque call that makes an object (a class, a ``__new__``: the interpreter's own cells
    and iterators, ``SimpleNamespace(**kw)``) rather than reading one."""
    callee = record.inputs[0].value if record.inputs and record.inputs[0].inst is PseudoInst.CONSTANT else None
    return isinstance(callee, type) or getattr(callee, "__name__", None) == "__new__"


def _check_opaque_inputs(value: WrappedValue) -> None:
    """``vars(o)["mode"]``, ``str(cfg)``: a value computed from arguments by code whose reads
    thunder does not record (a builtin, C code). The prologue cannot read it again, so each
    argument value that code was given is checked whole (numbers by value, data objects with all
    their attributes: :func:`metatrace.guards.classify.expect` ``exact``)."""
    ctx = current_jit_ctx()
    if ctx is None:
        return
    name = provenance.attribute_name(value.provenance)
    if isinstance(name, str) and name.startswith("__"):
        return  # the interpreter looking up a method (``__init__``, ``__iter__``)
    stack, seen = [provenance.parse(value.provenance).base], 0
    while stack and seen < 64:
        record = stack.pop()
        seen += 1
        constructor = record.inst is PseudoInst.OPAQUE and _constructs(record)
        for r in record.inputs:
            if r.inst in _BUILDS:
                stack.append(r)
            elif constructor:
                continue  # (the object is read through its attributes, and what it holds through theirs)
            elif provenance.rooted_in_arguments(r) and provenance.rooted_in_prologue(r):
                obj = provenance.replay(r, call=session(ctx).call)
                if obj is NotImplemented or classify.kind(obj) in _NOT_HERE:
                    continue
                source = provenance.argument_name(r, provenance.parameter_names(session(ctx).fn)) or "an argument"
                add_value_check(ctx, r, obj, "read whole by code thunder does not trace", source=source,
                                matcher=classify.expect(obj, exact=True))


def constant_attribute_name(name: WrappedValue) -> WrappedValue:
    """The name an attribute read is recorded by: a string that is no constant of the code as the
    constant of its value (the prologue printed ``obj.<Proxy>``); its value is checked where the
    string was read."""
    if type(name.value) is str and name.provenance.inst is not PseudoInst.CONSTANT:
        return wrap_const(name.value)
    return name
