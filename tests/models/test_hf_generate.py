"""Hugging Face ``generate()`` and a manual decode loop under ``cache="symbolic values"``.

A tiny random Llama (1 layer, hidden 32, vocab 128, sdpa attention, float32 CPU, seed 0), greedy
decoding of 3 new tokens, prompts of 2 lengths in batches of 1 and 2 in one process. Each test
asserts eager's tokens and the compile bound the issue sets: one prefill entry and one decode
entry (``thunder.cache_misses == 2``) for every prompt length and batch size, since the prompt
length, the cache length and the batch are symbolic and the batch of 1 shares its entries
(metatrace.proxies.size_oblivious). Each jitted function compiles twice, 15-20 s each on a
shared 2-core machine.
"""

from __future__ import annotations

import pytest
import torch

import thunder

transformers = pytest.importorskip(
    "transformers", exc_type=ImportError,
    reason="transformers not importable: install requirements.lock's transformers, regex and tokenizers pins",
)

pytestmark = pytest.mark.slow

SYMBOLIC = "symbolic values"
NEW_TOKENS = 3
PROMPTS = ((5, 1), (7, 2), (6, 1), (4, 2))  # (length, batch): 2+ lengths at each batch size
VOCAB = 128


def tiny_llama():
    config = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    eager = transformers.AutoModelForCausalLM.from_config(config).eval()
    eager.load_state_dict(model.state_dict())
    return model, eager


def prompt(length: int, batch: int, seed: int) -> torch.Tensor:
    return torch.randint(1, VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))


def greedy(model, ids, **kwargs):
    return model.generate(ids, max_new_tokens=NEW_TOKENS, do_sample=False, attention_mask=torch.ones_like(ids),
                          pad_token_id=0, **kwargs)


def assert_caches_equal(got, want) -> None:
    assert type(got) is type(want) and len(got.layers) == len(want.layers)
    for g, w in zip(got.layers, want.layers):
        torch.testing.assert_close(g.keys, w.keys)
        torch.testing.assert_close(g.values, w.values)


def test_generate_with_a_jitted_forward_equals_eager_in_two_compiles(enabled):
    model, eager = tiny_llama()
    model.forward = thunder.jit(model.forward, cache=SYMBOLIC)
    for seed, (length, batch) in enumerate(PROMPTS):
        ids = prompt(length, batch, seed)
        if batch == 1:  # the default cache, made by generate
            assert torch.equal(greedy(model, ids), greedy(eager, ids))
            continue
        # a cache the user made: after the call it holds what eager's holds
        got_cache = transformers.DynamicCache(config=model.config)
        want_cache = transformers.DynamicCache(config=model.config)
        assert torch.equal(greedy(model, ids, past_key_values=got_cache), greedy(eager, ids, past_key_values=want_cache))
        assert_caches_equal(got_cache, want_cache)
    assert thunder.cache_misses(model.forward) == 2


def test_generate_with_the_static_cache_equals_eager_in_two_compiles(enabled):
    model, eager = tiny_llama()
    model.forward = thunder.jit(model.forward, cache=SYMBOLIC)
    for seed, (length, batch) in enumerate(PROMPTS[:3]):
        ids = prompt(length, batch, seed)
        assert torch.equal(greedy(model, ids, cache_implementation="static"),
                           greedy(eager, ids, cache_implementation="static"))
    assert thunder.cache_misses(model.forward) == 2


def decode(forward, ids):
    """A manual greedy loop: no cache at first, then the cache the previous step returned."""
    past, token, out = None, ids, ids
    with torch.no_grad():
        for _ in range(NEW_TOKENS):
            output = forward(input_ids=token, past_key_values=past, use_cache=True)
            past, token = output.past_key_values, output.logits[:, -1:].argmax(-1)
            out = torch.cat([out, token], 1)
    return out, past


def test_a_manual_decode_loop_gets_the_cache_the_trace_created(enabled):
    model, eager = tiny_llama()
    jitted = thunder.jit(model.forward, cache=SYMBOLIC)
    for seed, (length, batch) in enumerate(PROMPTS[:2]):
        ids = prompt(length, batch, seed)
        got, got_cache = decode(jitted, ids)
        want, want_cache = decode(eager, ids)
        assert torch.equal(got, want)
        assert_caches_equal(got_cache, want_cache)
    assert thunder.cache_misses(jitted) == 2


def test_generate_on_a_jitted_module_runs_the_compiled_forward(enabled):
    model, eager = tiny_llama()
    jm = thunder.jit(model, cache=SYMBOLIC)
    for seed, (length, batch) in enumerate(PROMPTS[:2]):
        ids = prompt(length, batch, seed)
        assert torch.equal(greedy(jm, ids), greedy(eager, ids))
    assert thunder.cache_misses(jm) == 2
    assert thunder.cache_hits(jm) == 2 * NEW_TOKENS - 2  # every forward of generate went through jm
    assert "forward" not in vars(model)  # the redirection is lifted after the call


# Every other decoder family of the lock's transformers that tests/models/test_hf_models.py runs,
# tiny (1 layer, hidden 32, vocab 128): their attention, rotary and cache code differ from Llama's.
FAMILY_CONFIGS = {
    "gpt2": lambda: transformers.GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=1, n_head=4, n_positions=64),
    "mistral": lambda: transformers.MistralConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                                                  num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
                                                  max_position_embeddings=64),
    "qwen2": lambda: transformers.Qwen2Config(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64),
    "phi3": lambda: transformers.Phi3Config(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                            pad_token_id=0),
    "gemma": lambda: transformers.GemmaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                              num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                                              max_position_embeddings=64),
}


@pytest.mark.parametrize("family", sorted(FAMILY_CONFIGS))
def test_generate_of_each_family_equals_eager_in_two_compiles(enabled, family):
    """Greedy and sampled decoding (the same seed for both sides) over prompt lengths 5, 9, 4 in
    batches of 1, 3 and 2: eager's tokens, one prefill and one decode entry."""
    config = FAMILY_CONFIGS[family]()
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    eager = transformers.AutoModelForCausalLM.from_config(config).eval()
    eager.load_state_dict(model.state_dict())
    model.forward = thunder.jit(model.forward, cache=SYMBOLIC)
    for seed, (length, batch, sample) in enumerate(((5, 1, False), (9, 3, False), (4, 2, True))):
        ids = prompt(length, batch, seed)
        outputs = []
        for m in (model, eager):
            torch.manual_seed(seed)
            outputs.append(m.generate(ids, max_new_tokens=NEW_TOKENS, do_sample=sample, pad_token_id=0,
                                      attention_mask=torch.ones_like(ids)))
        torch.testing.assert_close(outputs[0], outputs[1])
    assert thunder.cache_misses(model.forward) == 2
