"""Every function the trace calls is checked where it was read from state: rebinding it
(``helper = other``, ``my_helpers.scale = other``, ``obj.act = torch.neg``, ``MyBlock.forward =
f``), editing it in place (``helper.__code__ = ...``, as IPython's autoreload does) or changing
its defaults (``helper.__defaults__ = (3,)``, a mutable default mutated) misses the entry.

thunder's interpreter calls what the traced code calls: a Python function is entered (the trace
holds its body, and its defaults bound as constants by ``wrap_const``), a builtin such as
``torch.relu`` is replaced by its symbol. Either way the trace bakes in which function it was,
and stock thunder's prologue checks none of it: after a rebinding, a reused entry returned the
old function's result.

Every call goes through the interpreter's ``_call_dispatch`` with the callee's provenance. Where
that is a read from the user's state (a global, a closure cell, an attribute of the user's module,
class or object, rooted where the prologue can replay it), the prologue checks:

- a function, builtin or ``functools.partial`` stored there by identity;
- a method (``obj.act``, a new bound method on every read) by its class's attribute
  (``type(obj).act``), once per class and name, and on each object by ``obj.act.__func__``
  (a method replaced on one object: ``block.forward = f``); a classmethod read from its class by its
  function (``Cls.make.__func__``), read from an object by its class's (``type(obj).make.__func__``);
- an object of the user's class that is called (``NORM = ScaleBy(2)``, rebound to an object of
  another class whose state reads the same) by identity, and its class's ``__call__``;
- a Python function also by ``__code__`` (identity) and ``__defaults__``/``__kwdefaults__``
  (contents), where it is the user's.

Two reads that run code thunder gives no provenance are checked the same way: a property of the
user's class (on the class, with its getter's ``__code__``), and the environment
(``os.environ.get(k)``, checked whole by contents).

One check per container and name: the same helper read by every layer of a model is one check.
Reads through installed packages and the standard library (``torch.nn.functional.gelu``,
``litgpt.model.apply_rope``, a litgpt block's ``forward``) are code, not state, and are not
checked (:mod:`metatrace.interpret.reads.library_code`); an argument's structure is
:mod:`metatrace.guards.structure`'s.
"""

from __future__ import annotations

import functools
import inspect
import os
import types

import torch
import thunder.core.jit_ext as jit_ext
from thunder.core.interpreter import ProvenanceRecord, WrappedValue

from metatrace.guards import classify, provenance
from metatrace.state.compile_session import current_jit_ctx, session
from metatrace.guards.provenance import (
    attribute_name,
    attribute_record,
    is_jitted_function,
    may_register_for_prologue,
    rooted_in_arguments,
    rooted_in_prologue,
    through_library_module,
)
from metatrace.guards.value_checks import add_value_check
from metatrace.interpret.modules.called_modules import check_module_call
from metatrace.interpret.reads.library_code import is_library_function, is_library_module, is_library_module_name

_WHY = "a function the trace calls"
_ENVIRON_GETITEM = os._Environ.__getitem__
_CALLABLE_TYPES = (types.FunctionType, types.BuiltinFunctionType, functools.partial, types.MethodType)


def _is_code(container) -> bool:
    """A namespace of an installed package or the standard library: a module, its globals (the
    same dict), the builtins, or one of its classes."""
    if isinstance(container, types.ModuleType):
        return is_library_module(container)
    if isinstance(container, type):
        return is_library_module_name(container.__module__)
    if type(container) is dict and "__name__" in container and "__builtins__" in container:
        return is_library_module_name(container["__name__"])  # a module's globals
    return type(container) is dict and container.get("__name__") == "builtins"


def _read_site(wrapped_fn: WrappedValue):
    """``(ctx, provenance, name, container)`` of a callee read from the user's state, else None."""
    pr = wrapped_fn.provenance
    if pr is None or not may_register_for_prologue(pr):
        return None
    name = attribute_name(pr)
    outer = provenance.last_read(provenance.last_read(pr).base) if name == "__func__" else None
    if outer is not None and outer.kind is provenance.Read.ATTR:
        pr = outer.record  # ``obj.act(...)``: thunder calls the bound method's function
        name = attribute_name(pr)
    if not isinstance(name, str) or name.startswith("__"):
        return None  # the interpreter's own steps (``__call__``, ``__init__``)
    if not rooted_in_prologue(pr) or rooted_in_arguments(pr) or through_library_module(pr):
        return None
    ctx = current_jit_ctx()
    if ctx is None:
        return None
    container = provenance.replay(provenance.last_read(pr).base, call=session(ctx).call, fn=session(ctx).fn)
    if container is NotImplemented or _is_code(container):
        return None
    return ctx, pr, name, container


