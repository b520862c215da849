"""Hugging Face Mixture-of-Experts models under ``cache="symbolic values"`` (issue 28).

transformers 5.3's MoE layers choose their experts' code by ``config._experts_implementation``:

- ``"grouped_mm"`` (the default with torch >= 2.9): tokens sorted by expert (``argsort``),
  counted per expert with ``torch.histc``, then one grouped matmul per projection. Under thunder
  (``torch.compiler.is_compiling()`` is True) float32 weights take transformers' custom op
  ``torch.ops.transformers.grouped_mm_fallback``, which stock thunder refuses ("not registered")
  and which metatrace traces with its fake implementation's symbolic sizes and its own autograd
  (metatrace.metas.torch_ops.custom_ops); ``histc`` keeps its input's sizes symbolic (metatrace.metas.torch_ops.histc);
- ``"batched_mm"``: per-token expert weights gathered, ``bmm``: no size read from data;
- ``"eager"``: a Python loop over ``expert_hit = (...).nonzero()``, whose trip count is read from
  tensor data: no trace serves every routing, and metatrace raises ``DataDependentError``.

Models are built as users build them (``AutoConfig.for_model``, ``AutoModelForCausalLM.from_config``:
2 layers, hidden 32, 4 experts, top-2, vocab 100, float32 CPU, ``use_cache=False``); one jitted
model per case (module-scoped fixture), eval (``torch.no_grad()``) over 5 lengths then a training
step (``loss = logits.sum()``, ``model.train()``) over the same lengths: compiles, logits and every
parameter gradient against eager, both trace checkers.
"""

from __future__ import annotations

import functools

import pytest
import thunder
import torch

import metatrace
from metatrace.guards.collect import DataDependentError

transformers = pytest.importorskip(
    "transformers", exc_type=ImportError,
    reason="transformers not importable: install requirements.lock's transformers, regex and tokenizers pins",
)

pytestmark = pytest.mark.slow

LENGTHS = (8, 12, 16, 24, 32)
BATCH, VOCAB = 2, 100
_COMMON = dict(num_hidden_layers=2, hidden_size=32, intermediate_size=64, num_attention_heads=4,
               num_key_value_heads=2, vocab_size=VOCAB, max_position_embeddings=64, use_cache=False)
CONFIGS = {
    "mixtral": dict(_COMMON, num_local_experts=4, num_experts_per_tok=2),
    "qwen2_moe": dict(_COMMON, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                      shared_expert_intermediate_size=64),
}
# (family, experts implementation; None: transformers' default)
CASES = [("mixtral", None), ("qwen2_moe", None), ("mixtral", "batched_mm")]
CASE_IDS = [f"{family}-{impl or 'default'}" for family, impl in CASES]
# float32 sums of the experts' contributions in another order than eager's (measured: 3e-5)
GRAD_TOLERANCE = dict(atol=1e-4, rtol=1e-4)


def build(family: str, impl: str | None):
    torch.manual_seed(0)
    config = transformers.AutoConfig.for_model(family, **CONFIGS[family])
    kwargs = {} if impl is None else {"experts_implementation": impl}
    return transformers.AutoModelForCausalLM.from_config(config, **kwargs)


