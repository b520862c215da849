"""metatrace.interpret.modules.repeated_blocks: a module list's later blocks stamped from the first.

What must hold, stamped or not: eager's values and gradients, one compile over shapes, and a
prologue that checks every sibling's own state (a value changed on a stamped block after the
compile misses the entry). What decides stamping: every value the first block read is equal on
the sibling (one it never read may differ), hooks, shared or already-read tensors and in-place
writes interpret it. The model tests compare a stamped compile with an interpreted one: the same
prologue checks, the same computation and backward traces up to renaming.
"""

from __future__ import annotations

import copy
import enum
import sys
from pathlib import Path

import pytest
import torch
import torch.nn as nn

import thunder
import metatrace
from metatrace.interpret.modules.repeated_blocks import stamping

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from block_equivalence import canonical_trace, checked_values, guard_texts, prologue_checks  # noqa: E402

pytestmark = pytest.mark.usefixtures("enabled")

SYMBOLIC = "symbolic values"
LENGTHS = (3, 5, 8)


class Block(nn.Module):
    def __init__(self, d: int = 8, scale: float = 0.5, repeat: int = 1, index: int = 0):
        super().__init__()
        self.lin = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)
        self.scale = scale  # read by forward as a number
        self.repeat = repeat  # read by forward: decides the code's path
        self.index = index  # never read by forward (a layer index kept for __init__)

    def forward(self, x):
        for _ in range(self.repeat):
            x = self.lin(x)
        return self.norm(x) * self.scale + x


class Stack(nn.Module):
    def __init__(self, blocks):
        super().__init__()
        self.blocks = nn.ModuleList(blocks)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


def _stack(n: int = 4, seed: int = 0, **per_block) -> Stack:
    torch.manual_seed(seed)
    blocks = [Block(index=i) for i in range(n)]
    for i, changes in per_block.items():
        for name, value in changes.items():
            setattr(blocks[int(i[1:])], name, value)
    return Stack(blocks)


def _seeded(stack, block, n: int):
    torch.manual_seed(0)
    return stack([block() for _ in range(n)])


def _x(T: int, seed: int = 1) -> torch.Tensor:
    return torch.randn(2, T, 8, generator=torch.Generator().manual_seed(seed), requires_grad=True)


def _blocks(jm):
    entry = metatrace.explain(jm)[-1]
    return entry.stamped, entry.interpreted


def _assert_like_eager(model, jm, T: int) -> None:
    ref = copy.deepcopy(model)
    x, xr = _x(T), _x(T)
    out, expected = jm(x), ref(xr)
    assert torch.allclose(out, expected, atol=1e-5), f"T={T}: outputs differ from eager"
    out.sum().backward()
    expected.sum().backward()
    assert (x.grad is None) == (xr.grad is None), f"T={T}: the input's grad is {x.grad is not None} in eager {xr.grad is not None}"
    assert x.grad is None or torch.allclose(x.grad, xr.grad, atol=1e-5), f"T={T}: the input's grad differs from eager"
    for (name, p), (_, q) in zip(model.named_parameters(), ref.named_parameters()):
        assert (p.grad is None) == (q.grad is None), f"T={T}: {name} has grad {p.grad is not None} in eager {q.grad is not None}"
        if p.grad is not None:
            assert torch.allclose(p.grad, q.grad, atol=1e-5), f"T={T}: {name}'s grad differs from eager"
    model.zero_grad(set_to_none=True)


def _run(model, T: int = 5):
    """``model`` jitted, checked against eager at length ``T``; the blocks its compile stamped
    and those it interpreted (with why)."""
    jm = thunder.jit(model, cache=SYMBOLIC)
    _assert_like_eager(model, jm, T)
    return _blocks(jm)


def test_identical_blocks_are_stamped_and_match_eager_over_lengths():
    model = _stack()
    jm = thunder.jit(model, cache=SYMBOLIC)
    for T in LENGTHS:
        _assert_like_eager(model, jm, T)
    stamped, interpreted = _blocks(jm)
    # the first block takes the model's input, whose last size is a symbol: the second is
    # interpreted (and recorded), the third and fourth are stamped from it
    assert "shape[2]" in interpreted["self.blocks.1"], interpreted
    assert [b for b in stamped if b.count(".") == 2] == ["self.blocks.2", "self.blocks.3"]
    assert thunder.cache_misses(jm) == 1


