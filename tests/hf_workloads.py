"""Hugging Face transformers models shared by tests/models/test_hf_models.py and tools/bench.py (gpt2-train).

Two config shapes per family. ``"tiny"``: tiny random configs (1 layer, hidden 40 (head sizes 10 and 20: a head size equal to a sequence
length adds a broadcast guard, a second compile), vocab 100, eager attention, no dropout, float32
CPU, fixed seed) of GPT-2, Llama, Mistral, Qwen2, Phi-3, Gemma and BERT (masked LM); batches of
``BATCH`` token ids over ``LENGTHS``. ``"user"``: as a user writes a small config (2 layers,
hidden 64, 4 heads, 2 kv heads, intermediate 128, vocab 256, the default attention
implementation, ``use_cache=False``: a returned ``DynamicCache`` is an object thunder cannot
return), dropout 0 so that a training step compares with eager; built with ``AutoModelFor*.from_config``.

transformers 5's ``capture_outputs`` switches its output collector to a global attribute when
``torch.compiler.is_compiling()``, which thunder answers True; thunder cannot replay that
attribute store (a dict on a plain object) in its epilogue, so ``plain_output_collector`` gives
the collector a plain ``ContextVar`` (what transformers uses outside compilation) while it is
active. Stock thunder needs it (tools/bench.py's stock side); metatrace does not
(``metatrace.interpret.reads.library_state`` keeps the collector's state as in eager).
"""

from __future__ import annotations

import contextlib
import contextvars

import torch

LENGTHS = (8, 12, 16, 24, 32)
BATCH = 2
VOCAB = 100

FAMILIES = ("gpt2", "llama", "mistral", "qwen2", "phi3", "gemma", "bert")
SHAPES = ("tiny", "user")
USER_VOCAB = 256
USER_LENGTHS = (8, 12, 20)

_COMMON = dict(vocab_size=VOCAB, num_hidden_layers=1, max_position_embeddings=64, use_cache=False)
_DECODER = dict(_COMMON, hidden_size=40, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2)


def configs():
    """Family name -> (model class name in transformers, config)."""
    from transformers import (
        BertConfig,
        GemmaConfig,
        GPT2Config,
        LlamaConfig,
        MistralConfig,
        Phi3Config,
        Qwen2Config,
    )

    return {
        "gpt2": (
            "GPT2LMHeadModel",
            GPT2Config(vocab_size=VOCAB, n_layer=1, n_embd=40, n_head=2, n_positions=64, use_cache=False,
                       resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0),
        ),
        "llama": ("LlamaForCausalLM", LlamaConfig(**_DECODER)),
        "mistral": ("MistralForCausalLM", MistralConfig(**_DECODER, sliding_window=None)),
        "qwen2": ("Qwen2ForCausalLM", Qwen2Config(**_DECODER)),
        "phi3": ("Phi3ForCausalLM", Phi3Config(**_DECODER, pad_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0)),
        "gemma": ("GemmaForCausalLM", GemmaConfig(**_DECODER, head_dim=10, pad_token_id=0)),
        "bert": (
            "BertForMaskedLM",
            BertConfig(vocab_size=VOCAB, hidden_size=40, num_hidden_layers=1, num_attention_heads=2,
                       intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.0,
                       attention_probs_dropout_prob=0.0, pad_token_id=0),
        ),
    }


_USER = dict(vocab_size=USER_VOCAB, num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=128, use_cache=False)


def user_configs():
    """Family name -> (model class name, config) as a user writes them (see the module docstring)."""
    from transformers import AutoConfig

    def auto(model_type, **kwargs):
        return AutoConfig.for_model(model_type, **kwargs)

    return {
        "gpt2": ("GPT2LMHeadModel", auto("gpt2", vocab_size=USER_VOCAB, n_layer=2, n_embd=64, n_head=4, use_cache=False,
                                         resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)),
        "llama": ("LlamaForCausalLM", auto("llama", **_USER)),
        "mistral": ("MistralForCausalLM", auto("mistral", **_USER)),
        "qwen2": ("Qwen2ForCausalLM", auto("qwen2", **_USER)),
        "phi3": ("Phi3ForCausalLM", auto("phi3", **_USER, pad_token_id=0)),
        "gemma": ("GemmaForCausalLM", auto("gemma", **_USER, head_dim=16, pad_token_id=0)),
        "bert": ("BertForMaskedLM", auto("bert", vocab_size=USER_VOCAB, num_hidden_layers=2, hidden_size=64,
                                         num_attention_heads=4, intermediate_size=128, hidden_dropout_prob=0.0,
                                         attention_probs_dropout_prob=0.0)),
    }


def build(name: str, shape: str = "tiny"):
    """The family's model of ``shape`` (see the module docstring), float32, eval mode, seed 0."""
    import transformers

    torch.manual_seed(0)
    if shape == "user":
        cls_name, config = user_configs()[name]
        auto = transformers.AutoModelForMaskedLM if name == "bert" else transformers.AutoModelForCausalLM
        model = auto.from_config(config)
        assert type(model).__name__ == cls_name, type(model)
        return model.eval()
    cls_name, config = configs()[name]
    config._attn_implementation = "eager"
    return getattr(transformers, cls_name)(config).to(torch.float32).eval()


def ids(T: int, seed: int, vocab: int = VOCAB) -> torch.Tensor:
    """A (BATCH, T) batch of token ids (1..vocab-1) from ``seed``."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(1, vocab, (BATCH, T), generator=g)


@contextlib.contextmanager
def plain_output_collector():
    """transformers' output collector as a plain ContextVar while active (see the module docstring)."""
    from transformers.utils import output_capturing

    saved = output_capturing._active_collector
    output_capturing._active_collector = contextvars.ContextVar("output_collector", default=None)
    try:
        yield
    finally:
        output_capturing._active_collector = saved
