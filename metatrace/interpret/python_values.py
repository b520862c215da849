"""Python values in user code: what thunder's interpreter bakes in without a guard.

thunder's interpreter runs Python builtins opaquely on the unwrapped values. Under
``cache="symbolic values"`` that bakes in whatever the builtin returned: ``max(l)`` of a list
argument was a plain ``2`` with no guard on ``l`` (its elements were never read through the
interpreter, so never proxied), ``str(n)`` of a number proxy was ``'i1=2'``, ``type(n)`` was
``IntegerProxy``. While metatrace is enabled, in user code:

- ``max``, ``min``, ``sum``, ``sorted``, ``all``, ``math.prod`` over a container are interpreted
  as the Python functions they are (``_py_*`` below): every element is read through the
  interpreter (a symbolic number, guarded by type), every comparison is a guarded relation, so
  one entry serves every list on the same side of each comparison. A container larger than
  ``INTERPRET_LIMIT`` is not walked element by element: it gets one prologue check of its
  contents (``metatrace.guards.value_checks``) and the builtin runs on it as is.
- ``str``, ``repr``, ``ascii``, ``format`` (and so f-strings) and ``hash`` of a number proxy
  see the number itself: its value is baked in with an equality guard (a string has no
  symbolic form). ``type(n)`` is the number's Python type (the prologue checks input number
  types; a derived number's type follows from them).
- Values the trace reads from the function's globals, closures, defaults and the user's modules
  (installed packages are code: ``metatrace.interpret.library_code``) that are not numbers or tensors (a dtype, an enum, a list mutated in place, a callable attribute) get
  a prologue check of their contents (``metatrace.guards.value_checks``), through thunder's wrap
  callback, which sees every value the interpreter reads.
"""

from __future__ import annotations

import enum
import functools
import math
import os
import types

import thunder.core.jit_ext as jit_ext
import torch
from thunder.core.interpreter import (
    INTERPRETER_CALLBACKS,
    ProvenanceRecord,
    WrappedValue,
    _interpret_call,
    interpreter_needs_wrap,
    wrap,
    wrap_const,
)
from thunder.core.proxies import NumberProxy, Proxy, TensorProxy

from metatrace.guards import provenance
from metatrace.guards.compile_session import session
from metatrace.guards.provenance import (
    EXT_FLAG_LIBRARY_MODULE,
    attribute_name,
    may_register_for_prologue,
    read_from_module_instance,
    rooted_in_arguments,
    rooted_in_prologue,
    through_library_module,
    through_module_tensors,
)
from metatrace.interpret.library_code import is_library_module
from metatrace.metas import concretizations
from metatrace import patching
from metatrace.patching import SYMBOL_METAS, Patch, attribute
from metatrace.guards.registry import EXPECTED, new_id
from metatrace.guards.value_checks import (
    CONTAINER_TYPES,
    ExpectedContiguity,
    ValueConstraint,
    add_value_check,
)

# Containers up to this length are walked element by element (symbolic elements, relational
# guards); longer ones are checked by contents in one prologue operation.
INTERPRET_LIMIT = 64


# ---------------------------------------------------------------------------------------------
# Builtins over containers, as the Python functions they are (interpreted by thunder)
# ---------------------------------------------------------------------------------------------


def _py_extreme(is_max, args, kwargs):
    key = kwargs.get("key", None)
    if len(args) == 1:
        items = iter(args[0])
    elif len(args) == 0:
        raise TypeError(("max" if is_max else "min") + " expected at least 1 argument, got 0")
    else:
        if "default" in kwargs:
            raise TypeError("Cannot specify a default for " + ("max()" if is_max else "min()") + " with multiple positional arguments")
        items = iter(args)
    found = False
    best = None
    best_key = None
    for item in items:
        k = item if key is None else key(item)
        if not found:
            best, best_key, found = item, k, True
        elif is_max:
            if k > best_key:
                best, best_key = item, k
        elif k < best_key:
            best, best_key = item, k
    if not found:
        if "default" in kwargs:
            return kwargs["default"]
        raise ValueError(("max" if is_max else "min") + "() iterable argument is empty")
    return best


def _py_max(*args, **kwargs):
    return _py_extreme(True, args, kwargs)


def _py_min(*args, **kwargs):
    return _py_extreme(False, args, kwargs)


def _py_sum(iterable, /, start=0):
    total = start
    for item in iterable:
        total = total + item
    return total


def _py_prod(iterable, /, *, start=1):
    total = start
    for item in iterable:
        total = total * item
    return total