def test_a_value_the_first_block_never_read_may_differ():
    model = _stack()  # index is 0, 1, 2, 3
    jm = thunder.jit(model, cache=SYMBOLIC)
    _assert_like_eager(model, jm, 5)
    assert "self.blocks.3" in _blocks(jm)[0]


@pytest.mark.parametrize("name,value", [("scale", 2.0), ("repeat", 2)])
def test_a_block_whose_read_value_differs_is_interpreted(name, value):
    model = _stack(**{"b2": {name: value}})
    jm = thunder.jit(model, cache=SYMBOLIC)
    for T in (3, 5):
        _assert_like_eager(model, jm, T)
    stamped, interpreted = _blocks(jm)
    assert name in interpreted.get("self.blocks.2", ""), interpreted
    assert "self.blocks.3" in stamped


@pytest.mark.parametrize("change", ["scale", "repeat", "parameter", "frozen", "hook"])
def test_a_stamped_block_changed_after_the_compile_misses_the_entry(change):
    model = _stack()
    jm = thunder.jit(model, cache=SYMBOLIC)
    _assert_like_eager(model, jm, 5)
    assert "self.blocks.2" in _blocks(jm)[0]
    block = model.blocks[2]
    if change == "scale":
        block.scale = 3.0
    elif change == "repeat":
        block.repeat = 2
    elif change == "parameter":
        block.lin.weight = nn.Parameter(torch.randn(8, 8))
    elif change == "frozen":
        block.lin.weight.requires_grad_(False)
    else:
        block.register_forward_hook(lambda m, args, out: out * 2)
    _assert_like_eager(model, jm, 5)
    assert thunder.cache_misses(jm) == 2


def test_a_hook_on_one_block_interprets_it():
    model = _stack()
    model.blocks[1].register_forward_hook(lambda m, args, out: out + 1)
    stamped, interpreted = _run(model)
    assert "self.blocks.1" in interpreted and "self.blocks.2" in interpreted, interpreted


def test_a_module_shared_between_blocks_is_not_stamped():
    model = _stack()
    model.blocks[2].lin = model.blocks[1].lin
    jm = thunder.jit(model, cache=SYMBOLIC)
    _assert_like_eager(model, jm, 5)
    assert "self.blocks.2" in _blocks(jm)[1]


class ReadsAWeightFirst(Stack):
    def forward(self, x):
        x = x + self.blocks[2].lin.weight.sum()  # the sibling's weight, read before the loop
        return super().forward(x)


def test_a_tensor_read_before_through_another_path_is_not_stamped():
    model = _seeded(ReadsAWeightFirst, Block, 4)
    stamped, interpreted = _run(model)
    assert "another path" in interpreted.get("self.blocks.2", ""), interpreted
    assert "self.blocks.3" in stamped


class Counting(Block):
    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x):
        self.calls.add_(1)
        return super().forward(x)


def test_a_first_block_that_writes_in_place_is_not_stamped():
    model = _seeded(Stack, Counting, 3)
    stamped, interpreted = _run(model)
    assert [float(b.calls) for b in model.blocks] == [1.0, 1.0, 1.0]
    assert stamped == [] and "in place" in interpreted["self.blocks.1"], interpreted


class StoresOnItself(Block):
    def forward(self, x):
        self.calls = getattr(self, "calls", 0) + 1  # a store into the module: replayed per block
        return super().forward(x)


def test_a_first_block_that_stores_into_its_module_is_not_stamped():
    model = _seeded(Stack, StoresOnItself, 3)
    stamped, interpreted = _run(model)
    assert [b.calls for b in model.blocks] == [1, 1, 1]
    assert stamped == [], interpreted


class PartlyWithoutGrad(Stack):
    def forward(self, x):
        x = self.blocks[0](x)
        x = self.blocks[1](x)
        with torch.no_grad():
            x = self.blocks[2](x)
        return self.blocks[3](x)


def test_a_block_called_under_another_grad_mode_is_interpreted():
    model = _seeded(PartlyWithoutGrad, Block, 4)
    stamped, interpreted = _run(model)
    assert "grad mode" in interpreted.get("self.blocks.2", ""), (stamped, interpreted)


class Dropping(Block):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(super().forward(x))


