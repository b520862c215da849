"""Pickling what a compiled entry refers to by names that mean the same thing in another process.

A stored entry holds Python objects: the callables its traces call (thunder's and torch's
functions, executor operators), the classes, enum members and callees its prologue checks by
identity, the constants of its guard programs. :func:`dumps` writes each by a *stable key*:

- a module by its name;
- a function by module + qualified name + a digest of its code (``resolve_function`` refuses the
  name when the code behind it changed: the entry is then stale, never reused);
- a class, a builtin, a method descriptor by module + qualified name (pickle's own rule, which checks
  that the name leads back to the very object);
- a thunder ``Symbol`` by its module's attribute or by an executor's operator table (thunder's
  own ``Symbol.__reduce__`` looks symbols up by name only, and fails for the ones replaced at run
  time);
- an enum member by its class and member name.
- a function an executor's operator calls and a process group by their role
  (:mod:`metatrace.entry_cache.context_refs`); a function's code digest is
  :mod:`metatrace.entry_cache.code_digests`.

A value with no stable key (a lambda or a function made at run time, a module instance, a tensor,
a generator, a lock) raises :class:`ProcessLocal` naming it: the entry is kept in this process
only. Plain data (numbers, strings, tuples, dtypes, devices, dataclass instances of named classes)
is pickled by value.
"""

from __future__ import annotations

import enum
import importlib
import io
import pickle
import types
from typing import Any

import torch

from metatrace.entry_cache.code_digests import code_digest, function_fingerprint, made_at_run_time
from metatrace.entry_cache.context_refs import (executor_contexts, process_groups, resolve_executor_context,
                                                resolve_process_group)
from metatrace.errors import ProcessLocal, StaleReference
from metatrace.guards.matchers import Identity
from metatrace.state.callable_sources import COMPILED_REGIONS, SOURCES


def _lookup(module: str, qualname: str):
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def resolve_function(module: str, qualname: str, digest: str):
    fn = _lookup(module, qualname)
    code = getattr(fn, "__code__", None)
    if code is None or code_digest(code) != digest:
        raise StaleReference(f"{module}.{qualname}: its code changed since the entry was stored")
    return fn


def resolve_symbol(module: str | None, attribute: str | None, executor: str | None, name: str):
    if executor is not None:
        from thunder.extend import get_executor

        ex = get_executor(executor)
        if ex is None or name not in getattr(ex, "opmap", {}):
            raise StaleReference(f"executor {executor!r} has no operator {name!r} in this process")
        return ex.opmap[name]
    return _lookup(module, attribute)


def resolve_submodule(path: str, cls: type):
    """The jitted module's submodule at ``path``, which must be of class ``cls`` (an identity check
    of a submodule of another class must fail, as it would have in the storing process)."""
    from metatrace.state.compile_context import ENTRY_LOADING

    root = ENTRY_LOADING.get().module
    try:
        found = root if path == "" else root.get_submodule(path)
    except (AttributeError, TypeError):
        raise StaleReference(f"the jitted module has no submodule {path!r}") from None
    if type(found) is not cls:
        raise StaleReference(f"the jitted module's {path!r} is a {type(found).__qualname__}, not a {cls.__qualname__}")
    return found


def resolve_identity(obj):
    return Identity(obj)


def resolve_equivalent(fingerprint: tuple, self_class: type | None = None):
    """A stored identity check of a function (``self_class``: of a method bound to an object of that
    class) reached through closures and decorators, where no name leads to it."""
    return EquivalentFunction(fingerprint, self_class)


def resolve_equal_contents(contents: bytes, type_name: str):
    return EqualContents(contents, type_name)


class StoredMatch(Identity):
    """In a loading process, a stored check ``value is <object>`` of an object no name leads to
    becomes a comparison (:meth:`same`) made once per object: the last object that matched is
    remembered, so a hit's check is one ``is``."""

    __slots__ = ("last",)

    def __init__(self, type_name: str):
        self.last, self.type_name, self.ref, self.strong = None, type_name, None, None

    def get(self):
        return self.last

    def matches(self, v) -> bool:
        if v is self.last and v is not None:
            return True
        if not self.same(v):
            return False
        self.last = v
        return True

    def same(self, v) -> bool:
        raise NotImplementedError


class EqualContents(StoredMatch):
    """An object of a named class (a ``functools.partial``, a dataclass instance in a class
    attribute): one that pickles, by the same stable keys, to the same bytes."""

    __slots__ = ("contents",)

    def __init__(self, contents: bytes, type_name: str):
        super().__init__(type_name)
        self.contents = contents

    def same(self, v) -> bool:
        try:
            return dumps(v) == self.contents
        except ProcessLocal:
            return False

    def __repr__(self) -> str:
        return f"<a {self.type_name}, by contents>"


def resolve_equivalent_code(fingerprint: tuple):
    return EquivalentCode(fingerprint)