def _py_all(iterable, /):
    for item in iterable:
        if not item:
            return False
    return True


def _py_sorted(iterable, /, *, key=None, reverse=False):
    # Stable insertion sort with ``<`` only, as CPython's list.sort compares; ``reverse`` keeps
    # stability the way CPython does it (reverse, sort, reverse).
    items = list(iterable)
    if reverse:
        items.reverse()
    keys = [item if key is None else key(item) for item in items]
    out_items = []
    out_keys = []
    for i in range(len(items)):
        k = keys[i]
        j = len(out_keys)
        while j > 0 and k < out_keys[j - 1]:
            j -= 1
        # (thunder's interpreter has no list.insert: concatenation instead)
        out_items = out_items[:j] + [items[i]] + out_items[j:]
        out_keys = out_keys[:j] + [k] + out_keys[j:]
    if reverse:
        out_items.reverse()
    return out_items


_PY_BUILTINS = {max: _py_max, min: _py_min, sum: _py_sum, sorted: _py_sorted, all: _py_all, math.prod: _py_prod}


def _large_inputs(args) -> list[WrappedValue]:
    """The container arguments too long to walk element by element."""
    return [a for a in args if type(a.value) in CONTAINER_TYPES and len(a.value) > INTERPRET_LIMIT]


def _builtin_lookaside(fn):
    py_fn = _PY_BUILTINS[fn]
    opaque = interpreter_needs_wrap(fn)

    def lookaside(*args, **kwargs):
        if concretizations.COLLECTOR.get() is None:
            return opaque(*args, **kwargs)  # thunder's own behaviour (constant values, no metatrace trace)
        large = _large_inputs(args)
        if large:
            ctx = jit_ext.get_jit_ctx()
            for a in large:
                if jit_ext.should_register_for_prologue(a.provenance):
                    add_value_check(ctx, a.provenance, a.value, f"{fn.__name__}() over {len(a.value)} elements")
            if not any(_holds_proxies(a.value) for a in args):
                return opaque(*args, **kwargs)
        return _interpret_call(py_fn, *args, **kwargs)

    lookaside.__name__ = f"metatrace_{fn.__name__}_lookaside"
    return lookaside


def _holds_proxies(x) -> bool:
    if isinstance(x, Proxy):
        return True
    if type(x) in (list, tuple, set, frozenset):
        return any(isinstance(e, Proxy) for e in x)
    if type(x) is dict:
        return any(isinstance(e, Proxy) for e in x.values())
    return False


# ---------------------------------------------------------------------------------------------
# Numbers seen as text, hashes and types
# ---------------------------------------------------------------------------------------------


def _concrete(x, why: str):
    """``x`` with every number proxy in it replaced by its value, each guarded by equality."""
    if isinstance(x, NumberProxy):
        concretizations.static(x, x.value, why)
        return x.value
    if type(x) in (list, tuple):
        return type(x)(_concrete(e, why) for e in x)
    if type(x) is dict:
        return {k: _concrete(v, why) for k, v in x.items()}
    return x


def _has_number_proxy(x) -> bool:
    if isinstance(x, NumberProxy):
        return True
    if type(x) in (list, tuple):
        return any(_has_number_proxy(e) for e in x)
    if type(x) is dict:
        return any(_has_number_proxy(e) for e in x.values())
    return False


def _as_value_lookaside(fn, why: str, fallback):
    """``fn(x, ...)`` on the numbers' values (guarded) when an argument holds a number proxy."""

    def lookaside(*args, **kwargs):
        if concretizations.COLLECTOR.get() is not None and any(_has_number_proxy(a.value) for a in args):
            uargs = [_concrete(a.value, why) for a in args]
            ukwargs = {k: _concrete(v.value, why) for k, v in kwargs.items()}
            res = fn(*uargs, **ukwargs)
            pr = provenance.opaque_record([wrap_const(fn).provenance, *(a.provenance for a in args)])
            return wrap(res, provenance=pr)
        return fallback(*args, **kwargs)

    lookaside.__name__ = f"metatrace_{getattr(fn, '__name__', 'fn')}_lookaside"
    return lookaside


def _type_fallback(typ):  # str, set: types, which without a lookaside the interpreter calls through type.__call__
    from thunder.core.interpreter import _type_call_lookaside

    return lambda *args, **kwargs: _type_call_lookaside(wrap_const(typ), *args, **kwargs)


def calling_file() -> str | None:
    """The file of the interpreted frame that is running, None outside the interpreter."""
    from thunder.core.interpreter import get_interpreterruntimectx

    try:
        return get_interpreterruntimectx().frame_stack[-1].code.co_filename
    except (LookupError, IndexError, AttributeError):
        return None


