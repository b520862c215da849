"""metatrace.passes.flat_proxies: a bound symbol's eight flattened views of its arguments and
output are what thunder's cached properties give, computed once and kept in the instance's
``__dict__``; thunder's properties are back after ``disable()``."""

from __future__ import annotations

import collections
import dataclasses
import functools

import torch

import thunder.core.prims as prims
from thunder.core import devices, dtypes
from thunder.core.proxies import CollectionProxy, IntegerProxy, Proxy, TensorProxy
from thunder.core.symbol import BoundSymbol
from thunder.core.trace import TraceCtx, tracectx

import metatrace

Pair = collections.namedtuple("Pair", "first second")


@dataclasses.dataclass
class Cell:
    item: object
    size: int


NAMES = ("flat_args_and_spec", "flat_args", "flat_proxy_args", "flat_variableified_proxy_args",
         "flat_outs_and_spec", "flat_outs", "flat_proxy_outs", "flat_variableified_proxy_outs")


def _value(x):
    """Proxies and variables by name (their ``==`` is symbolic; each run makes its own trace, whose
    names are the same), containers by type and items, other leaves by value."""
    if isinstance(x, Proxy):
        return ("proxy", type(x), x.name)
    if isinstance(x, (tuple, list)):
        return (type(x), tuple(_value(y) for y in x))
    if type(x).__name__ == "Variable":
        return ("variable", x.proxy.name)
    return (type(x), x)


def _views(bsym, order=NAMES) -> dict:
    """Every view, read in ``order`` (the first read of a derived one computes those it derives
    from); a pair's spec as is."""
    views = {}
    for name in order:
        value = getattr(bsym, name)
        views[name] = (_value(value[0]), value[1]) if name.endswith("_spec") else _value(value)
    return views


def _bsyms():
    trace = TraceCtx()
    with tracectx(trace):
        a, b, c = (TensorProxy(shape=(2, 3), device=devices.cpu, dtype=dtypes.float32) for _ in range(3))
        n = IntegerProxy(value=3)
        coll = CollectionProxy([a, 1])
    return [
        prims.add.bind(a, (n, [b, 2], slice(n, None, 2), {"y": None, "x": n}, torch.float32), output=(c, n)),
        prims.add.bind(a, b, output=c),
        prims.add.bind(Pair(a, 1), (Cell(b, 2), torch.Size([2, 3])), output=[Cell(c, 1), None]),
        prims.add.bind(coll, 1, output=c),
        prims.add.bind(dtypes.float32, devices.cpu, output=None),
    ]


def test_every_view_is_thunders_whichever_is_read_first():
    stock = [_views(b) for b in _bsyms()]
    for order in (NAMES, NAMES[::-1]):
        direct_bsyms = _bsyms()
        with metatrace.enable():
            direct = [_views(b, order) for b in direct_bsyms]
        assert direct == stock


def test_a_view_is_computed_once_and_kept_in_the_instance():
    (bsym, *_), calls = _bsyms(), []
    with metatrace.enable():
        import thunder.core.symbol as symbol

        flatten = symbol.tree_flatten_with_dataclass

        def counting(tree):
            calls.append(tree)
            return flatten(tree)

        symbol.tree_flatten_with_dataclass = counting
        try:
            first = bsym.flat_proxy_args
            assert bsym.flat_proxy_args is first and bsym.flat_args is bsym.flat_args_and_spec[0]
            assert "flat_proxy_args" in vars(bsym) and len(calls) == 1
        finally:
            symbol.tree_flatten_with_dataclass = flatten


def test_disable_restores_thunders_cached_properties():
    with metatrace.enable():
        assert not isinstance(BoundSymbol.__dict__["flat_proxy_args"], functools.cached_property)
    for name in NAMES:
        assert isinstance(BoundSymbol.__dict__[name], functools.cached_property)
