"""The models users run through ThunderFX (``thunder.dynamo.thunderfx(model)``) with metatrace
enabled (issue 54): Dynamo captures, thunder's splitter sends what thunder runs to thunder under
symbolic values (``metatrace/thunderfx.py``: dynamic capture from the first call, floats
specialized, ``cache="symbolic values"``) and the rest to inductor.

Each model is compiled once (``thunderfx(model)`` after ``torch._dynamo.reset()``) and run over
several sequence lengths next to eager; what each test asserts is one claim:

- outputs (logits, or generate's tokens) equal eager's at every length;
- every parameter gradient equals eager's (training models), with the sibling tests' tolerances;
- Dynamo's graphs: one per frame over every shape (``counters["stats"]["unique_graphs"]``, the
  backend's ``subgraph_infos``), no new graph after the first length;
- thunder compiles: ``thunder.cache_misses`` of every thunder subgraph
  (``subgraph_infos[*].thunder_compiled_fns``, as tools/bench.py's thunderfx section counts): 1
  per subgraph over every length (generate: at most 2).

``generate``'s forward is several Dynamo graphs per batch group: the prefill, the first decode
step and the later ones (Dynamo guards the cache keys' strides: a transpose after the prefill,
contiguous after ``torch.cat``), and a batch of 1 has graphs of its own (torch's 0/1
specialization: an xfail naming it); each of their thunder subgraphs compiles once.

What it needed in metatrace/thunderfx.py: floats specialized while Dynamo traces (``dynamic=True``
made a module's float attributes 0-d tensors read with ``.item()``: dropout's check raised
``DataDependentError`` in HF Llama training), transformers' ``grouped_mm_fallback`` custom op
kept in thunder (inductor's AOT autograd failed on its backward: Mixtral and Qwen2-MoE gave up
every frame), aliased subgraph arguments with their sizes bound (metatrace/thunderfx_alias_args.py),
a SymInt output of a subgraph not marked non-differentiable, and the ops thunder only registers
automatically (``torch.diff``, ``Tensor.new_ones``, ``torch.histc``) kept in thunder under symbolic
values (HF Llama: one thunder subgraph, no inductor compile), and GPT-2's ``torch.Size`` nodes
inlined as lists in the views that take them (its ``Conv1D`` builds ``torch.Size(x.size()[:-1] +
(nf,))``, which thunder's splitter refused: no mapping for ``torch.Size``, and
``get_proxy_inputs_from_node`` takes a tuple example value for tensors, "'SymInt' object has no
attribute 'new_ones'"; it was cut in 6 thunder and 5 inductor subgraphs, now one thunder subgraph).
The splitter's trial runs are one per graph and signature: a model's repeated blocks add none.

The models, small configs from the sibling tests' builders: litgpt ``llama2-like`` training
(tests/litgpt_workloads.py), HF Llama and GPT-2 training (tests/hf_workloads.py's tiny shape,
``model.train()``), Mixtral and Qwen2-MoE training (tests/models/test_hf_moe.py's build: the
default grouped_mm experts), HF ``generate`` with the DynamicCache (tests/models/test_hf_generate.py's
tiny Llama, ``model.forward = thunderfx(model.forward)``), and small models with a graph break: a
``print`` and a data-dependent Python branch in ``forward``.
"""

from __future__ import annotations

import functools
import time

import pytest
import torch
import torch._dynamo

import thunder

import metatrace

transformers = pytest.importorskip(
    "transformers", exc_type=ImportError,
    reason="transformers not importable: install requirements.lock's transformers, regex and tokenizers pins",
)
from thunder.dynamo import thunderfx  # noqa: E402

import hf_workloads  # noqa: E402
import litgpt_workloads  # noqa: E402
import test_hf_generate  # noqa: E402  (tests/models, on sys.path beside this file)
import test_hf_moe  # noqa: E402

pytestmark = pytest.mark.slow

LENGTHS = (8, 12, 16)
# the sibling tests' tolerances: litgpt's (tests/models/test_litgpt.py), the MoE models'
# (tests/models/test_hf_moe.py), the tiny HF models' (torch's defaults, tests/models/test_hf_models.py)
LITGPT_OUT = dict(atol=1e-5, rtol=1e-5)
LITGPT_GRAD = dict(atol=1e-4, rtol=1e-4)
MOE_GRAD = test_hf_moe.GRAD_TOLERANCE
DEFAULT = {}


def _subgraph_compiles(backend) -> list[int]:
    """Thunder compiles of every thunder subgraph, in the backend's order."""
    return [thunder.cache_misses(fn) for info in backend.subgraph_infos for fn in info.thunder_compiled_fns]