class EquivalentCode(StoredMatch):
    """A code object: code of the same file, qualified name and digest (the file's digest is
    checked too)."""

    __slots__ = ("fingerprint",)

    def __init__(self, fingerprint: tuple):
        super().__init__("code")
        self.fingerprint = fingerprint

    def same(self, v) -> bool:
        return type(v) is types.CodeType and (v.co_filename, v.co_qualname, code_digest(v)) == self.fingerprint

    def __repr__(self) -> str:
        return f"<code of {self.fingerprint[1]}, by digest>"


_ACCESSORS = ("fget", "fset", "fdel")


def resolve_equivalent_property(accessors: tuple):
    return EquivalentProperty(accessors)


class EquivalentProperty(StoredMatch):
    """A property: its getter, setter and deleter are functions of the same module, qualified name
    and code."""

    __slots__ = ("accessors",)

    def __init__(self, accessors: tuple):
        super().__init__("property")
        self.accessors = accessors

    def same(self, v) -> bool:
        if type(v) is not property:
            return False
        for name, stored in zip(_ACCESSORS, self.accessors):
            fn = getattr(v, name)
            if (fn is None) != (stored is None):
                return False
            if fn is not None and (type(fn) is not types.FunctionType or function_fingerprint(fn) != stored):
                return False
        return True

    def __repr__(self) -> str:
        return "<a property, by its accessors' code>"


class EquivalentFunction(StoredMatch):
    """A function reached through closures and decorators: one of the same module, qualified name
    and code (a method: bound to an object of the same class). What else the trace read through it
    (its closure's contents, its defaults, its globals) the prologue checks by its own reads."""

    __slots__ = ("fingerprint", "self_class")

    def __init__(self, fingerprint: tuple, self_class: type | None):
        super().__init__("method" if self_class is not None else "function")
        self.fingerprint, self.self_class = fingerprint, self_class

    def same(self, v) -> bool:
        fn = v
        if self.self_class is not None:
            if type(v) is not types.MethodType or type(v.__self__) is not self.self_class:
                return False
            fn = v.__func__
        return type(fn) is types.FunctionType and function_fingerprint(fn) == self.fingerprint

    def __repr__(self) -> str:
        return f"{self.fingerprint[0]}.{self.fingerprint[1]} (by code)"


def resolve_compiled_region(name: str, text: str, ctx: dict, mode: str | None):
    """A torch.compile fusion region, compiled again from its text as thunder's ``make_compiled``
    does (torch.compile compiles on the first call; inductor's own caches apply)."""
    import thunder
    from thunder.core import baseutils
    from thunder.core.compile_data import get_compile_option
    from thunder.executors.torchex import no_autocast

    fn = baseutils.build_callable(name, python_str=text, file_name=f"thunder.{name}", ctx={**ctx, "thunder": thunder})
    fullgraph = get_compile_option("torch_compile_fullgraph", "Whether to enable `fullgraph` from `torch.compile`.")
    compiled = torch.compile(fn, mode=mode, fullgraph=True if fullgraph is None else fullgraph)
    return torch.no_grad()(no_autocast(compiled))


def resolve_member(cls, name: str):
    return cls[name]


_BY_PICKLE_NAME = (importlib.import_module,)


def _named(obj) -> tuple[str, str] | None:
    """(module, qualname) under which ``obj`` itself is found, else None."""
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or made_at_run_time(qualname):
        return None
    try:
        found = _lookup(module, qualname)
    except Exception:
        return None
    return (module, qualname) if found is obj else None


def _symbol_reduction(sym):
    from thunder.extend import get_all_executors

    named = _named_symbol(sym)
    if named is not None:
        return resolve_symbol, (named[0], named[1], None, sym.name)
    for ex in get_all_executors():
        if getattr(ex, "opmap", {}).get(sym.name) is sym:
            return resolve_symbol, (None, None, ex.name, sym.name)
    raise ProcessLocal(f"thunder symbol {sym.name!r} is neither a module attribute nor an executor's operator")


def _named_symbol(sym):
    module = getattr(sym, "module", None)
    module_name = getattr(module, "__name__", None)
    if module_name is None:
        return None
    try:
        found = getattr(importlib.import_module(module_name), sym.name, None)
    except ImportError:
        return None
    return (module_name, sym.name) if found is sym else None