def _class_attribute(pr: ProvenanceRecord, name: str) -> ProvenanceRecord:
    """``type(obj).name`` for ``obj`` read through ``pr``."""
    # (the flag: the user's module, not thunder's ThunderModule)
    class_pr = attribute_record(pr, "__class__", jit_ext.EXT_FLAG_IS_CALLABLE)
    return attribute_record(class_pr, name)


def check_call_target(wrapped_fn: WrappedValue) -> None:
    pr = wrapped_fn.provenance
    if pr is None or not may_register_for_prologue(pr):
        return  # most calls: functions the interpreter made or read as constants
    fn = wrapped_fn.value
    if isinstance(fn, _CALLABLE_TYPES):
        pass
    elif isinstance(fn, (type, torch.nn.Module)) or is_library_module_name(type(fn).__module__):
        return  # classes, modules (module_state checks their state), library objects: code
    site = _read_site(wrapped_fn)
    if site is None:
        return
    ctx, pr, name, container = site
    current = provenance.last_read(pr).read(container)
    if current is fn:
        _check_function(ctx, pr, fn, (id(container), name))
        if not isinstance(fn, _CALLABLE_TYPES):  # an object of the user's class: its ``__call__``
            call = inspect.getattr_static(type(fn), "__call__", None)
            if isinstance(call, types.FunctionType):
                _check_function(ctx, _class_attribute(pr, "__call__"), call, (id(type(fn)), "__call__"))
        return
    # a method: a new bound method on every read (or, after LOAD_METHOD, its plain function)
    func = getattr(fn, "__func__", fn)
    if (not isinstance(func, types.FunctionType) or getattr(current, "__func__", None) is not func
            or is_library_function(func)):
        return
    if isinstance(container, type):  # a classmethod read from its class: ``Cls.make.__func__``
        _check_function(ctx, attribute_record(pr, "__func__"), func, (id(container), name))
    elif (static := inspect.getattr_static(type(container), name, None)) is func:
        _check_function(ctx, _class_attribute(provenance.last_read(pr).base, name), func, (id(type(container)), name))
        _check_not_shadowed(ctx, pr, func, container, name)
    elif isinstance(static, classmethod) and static.__func__ is func:  # ``obj.make``: ``type(obj).make.__func__``
        _check_function(ctx, attribute_record(_class_attribute(provenance.last_read(pr).base, name), "__func__"), func,
                        (id(type(container)), name))
        _check_not_shadowed(ctx, pr, func, container, name)


def _check_not_shadowed(ctx, pr: ProvenanceRecord, func, obj, name: str) -> None:
    """``obj.act.__func__ is Cls.act``, once per object and name: an attribute set on the object
    (``block.forward = f``, ``obj.act = types.MethodType(g, obj)``) shadows the class's method.
    A plain function there has no ``__func__``: the prologue raises, and thunder takes a raising
    prologue as a miss."""
    seen = session(ctx).callees
    key = (id(obj), name, "instance")
    if key not in seen:
        seen.add(key)
        add_value_check(ctx, attribute_record(pr, "__func__"), func, "a method not replaced on its object")


def _check_function(ctx, pr: ProvenanceRecord, fn, key: tuple, why: str = _WHY) -> None:
    seen = session(ctx).callees
    if key in seen:
        return
    seen.add(key)
    add_value_check(ctx, pr, fn, why)
    if not isinstance(fn, types.FunctionType):
        return
    if not is_library_function(fn):
        add_value_check(ctx, attribute_record(pr, "__code__"), fn.__code__, "its code, replaced by an in-place edit")
    check_defaults(ctx, fn, pr)