class Run:
    """One model through ``thunderfx`` over its lengths next to eager: per length the output and
    gradients of both sides, the Dynamo graphs and the thunder compiles after it, and seconds."""

    def __init__(self, model, step, lengths, out_tol=DEFAULT, grad_tol=DEFAULT):
        """``step(fn, T)``: (output, {parameter name: gradient} or None) of ``fn`` at length T;
        called with the model itself (eager) and with its thunderfx."""
        torch._dynamo.reset()
        counters = torch._dynamo.utils.counters
        counters.clear()
        self.out_tol, self.grad_tol = out_tol, grad_tol
        self.compiled = compiled = thunderfx(model)
        self.backend = compiled._backend
        self.steps, self.graphs, self.compiles = [], [], []
        start = time.perf_counter()
        for T in lengths:
            expected = step(model, T)
            actual = step(compiled, T)
            self.steps.append((T, actual, expected))
            self.graphs.append(counters["stats"]["unique_graphs"])
            self.compiles.append(_subgraph_compiles(self.backend))
        self.seconds = time.perf_counter() - start
        print(f"thunderfx run: {self.seconds:.1f} s (eager included), Dynamo graphs after each length "
              f"{self.graphs}, thunder compiles per subgraph {self.compiles[-1]}")


def _training_step(model, ids_of):
    """``step(fn, T)`` of a HF causal LM: logits and every parameter's gradient of ``logits.sum()``."""
    names = [name for name, p in model.named_parameters() if p.requires_grad]
    params = [p for p in model.parameters() if p.requires_grad]

    def step(fn, T):
        logits = fn(input_ids=ids_of(T)).logits
        grads = torch.autograd.grad(logits.sum(), params, allow_unused=True)
        return logits.detach(), {n: g for n, g in zip(names, grads) if g is not None}

    return step


def _litgpt():
    model = litgpt_workloads.build("llama2-like")
    model.train()

    def step(fn, T):
        return litgpt_workloads.training_step(fn, model, litgpt_workloads.training_input(model, T))

    return Run(model, step, LENGTHS, LITGPT_OUT, LITGPT_GRAD)


def _hf(name):
    model = hf_workloads.build(name, "tiny")
    model.train()  # as a user trains (the tiny configs have no dropout: eager's results are deterministic)
    return Run(model, _training_step(model, lambda T: hf_workloads.ids(T, T)), LENGTHS)


def _moe(family):
    model = test_hf_moe.build(family, None)
    model.train()
    return Run(model, _training_step(model, lambda T: test_hf_moe.ids(T, T)), LENGTHS, DEFAULT, MOE_GRAD)


class _Printing(torch.nn.Module):
    """A graph break by ``print`` between two halves of an MLP."""

    def __init__(self):
        super().__init__()
        self.first, self.second = torch.nn.Linear(16, 32), torch.nn.Linear(32, 16)

    def forward(self, x):
        h = torch.nn.functional.gelu(self.first(x))
        print(f"thunderfx graph-break model: hidden {tuple(h.shape)}")
        return self.second(h).softmax(-1)


class _Branching(torch.nn.Module):
    """A graph break by a Python branch on tensor data: the two ways resume in frames of their own."""

    def __init__(self):
        super().__init__()
        self.first, self.second = torch.nn.Linear(16, 32), torch.nn.Linear(32, 16)

    def forward(self, x):
        h = self.first(x)
        if x.sum() > 0:
            h = torch.relu(h) * 2
        else:
            h = torch.tanh(h) - 1
        return self.second(h)


def _graph_break(kind):
    torch.manual_seed(0)
    model = {"print": _Printing, "branch": _Branching}[kind]()
    model.train()
    names = [n for n, _ in model.named_parameters()]

    def step(fn, T):
        # the input's sign flips from length to length (+, -, +): the branching model takes both ways
        x = torch.randn(2, T, 16, generator=torch.Generator().manual_seed(T)).abs() * (1 if T % 8 == 0 else -1)
        out = fn(x)
        grads = torch.autograd.grad(out.square().sum(), list(model.parameters()))
        return out.detach(), dict(zip(names, grads))

    return Run(model, step, LENGTHS)


TRAINING = {
    "litgpt-llama2-like": _litgpt,
    "hf-llama": lambda: _hf("llama"),
    "gpt2": lambda: _hf("gpt2"),
    "mixtral": lambda: _moe("mixtral"),
    "qwen2_moe": lambda: _moe("qwen2_moe"),
    "graph-break-print": lambda: _graph_break("print"),
    "graph-break-branch": lambda: _graph_break("branch"),
}
# Dynamo graphs per model: one frame each, but the graph-break models' (print: the part before
# and the part after it; branch: the part before, and each way's resumed rest)
EXPECTED_GRAPHS = dict.fromkeys(TRAINING, 1) | {"graph-break-print": 2, "graph-break-branch": 3}