class _StablePickler(pickle.Pickler):
    def __init__(self, buffer, root_module, cd=None):
        super().__init__(buffer, protocol=pickle.HIGHEST_PROTOCOL)
        self._root = root_module
        self._paths: dict[int, str] | None = None
        self._groups = {id(g): role for role, g in reversed(process_groups(cd).items())}

    def _submodule_path(self, module) -> str | None:
        if self._paths is None:
            root = self._root
            self._paths = {} if root is None else {id(m): p for p, m in root.named_modules(remove_duplicate=False)}
        return self._paths.get(id(module))

    def _identity(self, identity):
        """An object checked by ``is``: only by a name (an object copied by value is never the same)."""
        target = identity.get()
        if target is None:
            raise ProcessLocal(f"an object checked by identity was freed: {identity!r}")
        if isinstance(target, torch.nn.Module) and self._submodule_path(target) is not None:
            return resolve_identity, (target,)
        if isinstance(target, (type, types.BuiltinFunctionType, types.ModuleType, enum.Enum)):
            return resolve_identity, (target,)
        if _named(target) is not None:
            return resolve_identity, (target,)
        if type(target) is types.FunctionType:
            return resolve_equivalent, (function_fingerprint(target),)
        if type(target) is property:  # (a property made in a class body: by its accessors)
            return resolve_equivalent_property, (tuple(self._accessor(getattr(target, a)) for a in _ACCESSORS),)
        if type(target) is types.CodeType:
            return resolve_equivalent_code, ((target.co_filename, target.co_qualname, code_digest(target)),)
        if (type(target) is types.MethodType and type(target.__func__) is types.FunctionType
                and _named(type(target.__self__)) is not None):
            return resolve_equivalent, (function_fingerprint(target.__func__), type(target.__self__))
        try:  # an object of a named class (a partial, a dataclass): the same contents, by value
            contents = dumps(target, self._root)
        except ProcessLocal:
            raise ProcessLocal(f"{identity!r} is checked by identity and has no name in another process") from None
        return resolve_equal_contents, (contents, type(target).__qualname__)

    @staticmethod
    def _accessor(fn):
        if fn is None:
            return None
        if type(fn) is not types.FunctionType:
            raise ProcessLocal(f"a property's accessor {fn!r} is not a Python function")
        return function_fingerprint(fn)

    def reducer_override(self, obj):
        from thunder.core.symbol import Symbol

        kind = type(obj)
        if kind is Identity:
            return self._identity(obj)
        if obj in _BY_PICKLE_NAME:
            return NotImplemented
        if kind is types.ModuleType:
            return importlib.import_module, (obj.__name__,)
        if kind is types.FunctionType and obj in COMPILED_REGIONS:
            region, mode = COMPILED_REGIONS[obj]
            source = SOURCES[region]
            ctx = {k: v for k, v in source.ctx.items() if k not in ("__builtins__", "__function_obj", "thunder", source.name)}
            return resolve_compiled_region, (source.name, source.text, ctx, mode)
        if kind is types.FunctionType:
            named = _named(obj)
            if named is not None:
                return resolve_function, (*named, code_digest(obj.__code__))
            in_executor = executor_contexts().get(id(obj))
            if in_executor is not None:
                return resolve_executor_context, in_executor
            raise ProcessLocal(f"the function {obj.__module__}.{obj.__qualname__} has no importable name")
        if isinstance(obj, Symbol):
            return _symbol_reduction(obj)
        if isinstance(obj, enum.Enum):
            return resolve_member, (kind, obj.name)
        if isinstance(obj, torch.nn.Module):
            path = self._submodule_path(obj)
            if path is not None:
                return resolve_submodule, (path, type(obj))
        if isinstance(obj, (torch.Tensor, torch.nn.Module, torch.Generator)):
            raise ProcessLocal(f"a {kind.__name__} object is known only by identity")
        if kind.__name__.startswith("ProcessGroup"):
            role = self._groups.get(id(obj))
            if role is None:
                raise ProcessLocal("a process group other than the jitted callable's or the default one")
            return resolve_process_group, (role,)
        if kind is types.MethodType:
            raise ProcessLocal(f"the bound method {obj!r} is known only by its object's identity")
        return NotImplemented


_BY_PICKLE_NAME += (resolve_function, resolve_symbol, resolve_member, resolve_executor_context, resolve_submodule,
                     resolve_identity, resolve_equivalent, resolve_equal_contents,
                     resolve_process_group, resolve_equivalent_code, resolve_compiled_region,
                     resolve_equivalent_property)


def dumps(value: Any, root_module=None, cd=None) -> bytes:
    """``value`` pickled by stable keys (a submodule of ``root_module``, the jitted module, by its
    path; a process group by its role for the compile data ``cd``); raises :class:`ProcessLocal`
    naming what has none."""
    buffer = io.BytesIO()
    try:
        _StablePickler(buffer, root_module, cd).dump(value)
    except ProcessLocal:
        raise
    except (pickle.PicklingError, TypeError, AttributeError) as e:
        raise ProcessLocal(f"cannot be named in another process: {e}") from None
    return buffer.getvalue()


def loads(data: bytes) -> Any:
    """The value of :func:`dumps`; raises :class:`StaleReference` where a name leads elsewhere now."""
    try:
        return pickle.loads(data)
    except StaleReference:
        raise
    except Exception as e:
        raise StaleReference(f"a stored name does not resolve in this process: {type(e).__name__}: {e}") from None
