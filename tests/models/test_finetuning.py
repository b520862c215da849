"""Finetuning litgpt models under symbolic values: LoRA and adapter_v2 reuse one entry over lengths.

litgpt's finetuning models (``litgpt.lora.GPT`` with LoRA on query, value and projection,
``litgpt.adapter_v2.GPT``) on thunder's ``llama2-like`` testing config, 2 layers, only the
finetuned weights trainable (``mark_only_*_as_trainable``). A training step per length: the output
and the gradient of every trainable parameter equal eager, every trace passes the strict checker,
and one entry serves every length (LoRA's ``zero_pad`` calls ``x.new_zeros(*x.shape[:-1], n)``,
which pinned each length before).
"""

from __future__ import annotations

import copy

import pytest
import torch

import thunder
import thunder.tests.litgpt_model  # noqa: F401  (registers the testing configs with litgpt)

import metatrace
from litgpt_workloads import all_traces, build_adapter_v2, build_lora, training_step

pytestmark = pytest.mark.slow

LENGTHS = (8, 13, 24, 40)


BUILDERS = {"lora": build_lora, "adapter_v2": build_adapter_v2}


@pytest.fixture(scope="module", params=sorted(BUILDERS))
def finetuned(request):
    """(steps, compiles, trace check failures): per length, (output, grads) of the jitted model
    and of an eager copy."""
    model = BUILDERS[request.param]("llama2-like")
    reference = copy.deepcopy(model)
    steps, failures = [], []
    with metatrace.enable():
        jm = thunder.jit(model, cache="symbolic values")
        for T in LENGTHS:
            idx = torch.randint(0, model.config.padded_vocab_size, (2, T), generator=torch.Generator().manual_seed(T))
            steps.append((training_step(jm, model, idx), training_step(reference, reference, idx)))
            for trace in all_traces(jm):
                try:
                    metatrace.check_trace(trace)  # metatrace's strict checker, then thunder's check_trace
                except Exception as e:
                    failures.append(f"T={T}: {type(e).__name__}: {e}")
        compiles = thunder.cache_misses(jm)
    return steps, compiles, failures


# LoRA's attention builds its ``_lora_ind`` index buffer lazily on the first call (``if not
# hasattr(self, "_lora_ind")``): the first entry is for a module without it (the prologue checks
# the answer, metatrace.interpret.reads.attribute_presence), the second serves every later length.
COMPILES = {"lora": 2, "adapter_v2": 1}


def test_one_entry_serves_every_length(finetuned, request):
    _, compiles, _ = finetuned
    assert compiles == COMPILES[request.node.callspec.params["finetuned"]]


def test_outputs_equal_eager(finetuned):
    steps, _, _ = finetuned
    for T, ((out, _), (expected, _)) in zip(LENGTHS, steps):
        torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5, msg=lambda m: f"T={T}: {m}")


def test_trainable_gradients_equal_eager(finetuned):
    steps, _, _ = finetuned
    for T, ((_, grads), (_, expected)) in zip(LENGTHS, steps):
        assert grads.keys() == expected.keys(), f"T={T}: parameters with a gradient differ"
        for name in expected:
            # (float32 sums over 2 x T x vocab logits: thunder's decompositions round differently)
            torch.testing.assert_close(grads[name], expected[name], atol=1e-4, rtol=1e-4,
                                       msg=lambda m: f"T={T} {name}: {m}")


def test_every_trace_passes_both_checkers(finetuned):
    _, _, failures = finetuned
    assert failures == []
