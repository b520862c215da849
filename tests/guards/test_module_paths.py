"""metatrace.guards.module_paths: the prologue reads parameters, buffers and submodules by their
``_modules``/``_parameters``/``_buffers`` entries. Each read returns what PyTorch's ``get_*``
returns (or fails where it fails) for every shape of module tree; a jitted bound ``forward`` stays
equal to eager after a submodule, a parameter or a buffer is replaced; a hit runs no PyTorch
attribute walk; a ``ThunderModule`` keeps its own method."""

from __future__ import annotations

import pytest
import torch

import thunder

from metatrace.guards import module_paths

SYMBOLIC = "symbolic values"


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.blocks = torch.nn.ModuleList([torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)])
        self.heads = torch.nn.ModuleDict({"a": torch.nn.Sequential(torch.nn.Linear(4, 3))})
        self.register_buffer("scale", torch.full((3,), 2.0))

    def forward(self, x):
        for block in self.blocks:
            x = torch.relu(block(x))
        return self.heads["a"](x) * self.scale


def _tree() -> torch.nn.Module:
    net = Net()
    net.norm = torch.nn.BatchNorm1d(3)
    net.blocks[0].register_parameter("extra", None)  # a parameter slot holding None
    return net


def _shadowed() -> torch.nn.Module:
    net = _tree()
    object.__setattr__(net, "heads", torch.nn.Identity())  # an instance attribute beside _modules
    net.__dict__["heads"] = torch.nn.Linear(2, 2)
    return net


SUBMODULES = ["", "blocks", "blocks.1", "heads.a.0", "norm", "heads.b", "blocks.7", "blocks.0.weight", "heads"]
PARAMETERS = ["blocks.0.weight", "blocks.1.bias", "heads.a.0.weight", "norm.weight", "blocks.0.extra",
              "blocks.0.missing", "scale", "nowhere.weight", "heads.weight"]
BUFFERS = ["scale", "norm.running_mean", "norm.num_batches_tracked", "blocks.0.weight", "norm.missing"]


def _outcome(fn, *args):
    try:
        return ("value", fn(*args))
    except Exception as e:  # (the kind of failure must be the same: a prologue failure is a miss)
        return ("raises", type(e))


def _same(a, b) -> bool:
    return a[0] == b[0] and (a[1] is b[1] if a[0] == "value" else issubclass(a[1], AttributeError) == issubclass(
        b[1], AttributeError))


@pytest.mark.parametrize("build", [_tree, _shadowed], ids=["tree", "shadowed"])
@pytest.mark.parametrize("path", SUBMODULES)
def test_a_submodule_read_returns_what_pytorch_returns(build, path):
    net = build()
    assert _same(_outcome(module_paths.unpack_submodule, net, path), _outcome(net.get_submodule, path))


@pytest.mark.parametrize("build", [_tree, _shadowed], ids=["tree", "shadowed"])
@pytest.mark.parametrize("path", PARAMETERS)
def test_a_parameter_read_returns_what_pytorch_returns(build, path):
    net = build()
    assert _same(_outcome(module_paths.unpack_parameter, net, path), _outcome(net.get_parameter, path))


@pytest.mark.parametrize("path", BUFFERS)
def test_a_buffer_read_returns_what_pytorch_returns(path):
    net = _tree()
    assert _same(_outcome(module_paths.unpack_buffer, net, path), _outcome(net.get_buffer, path))


def _replace_block(net):
    torch.manual_seed(1)
    net.blocks[1] = torch.nn.Linear(4, 4)


def _rebind_weight(net):
    net.blocks[0].weight = torch.nn.Parameter(torch.randn(4, 4))


def _replace_buffer(net):
    net.scale = torch.full((3,), -1.0)


def _replace_head(net):
    net.heads["a"] = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh())


@pytest.mark.parametrize("change", [_replace_block, _rebind_weight, _replace_buffer, _replace_head])
def test_a_bound_forward_equals_eager_after_the_module_tree_changes(enabled, change):
    net = Net()
    net.forward = thunder.jit(net.forward, cache=SYMBOLIC)
    x = torch.randn(5, 4)
    net(x)
    change(net)
    expected = Net.forward(net, x)
    assert torch.equal(net(x), expected)


def test_a_hit_runs_no_pytorch_attribute_walk(enabled, monkeypatch):
    net = Net()
    net.forward = thunder.jit(net.forward, cache=SYMBOLIC)
    net(torch.randn(5, 4))
    walks = []
    for name in ("get_submodule", "get_parameter", "get_buffer"):
        original = getattr(torch.nn.Module, name)
        monkeypatch.setattr(torch.nn.Module, name,
                            lambda self, target, _o=original, _n=name: walks.append(_n) or _o(self, target))
    net(torch.randn(7, 4))
    assert walks == []


def test_a_thunder_module_reads_through_its_own_dicts(enabled):
    net = Net()
    jm = thunder.jit(net, cache=SYMBOLIC)
    x = torch.randn(5, 4)
    jm(x)
    replacement = torch.nn.Parameter(torch.zeros(4, 4))
    jm._overrides_parameters["blocks.0.weight"] = replacement  # as a transform replaces a tensor there
    assert module_paths.unpack_parameter(jm, "blocks.0.weight") is replacement
