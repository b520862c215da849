"""metatrace.interpret.modules.shadowed_attributes: state a module's ``forward`` stores through ``nn.Module``'s
own dicts lands on the user's module, as in eager. thunder's prologue read ``self._buffers`` and
``self.__dict__`` from the ThunderModule, so the epilogue replayed ``register_buffer`` and a
``functools.cached_property`` into the wrapper: the model never had the buffer, and a running sum
kept in a lazily registered buffer restarted on every call (silently wrong; stock thunder drops the
store). Generated: every way of storing x every kind of value, against eager's outputs and state."""

from __future__ import annotations

import functools

import pytest
import torch

import thunder

SYMBOLIC = "symbolic values"


def _register_buffer(m, v):
    m.register_buffer("acc", v)


def _buffers_item(m, v):
    m._buffers["acc"] = v


def _dict_item(m, v):
    m.__dict__["acc"] = v


def _vars_item(m, v):
    vars(m)["acc"] = v


STORES = {"register_buffer": _register_buffer, "_buffers[...]": _buffers_item, "__dict__[...]": _dict_item,
          "vars(self)[...]": _vars_item}
VALUES = {  # the first value stored, from the call's input
    "a new tensor": lambda x: torch.zeros(x.shape[1]),
    "a tensor computed from the input": lambda x: x.sum(0),
    "a tensor of the input's size": lambda x: torch.zeros(x.shape[0]),
}


class Accumulating(torch.nn.Module):
    """A buffer registered on the first call, accumulated in place on every call."""

    def __init__(self, store, value):
        super().__init__()
        self.store, self.value = store, value

    def forward(self, x):
        if not hasattr(self, "acc"):
            self.store(self, self.value(x))
        self.acc.add_(1)
        return x + self.acc.sum()


def _state(m):
    return m.__dict__.get("acc", m._buffers.get("acc"))


@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("store", STORES)
def test_a_lazily_stored_tensor_accumulates_as_in_eager(enabled, store, value):
    eager, model = Accumulating(STORES[store], VALUES[value]), Accumulating(STORES[store], VALUES[value])
    jm = thunder.jit(model, cache=SYMBOLIC)
    outputs = []
    for n in (2, 2, 3):
        x = torch.arange(n * 2.0).reshape(n, 2)
        outputs.append(torch.equal(jm(x), eager(x)))
    assert outputs == [True] * 3


@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("store", STORES)
def test_the_stored_tensor_is_on_the_users_module(enabled, store, value):
    eager, model = Accumulating(STORES[store], VALUES[value]), Accumulating(STORES[store], VALUES[value])
    jm = thunder.jit(model, cache=SYMBOLIC)
    for n in (2, 2):
        x = torch.arange(n * 2.0).reshape(n, 2)
        jm(x), eager(x)
    torch.testing.assert_close(_state(model), _state(eager))


@pytest.mark.parametrize("store", ["register_buffer", "_buffers[...]"])
def test_a_lazily_registered_buffer_compiles_twice_over_sizes(enabled, store):
    jm = thunder.jit(Accumulating(STORES[store], VALUES["a new tensor"]), cache=SYMBOLIC)
    for n in (2, 3, 4, 5):
        jm(torch.ones(n, 2))
    assert thunder.cache_misses(jm) == 2


class Cached(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.k = 2

    @functools.cached_property
    def scale(self):
        return self.k * 3

    def forward(self, x):
        return x * self.scale


def test_a_cached_property_is_cached_on_the_users_module(enabled):
    model = Cached()
    thunder.jit(model, cache=SYMBOLIC)(torch.ones(2))
    assert model.__dict__.get("scale") == 6


def test_a_cached_property_keeps_its_first_value_as_in_eager(enabled):
    model = Cached()
    jm = thunder.jit(model, cache=SYMBOLIC)
    jm(torch.ones(2))
    model.k = 5
    torch.testing.assert_close(jm(torch.ones(3)), torch.full((3,), 6.0))