def _called_from_thunder() -> bool:
    """The interpreted frame calling is thunder's (its interpreter's own Python implementations
    of builtins ask ``type(x)`` of a proxy for its dunder methods) or metatrace's."""
    filename = calling_file()
    return filename is None or filename.startswith(OWN_CODE)


def _package_dir(module) -> str:
    return os.path.dirname(module.__file__) + os.sep


OWN_CODE = (_package_dir(__import__("thunder")), _package_dir(__import__("metatrace")))
# Packages whose own reads are not checked: ``logging`` fills a logger's ``_cache`` while it logs
# (the check would see the value change during the trace and refuse the entry), and what it reads
# decides only what is logged, never a value of the trace.
_SIDE_CHANNEL_CODE = (_package_dir(__import__("logging")),)


def _type_lookaside(default):
    """``default``: the interpreter's own lookaside for ``type``."""

    def type_lookaside(*args, **kwargs):
        if len(args) == 1 and not kwargs and isinstance(args[0].value, NumberProxy) and not _called_from_thunder():
            python_type = getattr(args[0].value, "python_type", None)
            if python_type in (bool, int, float, complex):
                pr = provenance.opaque_record([wrap_const(type).provenance, args[0].provenance])
                return wrap(python_type, provenance=pr)
        return default(*args, **kwargs)

    return type_lookaside


# ---------------------------------------------------------------------------------------------
# Values read from globals, closures, defaults and modules (thunder's wrap callback)
# ---------------------------------------------------------------------------------------------

_CHECKED_LEAVES = (torch.dtype, torch.layout, torch.memory_format, type(None), range, bytes, frozenset, set)
# nn.Module's own bookkeeping attributes (hooks, flags ``Module.__call__`` reads on every call):
# torch's state, not the model's; checking them would cost a prologue check per submodule. A
# submodule's ``_modules`` is checked (``ModuleList.append``, a replaced submodule).
_MODULE_INTERNALS = frozenset(torch.nn.Module().__dict__) - {"training", "_modules"} | {"_compiled_call_impl"}
# Namespaces, not values: the trace reads single entries of them, and each entry read is checked
# on its own. Parameters and buffers: thunder checks each tensor it reads.
_SKIPPED_MEMBER_DICTS = frozenset({"_parameters", "_buffers", "__dict__", "__globals__", "__builtins__", "__closure__"})


_ITERATED_CONTAINERS = (torch.nn.ModuleList, torch.nn.ModuleDict, torch.nn.Sequential)


def _iterated_container(owner_pr: ProvenanceRecord) -> bool:
    """The module whose ``_modules`` is read (found from the jitted module along the provenance)
    is a container whose submodules user code iterates."""
    if provenance.is_jitted_function(owner_pr):
        return False
    try:
        ctx = jit_ext.get_jit_ctx()
    except LookupError:
        return True
    owner = provenance.replay(owner_pr, fn=session(ctx).fn)
    return owner is NotImplemented or isinstance(owner, _ITERATED_CONTAINERS)


def needs_value_check(value: WrappedValue) -> bool:
    """A value the trace may bake in, read from outside the call's arguments (the arguments'
    structure and leaves are ``metatrace.guards.structure``'s), whose provenance the prologue replays."""
    pr = value.provenance
    if not may_register_for_prologue(pr):
        return False  # most values the interpreter wraps: constants, results of instructions
    u = value.value
    t = type(u)
    if isinstance(u, (Proxy, torch.Tensor, torch.nn.Module, types.ModuleType, type)):
        return False
    if read_from_module_instance(pr) and attribute_name(pr) in _MODULE_INTERNALS:
        return False
    if t in CONTAINER_TYPES and t not in (set, frozenset):
        name = attribute_name(pr)
        if name in _SKIPPED_MEMBER_DICTS:
            return False  # namespaces; parameters and buffers: thunder checks each tensor it reads
        if name == "_modules" and not _iterated_container(provenance.last_read(pr).base):
            # Only a ModuleList/ModuleDict/Sequential's submodules are iterated (their number is
            # baked in: ``ModuleList.append``); another module's are read one by one, each name
            # through the submodule it gives (one check per submodule would cost every call).
            # The root's is never checked: the prologue reads it from thunder's ThunderModule.
            return False
    elif t in _CHECKED_LEAVES or isinstance(u, enum.Enum):
        pass
    elif isinstance(u, (types.FunctionType, types.BuiltinFunctionType, functools.partial)):
        # A function stored on a module instance (``self.act = F.gelu``): replaced, the trace
        # would still call the old one. Functions reached through modules of code are not, nor
        # a class's own (``Module.__getattr__``: the prologue would read a bound method).
        name = attribute_name(pr)
        if not read_from_module_instance(pr) or not isinstance(name, str) or name.startswith("__"):
            return False
    else:
        return False
    if pr.ext_flag & jit_ext.EXT_FLAG_IS_TENSOR_PROXY:
        return False
    return (
        rooted_in_prologue(pr)
        and not rooted_in_arguments(pr)
        and not through_module_tensors(pr)
        and not through_library_module(pr)
        and not (calling_file() or "").startswith(_SIDE_CHANNEL_CODE)
    )