def check_defaults(ctx, fn: types.FunctionType, record: ProvenanceRecord, name: str | None = None) -> None:
    """thunder binds a function's defaults as constants (its interpreter wraps them with
    ``wrap_const``), so a trace bakes in the defaults it used, and what it reads through them is
    not checked where it is read: ``__defaults__`` and ``__kwdefaults__`` are checked by contents,
    and a data object among them with all its attributes (replaced, mutated, or an attribute
    changed: a miss). ``record``: how the prologue reads ``fn``; ``name``: how a check names it."""
    for attr in ("__defaults__", "__kwdefaults__"):
        value = getattr(fn, attr)
        if not value:
            continue
        history = attribute_record(record, attr)
        source = f"{name}.{attr}" if name else None
        add_value_check(ctx, history, value, "defaults are bound as constants", source=source, reads_seen=False)
        for k, v in (value.items() if type(value) is dict else enumerate(value)):
            if classify.kind(v) is classify.Kind.DATA:
                add_value_check(ctx, provenance.item_record(history, k), v, "a default's attributes, read as constants",
                                source=f"{source}[{k!r}]" if source else None, matcher=classify.expect(v, exact=True),
                                reads_seen=False)
    note_mutable_defaults(ctx, fn, record)


_IMMUTABLE = (int, float, complex, bool, str, bytes, type(None), tuple, frozenset, type, types.FunctionType,
              types.BuiltinFunctionType)


def note_mutable_defaults(ctx, fn: types.FunctionType, record: ProvenanceRecord) -> None:
    """Notes ``fn``'s mutable defaults as pre-existing objects the prologue reads as
    ``fn.__defaults__[i]`` / ``fn.__kwdefaults__[name]`` (``record``: how it reads ``fn``).
    thunder binds defaults as constants, without provenance, so a mutation of one
    (``def f(x, seen=[]): seen.append(...)``) was neither undone nor replayed (metatrace.mutations):
    its proxy stayed in the list."""
    noted = session(ctx).mutable_defaults
    for attr, items in (("__defaults__", enumerate(fn.__defaults__ or ())),
                        ("__kwdefaults__", (fn.__kwdefaults__ or {}).items())):
        for k, v in items:
            if not isinstance(v, _IMMUTABLE):
                noted.setdefault(id(v), (v, provenance.item_record(attribute_record(record, attr), k)))


def check_property(obj: WrappedValue, name: str) -> None:
    """``obj.attr`` where ``attr`` is a property of the user's class: thunder runs its getter with
    no provenance (the trace holds what the getter read, e.g. ``obj._x``), so the property itself
    is checked on the class, and its getter's code."""
    pr = obj.provenance
    if pr is None or not isinstance(name, str) or not (is_jitted_function(pr) or may_register_for_prologue(pr)):
        return
    cls = type(obj.value)
    prop = next((vars(base)[name] for base in cls.__mro__ if name in vars(base)), None)
    if type(prop) is not property or not isinstance(prop.fget, types.FunctionType) or is_library_function(prop.fget):
        return
    if not is_jitted_function(pr) and (not rooted_in_prologue(pr) or rooted_in_arguments(pr)
                                               or through_library_module(pr)):
        return
    ctx = current_jit_ctx()
    if ctx is None:
        return
    prop_pr = _class_attribute(pr, name)
    _check_function(ctx, prop_pr, prop, (id(cls), name), "a property the trace reads")
    add_value_check(ctx, attribute_record(attribute_record(prop_pr, "fget"), "__code__"), prop.fget.__code__,
                    "its code, replaced by an in-place edit")


def check_environment_read(environ) -> None:
    """``os.environ[k]``, ``.get(k)``, ``k in os.environ``, ``os.getenv(k)`` all read through
    ``_Environ.__getitem__`` with a computed key (bytes) that the prologue cannot replay, and the
    trace bakes in what it read. The environment is checked whole, by contents (one operation;
    any change of it misses the entry: slower, never stale)."""
    pr = getattr(environ, "provenance", None)
    if pr is None or not rooted_in_prologue(pr) or rooted_in_arguments(pr):
        return
    ctx = current_jit_ctx()
    if ctx is None:
        return
    add_value_check(ctx, attribute_record(pr, "_data"), environ.value._data, "the environment the trace reads")


def before_call(fn, args: tuple) -> None:
    """Checks of a call the interpreter dispatches while metatrace collects guards."""
    if type(fn) is WrappedValue:
        check_call_target(fn)
        if isinstance(fn.value, torch.nn.Module):
            check_module_call(fn)
        if fn.value is _ENVIRON_GETITEM and args:
            check_environment_read(args[0])
