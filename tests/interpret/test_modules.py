"""nn.Module under ``cache="symbolic values"`` with metatrace: parameters, buffers and module
attributes are static, inputs stay symbolic (issue 4).

nanoGPT from ``thunder.tests.nanogpt_model`` as the issue sizes it: eval forward and a training
step (loss, backward) over sequence lengths 8, 16, ..., 64 equal eager in outputs and gradients,
with 2 compiles in all (one eval entry, one training entry); stock thunder under constant values
compiles 16 times (tools/bench.py measures both).
"""

from __future__ import annotations

import pytest
import torch

import thunder
from thunder.tests import nanogpt_model

import metatrace
from metatrace.checker import check_trace

SEQUENCE_LENGTHS = range(8, 65, 8)


def small_gpt() -> torch.nn.Module:
    torch.manual_seed(0)
    config = nanogpt_model.GPTConfig(n_layer=2, n_head=4, n_embd=64, block_size=128, vocab_size=256, dropout=0.0)
    return nanogpt_model.GPT(config)


def all_traces(jf) -> list:
    return [*thunder.last_prologue_traces(jf), *thunder.last_traces(jf), *thunder.last_backward_traces(jf)]


@pytest.mark.slow  # (a model run: thunder's nanoGPT, eval and training over lengths)
def test_nanogpt_eval_and_training_over_sequence_lengths(enabled):
    model = small_gpt()
    jm = thunder.jit(model, cache="symbolic values")
    for T in SEQUENCE_LENGTHS:
        x, y = torch.randint(0, 256, (2, T)), torch.randint(0, 256, (2, T))
        model.eval()
        with torch.no_grad():
            torch.testing.assert_close(jm(x)[0], model(x)[0], atol=1e-5, rtol=1e-5)
        model.train()
        model.zero_grad()
        _, loss = model(x, y)
        loss.backward()
        expected = {n: p.grad.clone() for n, p in model.named_parameters()}
        model.zero_grad()
        _, jloss = jm(x, y)
        jloss.backward()
        torch.testing.assert_close(jloss, loss)
        for name, p in model.named_parameters():
            torch.testing.assert_close(p.grad, expected[name], atol=1e-5, rtol=1e-5, msg=name)
        for trace in all_traces(jm):
            check_trace(trace)
    assert thunder.cache_misses(jm) == 2


class Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(4, 3))
        self.register_buffer("offset", torch.randn(3))
        self.scale = 2

    def forward(self, x):
        return (x @ self.weight + self.offset) * self.scale


def test_module_state_is_static_and_inputs_symbolic(enabled):
    m = Scaled()
    jm = thunder.jit(m, cache="symbolic values")
    for rows in (5, 7, 9):
        x = torch.randn(rows, 4)
        torch.testing.assert_close(jm(x), m(x))
    assert thunder.cache_misses(jm) == 1  # one entry for every batch size
    trace = thunder.last_traces(jm)[0]
    assert trace.args[0]._shape[0].__class__.__name__ == "IntegerProxy"  # the input stays symbolic
    weight = next(a for a in trace.args if getattr(a, "name", "") == "t_weight")
    assert weight._shape == (4, 3)  # parameters have integer sizes


def test_changed_module_state_misses_the_cache(enabled):
    m = Scaled()
    jm = thunder.jit(m, cache="symbolic values")
    x = torch.randn(5, 4)
    jm(x)
    m.scale = 3  # an attribute is a checked constant, not a symbol
    torch.testing.assert_close(jm(x), m(x))
    assert thunder.cache_misses(jm) == 2
    # (Parameters replaced after thunder.jit are not seen at all: the ThunderModule keeps the
    # ones it was created with. That is thunder's behaviour, with or without metatrace.)


def test_stock_thunder_cannot_unpack_parameters_under_symbolic_values():
    """Why module_state exists: thunder 0.2.6 fails before running any module."""
    assert not metatrace.is_enabled()
    jm = thunder.jit(Scaled(), cache="symbolic values")
    with pytest.raises(NotImplementedError, match="unpacking"):
        jm(torch.randn(5, 4))


def test_arange_of_a_symbol_is_not_pinned(enabled):
    """clang.arange's math.isfinite(stop) no longer reads the size (metatrace.proxies.clang_math)."""

    def positions(x):
        return x + torch.arange(x.shape[0])

    jf = thunder.jit(positions, cache="symbolic values")
    for n in (3, 5, 8):
        x = torch.randn(n)
        torch.testing.assert_close(jf(x), positions(x))
    assert thunder.cache_misses(jf) == 1


def test_explain_names_module_state_by_its_source(enabled):
    """thunder checks module attributes as ``f3 == 1e-05``; explain says where they come from."""
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4, eps=1e-3))
    jm = thunder.jit(model, cache="symbolic values")
    jm(torch.randn(3, 4))
    (entry,) = metatrace.explain(jm)
    assert "self.1.eps == 0.001" in entry.guards


class _CachingModule(torch.nn.Module):
    """Fills a cache on its first call (as a memoizing module does), then reuses it."""

    def __init__(self):
        super().__init__()
        self.cache = None

    def forward(self, x):
        if self.cache is None:
            self.cache = x * 2
        return x * self.cache


class _BufferModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("total", torch.zeros(3))

    def forward(self, x):
        self.total.add_(x)
        return x * self.total


def _two_calls(module):
    return [module(torch.full((3,), 1.0)), module(torch.full((3,), 2.0))]


def test_stock_thunder_drops_an_attribute_stored_in_forward():
    """The case metatrace refuses: stock thunder never stores ``self.cache``, so the second call
    recomputes it from its own input (8 where eager returns 4)."""
    assert not metatrace.is_enabled()
    eager = _two_calls(_CachingModule())
    jitted = _two_calls(thunder.jit(_CachingModule(), cache="symbolic values"))
    assert not torch.equal(eager[1], jitted[1])


def test_an_attribute_stored_in_forward_is_replayed(enabled):
    """The store thunder drops is replayed by metatrace's epilogue: the second call reads the
    tensor the first call stored, as eager does."""
    eager = _two_calls(_CachingModule())
    jitted = _two_calls(thunder.jit(_CachingModule(), cache="symbolic values"))
    torch.testing.assert_close(jitted, eager)


def test_the_module_holds_the_stored_tensor_not_a_proxy(enabled):
    module = _CachingModule()
    thunder.jit(module, cache="symbolic values")(torch.ones(3))
    assert type(module.cache) is torch.Tensor


def test_a_buffer_updated_in_place_in_forward_equals_eager(enabled):
    eager = _two_calls(_BufferModule())
    jitted = _two_calls(thunder.jit(_BufferModule(), cache="symbolic values"))
    assert all(torch.equal(e, j) for e, j in zip(eager, jitted))
