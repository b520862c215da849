"""litgpt workloads shared by tests/models/test_litgpt.py and tools/bench.py.

thunder's small litgpt testing configs (``thunder.tests.litgpt_model``), sized down to 2 layers
and a 128-token block, float32 on the CPU, fixed seeds. Two workloads:

- a training step: ``out = model(idx)`` with ``idx`` of shape (2, T), ``out.sum().backward()``;
- KV-cache decoding under ``torch.no_grad()``: ``set_kv_cache(batch_size=1)``, a prefill of 8
  tokens at ``input_pos=arange(8)``, then one token per step with ``input_pos`` advancing. Each
  call passes ``input_pos_maxp1`` (``max(input_pos) + 1``), as litgpt's ``generate`` does for a
  model that is not a ThunderModule: it slices the mask and the cached keys and values to that
  length, so the sizes change at every step (stock thunder under constant values recompiles at
  every step; litgpt's ``generate`` passes ``None`` to a ThunderModule for that reason).
"""

from __future__ import annotations

import copy

import torch

from thunder.tests.litgpt_model import GPT, Config

# Configs that run under thunder; mixtral-like does not (see MIXTRAL_REASON).
CONFIG_NAMES = ("gpt-neox-like", "llama1-like", "llama2-like", "codellama2-like", "falcon-7b-like")

MIXTRAL_REASON = (
    "stock thunder 0.2.6 fails on mixtral-like too (cache='constant values', metatrace disabled): "
    "LLaMAMoE calls torch.where(mask) with only a condition (litgpt/model.py:879), whose output size "
    "depends on tensor data; thunder raises NotImplementedError 'torch.where() does not support only "
    "specifying a condition'"
)

# The sequence lengths for the training step (tools/bench.py runs all of them).
TRAINING_LENGTHS = (8, 12, 16, 24, 32, 40, 48, 64)
BATCH = 2
PREFILL = 8
DECODE_STEPS = 32


def build(name: str, seed: int = 0) -> GPT:
    """The named testing config with 2 layers and block_size 128, weights from ``seed``."""
    torch.manual_seed(seed)
    config = Config.from_name(name, n_layer=2, block_size=128)
    return GPT(config)


def build_lora(name: str, seed: int = 0):
    """litgpt's LoRA model (r=4 on query, value and projection) on the named testing config, 2
    layers, only the LoRA weights trainable, those perturbed from their zero start (lora_B is
    zero-initialised: its gradient path would add nothing to compare)."""
    import litgpt.lora as lora

    torch.manual_seed(seed)
    config = lora.Config.from_name(name, n_layer=2, block_size=128, lora_r=4, lora_alpha=8,
                                   lora_query=True, lora_value=True, lora_projection=True)
    model = lora.GPT(config)
    lora.mark_only_lora_as_trainable(model)
    _perturb_trainable(model)
    return model


def build_adapter_v2(name: str, seed: int = 0):
    """litgpt's adapter_v2 model on the named testing config, 2 layers, only the adapter weights
    trainable, perturbed (its gating factors start at zero)."""
    import litgpt.adapter_v2 as adapter_v2

    torch.manual_seed(seed)
    model = adapter_v2.GPT(adapter_v2.Config.from_name(name, n_layer=2, block_size=128))
    adapter_v2.mark_only_adapter_v2_as_trainable(model)
    _perturb_trainable(model)
    return model


def _perturb_trainable(model) -> None:
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:
                p.add_(torch.randn_like(p) * 0.02)


def tokens(model: GPT, shape: tuple[int, ...], seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, model.config.padded_vocab_size, shape, generator=generator)


def training_input(model: GPT, T: int) -> torch.Tensor:
    """A (BATCH, T) batch of token ids, the same for every run with this T."""
    return tokens(model, (BATCH, T), seed=1000 + T)


def training_step(fn, model: GPT, idx: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """``fn(idx)``, ``out.sum().backward()``; the output and every parameter's gradient.

    ``fn`` is ``model`` itself (eager) or a ``thunder.jit`` of it: they share parameters, so
    gradients are zeroed first and cloned after.
    """
    model.zero_grad(set_to_none=True)
    out = fn(idx)
    out.sum().backward()
    grads = {name: p.grad.detach().clone() for name, p in model.named_parameters() if p.grad is not None}
    return out.detach(), grads


def decode_models(name: str, seed: int = 0) -> tuple[GPT, GPT]:
    """Two copies of the same model, each with its own KV cache (batch size 1): one to jit, one eager."""
    model = build(name, seed)
    reference = copy.deepcopy(model)
    model.set_kv_cache(batch_size=1)
    reference.set_kv_cache(batch_size=1)
    return model, reference


def decode_calls(model: GPT, steps: int = DECODE_STEPS, prefill: int = PREFILL, seed: int = 7):
    """The calls of a prefill plus ``steps`` decode steps: ``(idx, input_pos, input_pos_maxp1)``.

    Tokens are fixed (teacher forcing) so that the jitted and the eager model see the same inputs
    even where their logits differ in the last bits.
    """
    ids = tokens(model, (1, prefill + steps), seed=seed)
    calls = [(ids[:, :prefill], torch.arange(prefill), prefill)]
    for pos in range(prefill, prefill + steps):
        calls.append((ids[:, pos : pos + 1], torch.tensor([pos]), pos + 1))
    return calls


def decode(fn, calls, use_maxp1: bool = True) -> list[torch.Tensor]:
    """Runs the calls in order under ``torch.no_grad()``; the logits of each."""
    out = []
    with torch.no_grad():
        for idx, input_pos, maxp1 in calls:
            if use_maxp1:
                out.append(fn(idx, input_pos, input_pos_maxp1=maxp1))
            else:
                out.append(fn(idx, input_pos))
    return out


def all_traces(jf) -> list:
    """Prologue, computation and backward traces of the entry used last."""
    import thunder

    return [*thunder.last_prologue_traces(jf), *thunder.last_traces(jf), *thunder.last_backward_traces(jf)]
