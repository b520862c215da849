"""metatrace.passes.symbol_costs: thunder's bound-symbol bookkeeping takes direct paths under
``enable()``; each one builds what thunder's own path builds. Every test runs thunder's path
(metatrace disabled) and the direct one (enabled) on the same bound symbols and compares them
structurally: container types, proxies by identity, other leaves by value."""

from __future__ import annotations

import collections
import dataclasses

import torch

import thunder.core.prims as prims
import thunder.core.symbol as symbol
import thunder.core.transform_common as transform_common
import thunder.torch as ltorch
from thunder.core import devices, dtypes
from thunder.core.proxies import CollectionProxy, IntegerProxy, Proxy, TensorProxy, variableify
from thunder.core.trace import TraceCtx, tracectx

import metatrace

Pair = collections.namedtuple("Pair", "first second")


@dataclasses.dataclass
class Box:
    item: object
    size: int


def _shape(x, ids=None):
    """A value's structure with proxies as their identities (their ``==`` is symbolic): ``id``,
    or with ``ids`` given, the order in which they first appear (for proxies made per run)."""
    if isinstance(x, Proxy):
        return ("proxy", id(x) if ids is None else ids.setdefault(id(x), len(ids)))
    if isinstance(x, (tuple, list)):
        return (type(x), tuple(_shape(y, ids) for y in x))
    if isinstance(x, dict):
        return (dict, tuple((k, _shape(v, ids)) for k, v in x.items()))
    if isinstance(x, slice):
        return (slice, _shape(x.start, ids), _shape(x.stop, ids), _shape(x.step, ids))
    if dataclasses.is_dataclass(x):
        return (type(x), tuple(_shape(getattr(x, f.name), ids) for f in dataclasses.fields(x)))
    return (type(x), x)


def _bsym_shape(b, ids=None):
    return (b.sym.name, _shape(b.args, ids), _shape(b.kwargs, ids), _shape(b.output, ids),
            tuple(_bsym_shape(s, ids) for s in b.subsymbols))


def _both(fn):
    """(thunder's result, the direct path's) of ``fn()``."""
    stock = fn()
    with metatrace.enable():
        return stock, fn()


def _tensor(trace, *shape):
    with tracectx(trace):
        return TensorProxy(shape=shape, device=devices.cpu, dtype=dtypes.float32)


def _swap_case(extra_args=()):
    """A bound symbol with plain containers (and ``extra_args``), a subsymbol, and a swap map
    that renames its tensor, its number (through a chain) and its output."""
    trace = TraceCtx()
    a, b, c, d = (_tensor(trace, 2, 3) for _ in range(4))
    with tracectx(trace):
        n, m, k = IntegerProxy(value=3), IntegerProxy(value=3), IntegerProxy(value=3)
    sub = prims.add.bind(a, b, output=c)
    bsym = prims.add.bind(a, (n, [b, 2], slice(n, None, 2), {"x": n, "y": None}, torch.float32, *extra_args),
                          output=(c, n), subsymbols=[sub])
    swap_map = {variableify(a): d, variableify(n): m, variableify(m): k, variableify(c): b}
    return bsym, swap_map


def test_a_swap_of_plain_containers_builds_what_thunders_builds():
    bsym, swap_map = _swap_case()
    stock, direct = _both(lambda: bsym.from_bsym_swap_proxies(swap_map))
    assert _bsym_shape(direct) == _bsym_shape(stock)


def test_a_swap_through_a_namedtuple_and_a_dataclass_builds_what_thunders_builds():
    trace = TraceCtx()
    extra = (Pair(_tensor(trace, 1), 1), Box(_tensor(trace, 2), 2), torch.Size([2, 3]))
    bsym, swap_map = _swap_case(extra)
    stock, direct = _both(lambda: bsym.from_bsym_swap_proxies(swap_map))
    assert _bsym_shape(direct) == _bsym_shape(stock)


def test_a_swap_rewrites_a_collection_proxys_contents_as_thunder_does():
    def swapped_contents():
        trace = TraceCtx()
        a, d = _tensor(trace, 2), _tensor(trace, 2)
        with tracectx(trace):
            coll = CollectionProxy([a, 1])
        bsym = prims.add.bind(coll, 1, output=d)
        bsym.from_bsym_swap_proxies({variableify(a): d})
        return [x is d for x in coll.coll], type(coll.coll)

    stock, direct = _both(swapped_contents)
    assert direct == stock


def test_flattening_builds_thunders_leaves_and_spec():
    trace = TraceCtx()
    t = _tensor(trace, 2)
    trees = [((t, 1, [None, slice(1, t, 2)]), {"b": t, "a": 2}), (Box(t, 3), Pair(t, 1)), torch.Size([2, 3]), t]

    def flattened():
        return [(_shape(leaves), spec) for leaves, spec in map(symbol.tree_flatten_with_dataclass, trees)]

    stock, direct = _both(flattened)
    assert direct == stock


def test_normalize_binds_as_thunders_signature_binding_does():
    trace = TraceCtx()
    a = _tensor(trace, 2, 3)
    calls = [(ltorch.sum, (a,), {}), (ltorch.sum, (a, 1), {"keepdim": True}), (ltorch.sum, (a, 0, True), {}),
             (prims.add, (a, a), {}), (prims.full, ((2,), 1.0), {"device": devices.cpu, "dtype": dtypes.float32})]

    def normalized():
        return [_shape(sym.normalize(*args, **kwargs)) for sym, args, kwargs in calls]

    stock, direct = _both(normalized)
    assert direct == stock


def test_dead_code_eliminations_duplicate_numbers_go_as_thunders_do():
    def deduplicated():
        trace = TraceCtx()
        t = _tensor(trace, 2)
        with tracectx(trace):
            n, m = IntegerProxy(value=2), IntegerProxy(value=5)
        bsyms = [prims.shape.bind(t, output=(n, m)), prims.shape.bind(t, output=(n, m)), prims.add.bind(n, m, output=m),
                 prims.shape.bind(t, output=[n, 2]), prims.add.bind(t, t, output=t), prims.add.bind(n, 1, output=())]
        ids = {}
        return [_bsym_shape(b, ids) for b in transform_common.remove_duplicate_number_proxies(bsyms)]

    stock, direct = _both(deduplicated)
    assert direct == stock