def test_stamped_random_blocks_draw_their_own_numbers():
    """Each stamped dropout reads and advances the random state as an interpreted one does."""
    jitted = []
    for enabled in (False, True):
        torch.manual_seed(0)
        model = Stack([Dropping() for _ in range(4)]).train()
        jm = thunder.jit(model, cache=SYMBOLIC)
        with stamping(enabled):
            jm(torch.ones(2, 6, 8))
        jitted.append(jm)
    interpreted, stamped = jitted
    assert "self.blocks.3" in _blocks(stamped)[0]
    assert canonical_trace(thunder.last_traces(stamped)[-1]) == canonical_trace(thunder.last_traces(interpreted)[-1])
    first, second = stamped(torch.ones(2, 6, 8)), stamped(torch.ones(2, 6, 8))
    assert not torch.equal(first, second), "two calls drew the same numbers"


class Widening(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8)])

    def forward(self, x):
        a = self.blocks[0](x)
        b = self.blocks[1](torch.cat([a, a], 1))  # another length: other sizes than the first call's
        return self.blocks[2](b)


def test_a_block_called_with_other_sizes_is_interpreted():
    torch.manual_seed(0)
    model = Widening()
    stamped, interpreted = _run(model)
    assert "shape[1]" in interpreted["self.blocks.1"] and stamped == ["self.blocks.2"], (stamped, interpreted)


def test_stamping_switched_off_interprets_every_block():
    model = _stack()
    jm = thunder.jit(model, cache=SYMBOLIC)
    with stamping(False):
        _assert_like_eager(model, jm, 5)
    assert _blocks(jm) == ([], {})


def test_stamped_and_interpreted_compiles_check_and_compute_the_same():
    traces = []
    for enabled in (False, True):
        model = _stack()
        jm = thunder.jit(model, cache=SYMBOLIC)
        with stamping(enabled):
            jm(_x(5)).sum().backward()
        traces.append(jm)
    interpreted, stamped = traces
    assert _blocks(stamped)[0], "nothing was stamped"
    assert prologue_checks(thunder.last_prologue_traces(stamped)[-1]) == prologue_checks(
        thunder.last_prologue_traces(interpreted)[-1])
    assert canonical_trace(thunder.last_traces(stamped)[-1]) == canonical_trace(thunder.last_traces(interpreted)[-1])
    assert canonical_trace(thunder.last_backward_traces(stamped)[-1]) == canonical_trace(
        thunder.last_backward_traces(interpreted)[-1])


# ---------------------------------------------------------------------------------------------
# Real models: the stamped compile against the interpreted one
# ---------------------------------------------------------------------------------------------


def _litgpt():
    from thunder.tests.litgpt_model import GPT, Config

    torch.manual_seed(0)
    model = GPT(Config.from_name("llama2-like", n_layer=3, block_size=128))
    idx = torch.randint(0, 100, (2, 16), generator=torch.Generator().manual_seed(0))
    return model, (idx,), {}, lambda out: out


def _hf(family: str):
    def build():
        import transformers
        import hf_workloads

        _, config = hf_workloads.user_configs()[family]
        config = copy.deepcopy(config)
        config.num_hidden_layers = 3  # (the first layer takes the embedding, the second and third stamp)
        if getattr(config, "layer_types", None):
            config.layer_types = [config.layer_types[0]] * 3
        torch.manual_seed(0)
        auto = transformers.AutoModelForMaskedLM if family == "bert" else transformers.AutoModelForCausalLM
        model = auto.from_config(config).eval()
        ids = hf_workloads.ids(12, 0, hf_workloads.USER_VOCAB)
        return model, (), {"input_ids": ids}, lambda out: out.logits

    return build


MODELS = {"litgpt": _litgpt, "hf-llama": _hf("llama"), "hf-gpt2": _hf("gpt2"), "hf-bert": _hf("bert"),
          "hf-qwen2": _hf("qwen2")}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(MODELS))
def test_models_stamped_check_and_compute_as_interpreted(name):
    jitted = []
    for enabled in (False, True):
        model, args, kwargs, logits = MODELS[name]()
        ref = copy.deepcopy(model)
        jm = thunder.jit(model, cache=SYMBOLIC)
        with stamping(enabled):
            out = logits(jm(*args, **kwargs))
        expected = logits(ref(*args, **kwargs))
        assert torch.allclose(out, expected, atol=1e-4), f"stamping={enabled}: outputs differ from eager"
        out.sum().backward()
        expected.sum().backward()
        for (n, p), (_, q) in zip(model.named_parameters(), ref.named_parameters()):
            if q.grad is not None:
                assert torch.allclose(p.grad, q.grad, atol=1e-4, rtol=1e-4), f"stamping={enabled}: {n}'s grad"
        jitted.append(jm)
    interpreted, stamped = jitted
    blocks = [b for b in _blocks(stamped)[0] if b.rsplit(".", 1)[-1].isdigit()]
    assert blocks, "no layer was stamped"
    stamped_prologue = thunder.last_prologue_traces(stamped)[-1]
    interpreted_prologue = thunder.last_prologue_traces(interpreted)[-1]
    more = checked_values(stamped_prologue) - checked_values(interpreted_prologue)
    assert not checked_values(interpreted_prologue) - checked_values(stamped_prologue), "a value is checked no more"
    assert all(any(f"'{b.removeprefix('self.')}" in v for b in blocks) for v in more), more
    assert guard_texts(stamped_prologue) == guard_texts(interpreted_prologue)
    assert canonical_trace(thunder.last_traces(stamped)[-1]) == canonical_trace(thunder.last_traces(interpreted)[-1])
    assert canonical_trace(thunder.last_backward_traces(stamped)[-1]) == canonical_trace(
        thunder.last_backward_traces(interpreted)[-1])


