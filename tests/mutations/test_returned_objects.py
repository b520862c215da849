"""Objects the function creates and returns (a Hugging Face ``DynamicCache``): rebuilt by the
epilogue on every call, equal to eager's, new each call, holding pre-existing objects as they are."""

from __future__ import annotations

import dataclasses
import operator

import pytest
import torch

import thunder

import metatrace

SYMBOLIC = "symbolic values"


class Layer:
    def __init__(self, t):
        self.keys = t
        self.dtype = t.dtype
        self.is_initialized = True


class Cache:
    def __init__(self, config):
        self.layers = []
        self.config = config
        self.seen = 0


class Config:
    pass


class Slotted:
    __slots__ = ("t",)

    def __init__(self, t):
        self.t = t


def make_cache(x, config):
    cache = Cache(config)
    for i in range(2):
        cache.layers.append(Layer(x * (i + 1)))
    cache.seen = x.shape[0]
    return x.sum(), cache


def test_a_returned_object_equals_eagers_and_is_new_each_call(enabled):
    config = Config()
    jf = thunder.jit(make_cache, cache=SYMBOLIC)
    caches = []
    for rows in (2, 5, 3):
        x = torch.randn(rows, 4)
        total, cache = jf(x, config)
        want_total, want = make_cache(x, config)
        torch.testing.assert_close(total, want_total)
        assert type(cache) is Cache and [type(layer) for layer in cache.layers] == [Layer, Layer]
        for got_layer, want_layer in zip(cache.layers, want.layers):
            torch.testing.assert_close(got_layer.keys, want_layer.keys)
            assert got_layer.dtype == want_layer.dtype and got_layer.is_initialized is True
        assert cache.seen == rows
        caches.append(cache)
    assert len({id(c) for c in caches}) == 3
    assert thunder.cache_misses(jf) == 1


def test_a_returned_object_holds_a_pre_existing_object_itself(enabled):
    config = Config()
    _, cache = thunder.jit(make_cache, cache=SYMBOLIC)(torch.randn(2, 4), config)
    assert cache.config is config


def test_a_returned_object_in_a_dict_literal_is_rebuilt_on_every_call(enabled):
    """A dict literal tracks its items (metatrace.interpret.opcodes.dict_literals): the object is rebuilt."""

    def fn(x):
        return {"out": x + 1, "cache": Layer(x * 3)}

    jf = thunder.jit(fn, cache=SYMBOLIC)
    layers = []
    for rows in (3, 5):
        x = torch.randn(rows)
        got = jf(x)
        assert type(got["cache"]) is Layer
        torch.testing.assert_close(got["cache"].keys, x * 3)
        layers.append(got["cache"])
    assert layers[0] is not layers[1]


def test_a_returned_object_in_an_untracked_list_raises_rather_than_returning_proxies(enabled):
    def fn(x):
        return operator.itemgetter(slice(None))([Layer(x * 3)])  # (built by C code: its items untracked)

    with pytest.raises(metatrace.MetatraceError, match="Layer"):
        thunder.jit(fn, cache=SYMBOLIC)(torch.randn(3))


def test_a_returned_object_in_a_sorted_list_is_rebuilt(enabled):
    # sorted() runs as Python, whose ``+`` of lists keeps its items' wrappers (interpret/sequence_results)
    fn = lambda x: sorted([Layer(x * 3)], key=id)  # noqa: E731
    jf = thunder.jit(fn, cache=SYMBOLIC)
    x = torch.randn(3)
    torch.testing.assert_close(jf(x)[0].keys, x * 3)


def test_a_returned_dataclass_holding_a_created_object_rebuilds_it(enabled):
    @dataclasses.dataclass
    class Output:
        logits: torch.Tensor
        past: Cache

    def fn(x, config):
        total, cache = make_cache(x, config)
        return Output(total, cache)

    jf = thunder.jit(fn, cache=SYMBOLIC)
    x = torch.randn(3, 4)
    got = jf(x, Config())
    assert type(got.past) is Cache
    torch.testing.assert_close(got.past.layers[1].keys, x * 2)


def test_returning_an_object_that_cannot_be_rebuilt_raises_naming_it(enabled):
    def fn(x):
        return Slotted(x * 2)

    with pytest.raises(metatrace.MetatraceError, match="Slotted"):
        thunder.jit(fn, cache=SYMBOLIC)(torch.ones(2))
