"""Python patterns libraries use in a model's forward, run as eager runs them (issue 27: Hugging Face
models failed on their first call).

- A class's own ``__getattribute__`` (transformers' ``PretrainedConfig.attribute_map``):
  ``metatrace.interpret.reads.custom_getattribute``; stock thunder read the attribute as ``object``
  would and raised AttributeError.
- ``torch.cat`` beside a ``(0,)``-shaped tensor (transformers' ``DynamicLayer``):
  ``metatrace.metas.torch_ops.torch_decompositions``.
- transformers' output collector: ``metatrace.interpret.reads.library_state``.

Each compares with eager over several sizes and counts compiles.
"""

from __future__ import annotations

import pytest
import torch

import thunder

import metatrace

SYMBOLIC = "symbolic values"


class AliasedConfig:
    """Names mapped through a table, as transformers' configs do."""

    attribute_map = {"num_layers": "n_layer", "width": "n_embd"}

    def __init__(self, n_layer, n_embd):
        self.n_layer = n_layer
        self.n_embd = n_embd

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)


class Stacked(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.layers = torch.nn.ModuleList(torch.nn.Linear(config.n_embd, config.n_embd) for _ in range(config.n_layer))

    def forward(self, x):
        for i in range(self.config.num_layers):  # read through the alias
            x = self.layers[i](x) * (x.shape[-1] / self.config.width)
        return x


def test_a_classes_own_getattribute_is_honoured(enabled):
    model = Stacked(AliasedConfig(2, 8))
    jm = thunder.jit(model, cache=SYMBOLIC)
    for T in (3, 5, 9):
        x = torch.randn(2, T, 8)
        torch.testing.assert_close(jm(x), model(x))
    assert thunder.cache_misses(jm) == 1


def test_an_aliased_attribute_change_misses_the_entry(enabled):
    # the alias is read from the config: a changed value is a changed trace, as in eager
    model = Stacked(AliasedConfig(2, 8))
    model.layers.append(torch.nn.Linear(8, 8))
    jm = thunder.jit(model, cache=SYMBOLIC)
    x = torch.randn(2, 3, 8)
    torch.testing.assert_close(jm(x), model(x))
    model.config.n_layer = 3
    torch.testing.assert_close(jm(x), model(x))


def test_a_missing_attribute_raises_attribute_error_as_in_eager(enabled):
    config = AliasedConfig(1, 4)
    jf = thunder.jit(lambda x: x * config.depth, cache=SYMBOLIC)
    with pytest.raises(AttributeError):
        jf(torch.randn(3))


def test_a_getattr_default_after_a_custom_getattribute(enabled):
    config = AliasedConfig(1, 4)
    jf = thunder.jit(lambda x: x * getattr(config, "depth", 3) + config.width, cache=SYMBOLIC)
    x = torch.randn(3)
    torch.testing.assert_close(jf(x), x * 3 + 4)


@pytest.mark.parametrize("dim", [-2, 1])
def test_cat_skips_a_legacy_empty_tensor(enabled, dim):
    def f(x):
        return torch.cat([torch.tensor([], dtype=x.dtype), x], dim=dim) * 2

    jf = thunder.jit(f, cache=SYMBOLIC)
    for T in (3, 4, 7):
        x = torch.randn(2, T, 5, requires_grad=True)
        expected = f(x)
        actual = jf(x)
        torch.testing.assert_close(actual, expected)
        (g,) = torch.autograd.grad(actual.sum(), x)
        torch.testing.assert_close(g, torch.full_like(x, 2.0))
    assert thunder.cache_misses(jf) == 1


def test_cat_of_one_dimensional_tensors_keeps_the_empty_one(enabled):
    jf = thunder.jit(lambda x: torch.cat([torch.tensor([]), x]), cache=SYMBOLIC)
    x = torch.randn(4)
    torch.testing.assert_close(jf(x), x)


def test_transformers_output_collector_keeps_its_context_var():
    transformers = pytest.importorskip("transformers", exc_type=ImportError)
    from transformers.utils import output_capturing

    from metatrace.interpret.reads import library_state

    with metatrace.enable():
        rows = {row.key for row in library_state.patches()}
    cls = output_capturing.CompileableContextVar
    assert {cls.get, cls.set, cls.reset} <= rows, transformers.__version__