@pytest.fixture(scope="module")
def runs(module_enabled):
    """A case's run, made once in this module (metatrace enabled) when a test first asks for it."""
    return functools.cache(lambda name: TRAINING[name]())


@pytest.fixture
def run(runs, request):
    return runs(request.param)


ALL = pytest.mark.parametrize("run", list(TRAINING), indirect=True)


@ALL
def test_outputs_equal_eager(run):
    for T, (actual, _), (expected, _) in run.steps:
        torch.testing.assert_close(actual, expected, **run.out_tol, msg=lambda m: f"T={T}: {m}")


@ALL
def test_the_same_parameters_have_gradients_as_in_eager(run):
    for T, (_, grads), (_, expected) in run.steps:
        assert grads.keys() == expected.keys(), f"T={T}"


@ALL
def test_gradients_equal_eager(run):
    for T, (_, grads), (_, expected) in run.steps:
        for name in expected.keys() & grads.keys():
            torch.testing.assert_close(grads[name], expected[name], **run.grad_tol, msg=lambda m: f"T={T} {name}: {m}")


@ALL
def test_dynamo_graphs_one_per_frame(run, request):
    assert run.graphs[-1] == EXPECTED_GRAPHS[request.node.callspec.id], run.graphs


@ALL
def test_no_new_dynamo_graph_after_the_first_lengths(run, request):
    # (the branching model takes its second way at the second length)
    settled = 1 if request.node.callspec.id != "graph-break-branch" else 2
    assert run.graphs[settled - 1] == run.graphs[-1], run.graphs


@ALL
def test_backend_compiled_each_dynamo_graph_once(run, request):
    assert len(run.backend.subgraph_infos) == run.graphs[-1]


@ALL
def test_every_thunder_subgraph_compiled_once_over_the_lengths(run):
    assert run.compiles[-1] == [1] * len(run.compiles[-1]), run.compiles


@ALL
def test_thunder_runs_some_of_each_graph(run):
    assert all(info.thunder_compiled_fns for info in run.backend.subgraph_infos)


# models whose every Dynamo graph is one thunder subgraph, nothing sent to inductor (GPT-2's
# ``torch.Size`` of its Conv1D views inlined as lists: metatrace.thunderfx._sizes_inlined)
WHOLE_IN_THUNDER = pytest.mark.parametrize("run", ["litgpt-llama2-like", "hf-llama", "gpt2"], indirect=True)


@WHOLE_IN_THUNDER
def test_each_graph_is_one_thunder_subgraph(run):
    assert [len(info.thunder_compiled_fns) for info in run.backend.subgraph_infos] == [1] * run.graphs[-1]


@WHOLE_IN_THUNDER
def test_nothing_is_split_out_of_thunder(run):
    assert [reason.info for info in run.backend.subgraph_infos for reason in info.split_reasons] == []


# --- HF generate with the DynamicCache ---------------------------------------------------------

# (prompt length, batch): 3 lengths over batches 1-3
GENERATE_PROMPTS = ((5, 1), (7, 2), (4, 3))


class Generate:
    """tests/models/test_hf_generate.py's tiny Llama, ``model.forward = thunderfx(model.forward)``,
    greedy ``generate`` (the default DynamicCache) over GENERATE_PROMPTS next to eager."""

    def __init__(self):
        torch._dynamo.reset()
        counters = torch._dynamo.utils.counters
        counters.clear()
        model, eager = test_hf_generate.family("llama")
        compiled = thunderfx(model.forward)
        self.backend = compiled._backend
        model.forward = compiled
        self.calls, self.graphs, self.compiles = [], [], []
        start = time.perf_counter()
        for seed, (length, batch) in enumerate(GENERATE_PROMPTS):
            ids = test_hf_generate.prompt(length, batch, seed)
            with torch.no_grad():
                got = test_hf_generate.greedy(model, ids)
                want = test_hf_generate.greedy(eager, ids)
            self.calls.append((length, batch, got, want))
            self.graphs.append(counters["stats"]["unique_graphs"])
            self.compiles.append(_subgraph_compiles(self.backend))
        self.seconds = time.perf_counter() - start
        print(f"thunderfx generate: {self.seconds:.1f} s (eager included), Dynamo graphs after each prompt "
              f"{self.graphs}, thunder compiles per subgraph {self.compiles[-1]}")


@pytest.fixture(scope="module")
def generate(module_enabled):
    return Generate()


def test_generate_tokens_equal_eager(generate):
    for length, batch, got, want in generate.calls:
        assert torch.equal(got, want), f"prompt {length}, batch {batch}: {got} where eager has {want}"


def test_generate_compiles_each_thunder_subgraph_at_most_twice(generate):
    assert max(generate.compiles[-1]) <= 2, generate.compiles