def ids(T: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(1, VOCAB, (BATCH, T), generator=g)


class Run:
    """One model jitted once: eval over LENGTHS, then training over LENGTHS, next to eager."""

    def __init__(self, family: str, impl: str | None):
        self.model = model = build(family, impl)
        self.jm = jm = thunder.jit(model, cache="symbolic values")
        model.eval()
        self.eval_steps = []
        for i, T in enumerate(LENGTHS):
            x = ids(T, i)
            with torch.no_grad():
                self.eval_steps.append((T, jm(input_ids=x).logits, model(input_ids=x).logits))
        self.eval_misses = thunder.cache_misses(jm)
        self.eval_trace = thunder.last_traces(jm)[-1]
        model.train()
        params = list(model.parameters())
        self.names = [name for name, _ in model.named_parameters()]
        self.train_steps = []
        for i, T in enumerate(LENGTHS):
            x = ids(T, 100 + i)
            expected = model(input_ids=x).logits
            expected_grads = torch.autograd.grad(expected.sum(), params, allow_unused=True)
            actual = jm(input_ids=x).logits
            grads = torch.autograd.grad(actual.sum(), params, allow_unused=True)
            self.train_steps.append((T, actual, expected, grads, expected_grads))
        self.misses = thunder.cache_misses(jm)
        self.train_traces = (thunder.last_traces(jm)[-1], thunder.last_backward_traces(jm)[-1])


@pytest.fixture(scope="module")
def runs(module_enabled):
    """A case's run, made once in this module (metatrace enabled) when a test first asks for it."""
    return functools.cache(lambda case: Run(*case))


@pytest.fixture
def run(runs, request):
    return runs(request.param)


def test_the_default_experts_implementation_is_grouped_mm():
    # the default cases test what a user gets without choosing: grouped_mm (torch >= 2.9)
    assert build("mixtral", None).config._experts_implementation == "grouped_mm"


@pytest.mark.parametrize("run", CASES, ids=CASE_IDS, indirect=True)
def test_eval_compiles_once_over_five_lengths(run):
    assert run.eval_misses == 1


@pytest.mark.parametrize("run", CASES, ids=CASE_IDS, indirect=True)
def test_eval_logits_equal_eager(run):
    for T, actual, expected in run.eval_steps:
        torch.testing.assert_close(actual, expected, msg=lambda m: f"T={T}: {m}")


@pytest.mark.parametrize("run", CASES, ids=CASE_IDS, indirect=True)
def test_eval_and_training_compile_at_most_twice(run):
    assert run.misses <= 2


@pytest.mark.parametrize("run", CASES, ids=CASE_IDS, indirect=True)
def test_training_logits_equal_eager(run):
    for T, actual, expected, _, _ in run.train_steps:
        torch.testing.assert_close(actual, expected, msg=lambda m: f"T={T}: {m}")


@pytest.mark.parametrize("run", CASES, ids=CASE_IDS, indirect=True)
def test_every_gradient_equals_eager(run):
    for T, _, _, grads, expected_grads in run.train_steps:
        for name, g, e in zip(run.names, grads, expected_grads):
            assert (g is None) == (e is None), f"T={T}: {name} has a gradient in one only"
            if e is not None:
                torch.testing.assert_close(g, e, **GRAD_TOLERANCE, msg=lambda m: f"T={T} {name}: {m}")


@pytest.mark.parametrize("run", CASES, ids=CASE_IDS, indirect=True)
def test_traces_pass_both_checkers(run):
    # (under module_enabled: thunder's check re-runs every meta, and only metatrace's know these sizes)
    for trace in (run.eval_trace, *run.train_traces):
        metatrace.check_trace(trace)  # metatrace's strict checker, then thunder's check_trace


@pytest.mark.parametrize("run", [c for c in CASES if c[1] is None], ids=[i for c, i in zip(CASES, CASE_IDS) if c[1] is None],
                         indirect=True)
def test_grouped_mm_runs_transformers_custom_op(run):
    # the default path under thunder is transformers' custom op, one per projection and layer
    names = [b.args[0] for b in run.eval_trace.bound_symbols if b.sym.name == "metatrace_custom_op"]
    assert names == ["transformers::grouped_mm_fallback"] * 4


@pytest.fixture(scope="module")
def eager_experts_error(module_enabled):
    model = build("mixtral", "eager").eval()
    jm = thunder.jit(model, cache="symbolic values")
    with pytest.raises(DataDependentError) as info, torch.no_grad():
        jm(input_ids=ids(8, 0))
    return str(info.value)


def test_eager_experts_error_names_the_value_read_from_data(eager_experts_error):
    # the loop's trip count is the row count of expert_hit = (...).nonzero()
    assert "computed from metatrace_nonzero(" in eager_experts_error


def test_eager_experts_error_names_the_users_loop(eager_experts_error):
    # `for expert_idx in expert_hit:` in MixtralExperts.forward
    assert "models/mixtral/modeling_mixtral.py:86 in forward" in eager_experts_error