def _wrap_callback(original):
    def wrap_callback(value: WrappedValue):
        res = original(value)
        if isinstance(value.value, types.ModuleType):
            if is_library_module(value.value):
                value.provenance.ext_flag |= EXT_FLAG_LIBRARY_MODULE
            return res
        if concretizations.COLLECTOR.get() is not None and needs_value_check(value):
            try:
                ctx = jit_ext.get_jit_ctx()
            except LookupError:
                return res
            add_value_check(ctx, value.provenance, value.value, "read by the trace")
        return res

    return wrap_callback


# ---------------------------------------------------------------------------------------------
# Tensor metadata thunder does not model: is_contiguous of an input
# ---------------------------------------------------------------------------------------------


def _is_contiguous_meta(original):
    @functools.wraps(original)
    def meta(a, *args, **kwargs):
        result = original(a, *args, **kwargs)
        if concretizations.COLLECTOR.get() is None or not isinstance(a, TensorProxy):
            return result
        try:
            ctx = jit_ext.get_jit_ctx()
        except LookupError:
            return result
        real = provenance.replay(a.history, call=session(ctx).call)
        if not isinstance(real, torch.Tensor):
            return result  # an intermediate: thunder's answer (it models every result as contiguous)
        memory_format = kwargs.get("memory_format", args[0] if args else torch.contiguous_format)
        expected = real.is_contiguous(memory_format=memory_format)
        value_id = new_id("v")
        EXPECTED[value_id] = ExpectedContiguity(
            memory_format, expected, f"{provenance.text(a.history)}.is_contiguous() == {expected} (read by the trace)"
        )
        ctx.add_constraint((ValueConstraint(value_id), a))
        return expected

    return meta


# ---------------------------------------------------------------------------------------------
# The patches
# ---------------------------------------------------------------------------------------------

_AS_VALUE = {str: "str()", repr: "repr()", ascii: "ascii()", format: "format()", hash: "hash()", set: "set()",
             frozenset: "frozenset()"}  # a set of sizes decides by value (a proxy hashes by identity)
_LOOKASIDES = "thunder.core.jit_ext._general_jit_lookaside_map"


def patches() -> list[Patch]:
    import thunder.torch as ltorch
    from thunder.core.interpreter import _default_lookaside_map

    lookasides = jit_ext._general_jit_lookaside_map
    is_contiguous = ltorch._torch_to_thunder_function_map[torch.Tensor.is_contiguous]
    return [
        *(patching.item(lookasides, fn, _builtin_lookaside(fn), "max/min/sum/sorted/all/math.prod are interpreted",
                        label=_LOOKASIDES)
          for fn in _PY_BUILTINS),
        *(patching.item(lookasides, fn,
                        _as_value_lookaside(fn, why, _type_fallback(fn) if isinstance(fn, type) else interpreter_needs_wrap(fn)),
                        "str/repr/ascii/format/hash/set see a number's value", label=_LOOKASIDES)
          for fn, why in _AS_VALUE.items()),
        patching.item(lookasides, type, _type_lookaside(_default_lookaside_map[type]),
                      "type() of a number is its Python type", label=_LOOKASIDES),
        attribute(is_contiguous, "meta", _is_contiguous_meta, "is_contiguous of an input is the argument's, checked",
                  wrap=True, label=SYMBOL_METAS),
        patching.item(jit_ext.general_jit_callbacks, INTERPRETER_CALLBACKS.WRAP_CALLBACK, _wrap_callback,
                      "the wrap callback also checks, by contents, values the trace reads from globals, closures "
                      "and modules (dtypes, enums, containers mutated in place, callable attributes); thunder checks "
                      "none of them", wrap=True, label="thunder.core.jit_ext.general_jit_callbacks"),
    ]
