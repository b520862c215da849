"""A bound symbol's flattened arguments and outputs, as thunder caches them, at less cost per
bound symbol.

thunder's ``BoundSymbol`` computes eight ``functools.cached_property`` values from its arguments
and output (``flat_args_and_spec``, ``flat_args``, ``flat_proxy_args``,
``flat_variableified_proxy_args`` and the four ``*_outs``), each from the one before it. Every pass
after interpretation reads them on every bound symbol it makes (``dce``, the processors' swaps,
``keep_size_names``): tens of thousands per compile of an 8-layer model. Python 3.11's
``cached_property`` takes a lock shared by every instance on each first read, and ``flat_proxy_args``
went through three of them; the passes' measured cost per bound symbol was mostly this bookkeeping.

While enabled, each of the eight is a plain descriptor that computes the same value in the same
way (thunder's ``tree_flatten_with_dataclass`` as ``thunder.core.symbol`` looks it up, so
``symbol_costs``' direct path for plain trees applies) and stores it in the instance's
``__dict__`` under the same name, where later reads find it without calling the descriptor, as
they found the cached property's. What is stored is what thunder stored: the same pair, the same
list, tuples of the same proxies in the same order.
"""

from __future__ import annotations

import thunder.core.symbol as symbol
from thunder.core.proxies import Proxy, variableify
from thunder.core.symbol import BoundSymbol

from metatrace.patching import Patch, attribute

_NOT_FOUND = object()


def _read(bsym, cache: dict, name: str):
    """``bsym.<name>``: the cached value if there is one, else through the class's descriptor."""
    value = cache.get(name, _NOT_FOUND)
    return getattr(bsym, name) if value is _NOT_FOUND else value


def _flat_args_and_spec(bsym, cache):
    return symbol.tree_flatten_with_dataclass((bsym.args, bsym.kwargs))


def _flat_args(bsym, cache):
    return _read(bsym, cache, "flat_args_and_spec")[0]


def _flat_proxy_args(bsym, cache):
    return tuple([x for x in _read(bsym, cache, "flat_args") if isinstance(x, Proxy)])


def _flat_variableified_proxy_args(bsym, cache):
    return tuple([variableify(x) for x in _read(bsym, cache, "flat_args") if isinstance(x, Proxy)])


def _flat_outs_and_spec(bsym, cache):
    return symbol.tree_flatten_with_dataclass(bsym.output)


def _flat_outs(bsym, cache):
    return _read(bsym, cache, "flat_outs_and_spec")[0]


def _flat_proxy_outs(bsym, cache):
    return tuple([x for x in _read(bsym, cache, "flat_outs") if isinstance(x, Proxy)])


def _flat_variableified_proxy_outs(bsym, cache):
    return tuple([variableify(x) for x in _read(bsym, cache, "flat_outs") if isinstance(x, Proxy)])


class CachedFlat:
    """A non-data descriptor like ``functools.cached_property`` without its lock: the first read
    computes the value and stores it in the instance's ``__dict__``, which later reads find first."""

    __slots__ = ("name", "compute")

    def __init__(self, name: str, compute):
        self.name = name
        self.compute = compute

    def __get__(self, bsym, owner=None):
        if bsym is None:
            return self
        cache = bsym.__dict__
        value = cache.get(self.name, _NOT_FOUND)
        if value is _NOT_FOUND:
            value = cache[self.name] = self.compute(bsym, cache)
        return value


_COMPUTES = {
    "flat_args_and_spec": _flat_args_and_spec,
    "flat_args": _flat_args,
    "flat_proxy_args": _flat_proxy_args,
    "flat_variableified_proxy_args": _flat_variableified_proxy_args,
    "flat_outs_and_spec": _flat_outs_and_spec,
    "flat_outs": _flat_outs,
    "flat_proxy_outs": _flat_proxy_outs,
    "flat_variableified_proxy_outs": _flat_variableified_proxy_outs,
}


def patches() -> list[Patch]:
    why = "a bound symbol's flattened arguments and outputs without cached_property's shared lock"
    return [attribute(BoundSymbol, name, CachedFlat(name, compute), why) for name, compute in _COMPUTES.items()]