def test_generate_of_batch_1_is_three_dynamo_graphs(generate):
    # forward's frame: the prefill (the cache not initialized yet), the first decode step (the
    # cache's keys as the prefill left them: a transpose, stride 8 at index 1) and the later steps
    # (keys from torch.cat, contiguous: Dynamo guards strides; metatrace's entries do not)
    assert generate.graphs[0] == 3, generate.graphs


def test_generate_adds_no_dynamo_graph_after_the_second_prompt(generate):
    # batch 2 then batch 3, another prompt length: the graphs of batch 2 serve
    assert generate.graphs[1] == generate.graphs[2], generate.graphs


@pytest.mark.xfail(strict=True, reason=(
    "torch's 0/1 specialization: Dynamo's ShapeEnv.create_symbol makes a size of 1 a constant "
    "(torch/fx/experimental/symbolic_shapes.py, do_not_specialize_zero_one only under "
    "torch.fx.experimental._config.backed_size_oblivious), so the batch-1 prompt's 3 graphs do "
    "not serve batch 2 (3 more graphs; metatrace's own entries share batch 1). "
    "backed_size_oblivious=True is no way out: Dynamo then fails on apply_rotary_pos_emb's "
    "broadcast of a batch of 1 (transformers/models/llama/modeling_llama.py:166)"))
def test_generate_adds_no_dynamo_graph_after_the_first_prompt(generate):
    assert generate.graphs[0] == generate.graphs[-1], generate.graphs


# --- aliased arguments (metatrace/thunderfx_alias_args.py) ---------------------------------------


def _two_views_and_a_write(a, b, w):
    y = b.float() * 2
    w.add_(1)
    return a.float().sum() + y.sum() + w.sum()


def test_aliased_arguments_with_an_in_place_write_equal_eager(module_enabled):
    # as a thunder subgraph of HF's mask and rotary code gets them: two views of cache_position;
    # thunder replaces the second by a reshape of the first to the second's (symbolic) shape
    # (without the size read: UnboundLocalError on the shape's size, or the fusion pass's KeyError)
    jf = thunder.jit(_two_views_and_a_write, cache="symbolic values")
    for T in (5, 7):
        base, w, w_eager = torch.arange(T), torch.zeros(3), torch.zeros(3)
        got = jf(base[None, None, :, None], base.unsqueeze(0), w)
        want = _two_views_and_a_write(base[None, None, :, None], base.unsqueeze(0), w_eager)
        torch.testing.assert_close((got, w), (want, w_eager), msg=lambda m: f"T={T}: {m}")


def test_aliased_arguments_compile_once_over_lengths(module_enabled):
    jf = thunder.jit(_two_views_and_a_write, cache="symbolic values")
    for T in (5, 7, 9):
        base = torch.arange(T)
        jf(base[None, None, :, None], base.unsqueeze(0), torch.zeros(3))
    assert thunder.cache_misses(jf) == 1


# --- the splitter's trial runs (metatrace.thunderfx._run_once_per_signature) -----------------------


class _Blocks(torch.nn.Module):
    """``depth`` identical blocks: the same ops on the same shapes, once per block."""

    def __init__(self, depth):
        super().__init__()
        torch.manual_seed(0)
        self.blocks = torch.nn.ModuleList(torch.nn.Linear(16, 16) for _ in range(depth))

    def forward(self, x):
        for block in self.blocks:
            x = torch.nn.functional.gelu(block(x)) + x
        return x


def _split_blocks(depth, monkeypatch):
    """(trial runs thunder's splitter made, output, {name: grad}, eager's output, eager's grads) of
    ``_Blocks(depth)`` through thunderfx at one length; a trial run is counted where thunder makes
    a node's proxies (``get_proxy_inputs_from_node``, once per run)."""
    import thunder.dynamo.utils as utils

    runs = []
    original = utils.get_proxy_inputs_from_node
    monkeypatch.setattr(utils, "get_proxy_inputs_from_node", lambda node: runs.append(node) or original(node))
    torch._dynamo.reset()
    model = _Blocks(depth)
    x = torch.randn(2, 8, 16, generator=torch.Generator().manual_seed(1))
    out = thunderfx(model)(x)
    grads = torch.autograd.grad(out.sum(), list(model.parameters()))
    want = model(x)
    want_grads = torch.autograd.grad(want.sum(), list(model.parameters()))
    return len(runs), out, grads, want, want_grads


def test_repeated_blocks_add_no_trial_runs_to_the_split(enabled, monkeypatch):
    # (the first block's input does not require grad, the others' do: two blocks hold every signature)
    assert _split_blocks(4, monkeypatch)[0] == _split_blocks(2, monkeypatch)[0]


def test_repeated_blocks_split_once_per_signature_equal_eager(enabled, monkeypatch):
    _, out, grads, want, want_grads = _split_blocks(4, monkeypatch)
    torch.testing.assert_close((out, grads), (want, want_grads))
