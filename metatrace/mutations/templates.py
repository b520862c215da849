"""A stored value as the epilogue rebuilds it on every call.

- a tensor or number of the trace (``TensorProxy``, ``NumberProxy``): the call's own value,
  passed to the replay operator;
- an object that existed before the call (its provenance is rooted in the call, or it is a
  target already): that object as the prologue unpacks it on this call;
- an immutable constant (a number, a string, None, a dtype, an Enum member, a function or class
  defined outside the call): itself;
- a container the function built (list, tuple, dict, set and their common subclasses): a new
  one on every call, of the same type and shape, shared where the function shared it;
- an instance of a plain Python class the function created (a ``DynamicCache`` and its layers:
  ``object.__new__`` makes it, its state is its ``__dict__``): a new one on every call, its
  attributes rebuilt by these rules, shared where the function shared it;
- anything else the function created (an object with slots, a C type, a module), or an object
  whose attribute the interpreter did not track (so that whether it existed before the call is
  unknown): a :class:`metatrace.MetatraceError` naming the object and the line: reusing one
  object for every call would alias what eager creates afresh.
"""

from __future__ import annotations

import collections
import decimal
import enum
import fractions
import types
from dataclasses import dataclass, field
from typing import Any

import torch
from thunder.core.interpreter import WrappedValue
from thunder.core.proxies import NumberProxy, Proxy, TensorProxy

from metatrace.errors import MetatraceError
from metatrace.mutations.log import MutationLog
from metatrace.mutations.record import source

_IMMUTABLE = frozenset({int, float, complex, bool, str, bytes, type(None), type(Ellipsis), type(NotImplemented), range,
                        slice, torch.dtype, torch.device, torch.layout, torch.memory_format, fractions.Fraction,
                        decimal.Decimal, frozenset})
_CODE = (type, types.ModuleType, types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType,
         types.MethodWrapperType, enum.Enum)
_CONTAINERS = (collections.OrderedDict, collections.defaultdict, dict, list, tuple, set)


@dataclass(frozen=True)
class Leaf:
    index: int  # into the replay operator's arguments

    def build(self, leaves: tuple, memo: dict) -> Any:
        return leaves[self.index]


@dataclass(frozen=True)
class ObjectLeaf:
    """A pre-existing object as the prologue unpacks it. thunder's prologue unpacks the jitted
    module as its ``ThunderModule`` (``get_thunder_module(module0)``); the user's object is the
    module it wraps."""

    index: int

    def build(self, leaves: tuple, memo: dict) -> Any:
        from thunder.core.module import ThunderModule

        obj = leaves[self.index]
        return obj._model if isinstance(obj, ThunderModule) else obj


@dataclass(frozen=True)
class Const:
    value: Any

    def build(self, leaves: tuple, memo: dict) -> Any:
        return self.value


@dataclass(eq=False)
class NewContainer:
    kind: type
    items: list = field(default_factory=list)  # templates; (key, value) pairs for mappings
    default_factory: Any = None  # a defaultdict's

    def build(self, leaves: tuple, memo: dict) -> Any:
        if id(self) in memo:
            return memo[id(self)]
        kind = self.kind
        if issubclass(kind, tuple):
            values = [t.build(leaves, memo) for t in self.items]
            out = kind(values) if kind is tuple else (kind._make(values) if hasattr(kind, "_make") else kind(values))
            memo[id(self)] = out
            return out
        out = kind(self.default_factory) if issubclass(kind, collections.defaultdict) else kind()
        memo[id(self)] = out  # before the items: a list that contains itself
        if isinstance(out, dict):
            for k, v in self.items:
                out[k.build(leaves, memo)] = v.build(leaves, memo)
        elif isinstance(out, list):
            out.extend(t.build(leaves, memo) for t in self.items)
        else:
            out.update(t.build(leaves, memo) for t in self.items)
        return out


@dataclass(eq=False)
class NewObject:
    """An instance of a plain class the function created: ``object.__new__`` and its ``__dict__``."""

    kind: type
    items: list = field(default_factory=list)  # (attribute name, template)

    def build(self, leaves: tuple, memo: dict) -> Any:
        if id(self) in memo:
            return memo[id(self)]
        out = memo[id(self)] = object.__new__(self.kind)  # before the attributes: an object that holds itself
        state = vars(out)
        for name, t in self.items:
            state[name] = t.build(leaves, memo)
        return out


def rebuildable(value: Any) -> bool:
    """An instance of a plain Python class: made by ``object.__new__``, its whole state in its
    ``__dict__`` (no slots), not a module, tensor or proxy (they have state elsewhere)."""
    kind = type(value)
    return (
        kind.__new__ is object.__new__
        and kind.__module__ != "builtins"
        and isinstance(getattr(value, "__dict__", None), dict)
        and not any(vars(c).get("__slots__") for c in kind.__mro__[:-1])  # (abc.ABC's are empty)
        and not isinstance(value, (torch.nn.Module, torch.Tensor, Proxy, WrappedValue))
    )


def _function_is_constant(fn: types.FunctionType) -> bool:
    """A function object the trace may pass along as itself: nothing of the trace in its closure or defaults."""
    cells = [c.cell_contents for c in fn.__closure__ or () if c.cell_contents is not None]
    return not any(isinstance(v, Proxy) for v in (*cells, *(fn.__defaults__ or ())))