# ---------------------------------------------------------------------------------------------
# Generated: every kind of value a block reads x read first through another path or not
# ---------------------------------------------------------------------------------------------


class Kind(enum.Enum):
    A = 2
    B = 3


# kind -> (the value every block holds, the value one block gets instead, how forward uses it)
READ_VALUES = {
    "small int": (2, 3, lambda y, v: y * v),
    "large int": (1000, 1001, lambda y, v: y * (v / 1000)),
    "float": (0.5, 0.25, lambda y, v: y * v),
    "string": ("relu", "tanh", lambda y, v: torch.relu(y) if v == "relu" else torch.tanh(y)),
    "bool": (True, False, lambda y, v: y + 1 if v else y),
    "None": (None, 2.0, lambda y, v: y if v is None else y * v),
    "dtype": (torch.float32, torch.int32, lambda y, v: (y * 10).to(v).to(torch.float32)),
    "tuple": ((1, 2), (1, 3), lambda y, v: y * v[1]),
    "enum member": (Kind.A, Kind.B, lambda y, v: y * v.value),
}


class ReadsAValue(nn.Module):
    def __init__(self, value, use):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.value, self.use = value, use

    def forward(self, x):
        return self.use(self.lin(x), self.value)


class ReadsTheSameFirst(Stack):
    def forward(self, x):
        if self.first:
            _ = self.shared  # the same object the blocks hold, read first through this path
        return super().forward(x)


@pytest.mark.parametrize("read_first", [False, True], ids=["own path", "read first elsewhere"])
@pytest.mark.parametrize("kind", list(READ_VALUES))
def test_a_read_value_that_differs_before_or_after_the_compile(kind, read_first):
    value, other, use = READ_VALUES[kind]
    torch.manual_seed(0)
    model = ReadsTheSameFirst([ReadsAValue(value, use) for _ in range(4)])
    model.first, model.shared = read_first, value
    model.blocks[3].value = other  # differs before the compile: block 3 is interpreted
    ref = copy.deepcopy(model)
    jm = thunder.jit(model, cache=SYMBOLIC)
    x = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(1))
    assert torch.allclose(jm(x), ref(x), atol=1e-5), "the differing block"
    assert "self.blocks.2" in _blocks(jm)[0] and "self.blocks.3" in _blocks(jm)[1]
    model.blocks[2].value = ref.blocks[2].value = other  # a stamped block changes after the compile
    assert torch.allclose(jm(x), ref(x), atol=1e-5), "the stamped block changed"
    assert thunder.cache_misses(jm) == 2


def test_an_entry_loaded_from_disk_shows_none_of_this_compiles_blocks(enabled, tmp_path, monkeypatch):
    """explain()'s blocks belong to the compile of the newest entry: an entry another jit stored,
    loaded (before any compile: loads come first in the entries' list), shows none of them."""
    from metatrace.entry_cache import entry_cache_stats

    monkeypatch.setenv("METATRACE_ENTRY_CACHE", "1")
    monkeypatch.setenv("METATRACE_ENTRY_CACHE_DIR", str(tmp_path / "entries"))
    model = _stack()
    thunder.jit(model, cache="symbolic values")(_x(5).detach())  # stores the no-grad entry
    jm = thunder.jit(model, cache="symbolic values")
    jm(_x(5))  # loads the no-grad entry, then compiles the grad entry, blocks stamped
    assert entry_cache_stats(jm).loaded == 1
    loaded, compiled = metatrace.explain(jm)
    assert loaded.blocks == []
    assert compiled.stamped == ["self.blocks.2", "self.blocks.3"]
