"""Values the trace reads through an attribute of an argument: checked by their kind.

An argument's own value and its containers' elements are checked by
:mod:`metatrace.guards.structure`; a plain data object there (a ``SimpleNamespace``, a dataclass
instance, an object of the user's class) only by its type, so that a fresh but equal object
reuses the entry. What the trace reads from such an object (``cfg.mode``, ``cfg.act``,
``cfg.inner.flag``, ``batch[0].kind``) is checked here, where it is read, through thunder's wrap
callback (:mod:`metatrace.interpret.state_reads` calls :func:`check_argument_read`): once per
path and trace, by the kind :mod:`metatrace.guards.classify` gives it. Numbers, strings, bools
and complex numbers are thunder's proxify's (symbolic, or static with a check of their value:
:mod:`metatrace.interpret.value_proxies`), tensors thunder's checks; modules keep the checks
of their state.
"""

from __future__ import annotations

import inspect
import types

import thunder.core.jit_ext as jit_ext
from thunder.core.interpreter import WrappedValue

from metatrace.guards import classify, provenance
from metatrace.guards.classify import Kind
from metatrace.guards.compile_session import session
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
    if not _read_through_attribute(value):
        return
    u = value.value
    if classify.kind(u) in _NOT_HERE or not provenance.rooted_in_prologue(value.provenance):
        return
    try:
        ctx = jit_ext.get_jit_ctx()
    except LookupError:
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