class Templates:
    """Builds the templates of one compile's stored values; ``leaves`` are the replay operator's arguments."""

    def __init__(self, log: MutationLog, object_proxy):
        self._log = log
        self._object_proxy = object_proxy  # provenance record -> the Proxy the prologue unpacks it as
        self.leaves: list = []
        self._leaf_of: dict[int, Leaf] = {}
        self._containers: dict[int, NewContainer] = {}

    def _leaf(self, proxy: Proxy, kind: type = Leaf) -> Leaf | ObjectLeaf:
        leaf = self._leaf_of.get(id(proxy))
        if leaf is None:
            leaf = self._leaf_of[id(proxy)] = kind(len(self.leaves))
            self.leaves.append(proxy)
        return leaf

    def _object(self, pr) -> ObjectLeaf:
        return self._leaf(self._object_proxy(pr), ObjectLeaf)

    def target(self, obj: Any) -> ObjectLeaf:
        return self._object(self._log.sources[id(obj)][1])

    def of(self, x: Any, where: str) -> Any:
        """The template of ``x`` (a WrappedValue or a plain value) stored at ``where``."""
        wrapped = x if isinstance(x, WrappedValue) else None
        value = wrapped.value if wrapped is not None else x
        if isinstance(value, (TensorProxy, NumberProxy)):
            return self._leaf(value)
        known = self._log.sources.get(id(value))
        if known is not None and known[0] is value:
            return self._object(known[1])
        if wrapped is not None and not isinstance(value, Proxy) and source(self._log, wrapped) is not None:
            return self._object(self._log.sources[id(value)][1])
        if type(value) in _IMMUTABLE and not _holds_proxy(value):
            return Const(value)
        if isinstance(value, _CODE) or (isinstance(value, types.FunctionType) and _function_is_constant(value)):
            return Const(value)
        if isinstance(value, _CONTAINERS) and not isinstance(value, Proxy):
            return self._container(wrapped, value, where)
        if wrapped is not None and rebuildable(value):
            return self._new_object(wrapped, value, where)
        raise MetatraceError(
            f"the function stores a {type(value).__name__} object it created ({value!r:.80}) into an object that "
            f"existed before the call, at {where}: metatrace replays such stores on every call, and cannot create "
            "that object again for each call. Store it outside the jitted function, or store plain containers, "
            "numbers and tensors"
        )

    def _new_object(self, wrapped, value, where: str) -> NewObject:
        made = self._containers.get(id(value))
        if made is not None:
            return made
        made = self._containers[id(value)] = NewObject(type(value))
        tracked = getattr(wrapped, "attribute_wrappers", None) or {}
        for name, v in vars(value).items():
            w = tracked.get(name)
            # an attribute the interpreter did not see stored: plain values only (an object there
            # may have existed before the call; only its wrapper's provenance says)
            made.items.append((name, self.of(w if w is not None and w.value is v else v, where)))
        return made

    def _container(self, wrapped, value, where: str) -> NewContainer:
        made = self._containers.get(id(value))
        if made is not None:
            return made
        made = self._containers[id(value)] = NewContainer(type(value), default_factory=getattr(value, "default_factory",
                                                                                              None))
        wrappers = getattr(wrapped, "item_wrappers", None) if wrapped is not None else None
        if isinstance(value, dict):
            keys = getattr(wrapped, "key_wrappers", None) if wrapped is not None else None
            for k, v in value.items():
                kw = keys.get(k, k) if isinstance(keys, dict) else k
                vw = wrappers.get(k, v) if isinstance(wrappers, dict) else v
                made.items.append((self.of(k if kw is None else kw, where), self.of(v if vw is None else vw, where)))
        elif isinstance(value, (list, tuple)):
            # thunder leaves None for the items it has not wrapped (``list + list`` without
            # provenance tracking): the item itself then
            usable = isinstance(wrappers, list) and len(wrappers) == len(value)
            made.items.extend(self.of(v if w is None else w, where) for w, v in zip(wrappers if usable else value, value))
        else:
            made.items.extend(self.of(v, where) for v in value)
        return made


def _holds_proxy(value: Any) -> bool:
    return isinstance(value, frozenset) and any(isinstance(v, Proxy) for v in value)


def epilogue_operator_rows(name: str, symbol_key: str, meta, fn, why: str, tags=()) -> list:
    """The two rows of an epilogue operator: registered on thunder's python executor as ``name``
    (``meta``, ``fn``, ``tags``), and named in ``guards.registry._symbols[symbol_key]``."""
    from thunder.executors.pythonex import ex

    from metatrace.state import registry
    from metatrace.patching import item

    def operator(previous):
        assert previous is None, f"{name} is already registered on the python executor"
        return ex.register_operator(name, meta=meta, fn=fn, tags=list(tags))

    return [
        item(ex.opmap, name, operator, why, wrap=True, label="executor python.opmap"),
        item(registry._symbols, symbol_key, lambda _: ex.opmap[name], why, wrap=True, label="metatrace.state.registry"),
    ]
