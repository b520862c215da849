"""Hugging Face ``generate()`` and a manual decode loop under ``cache="symbolic values"``.

Tiny random decoders (1 layer, hidden 32, vocab 128, sdpa attention, float32 CPU, seed 0), 3 new
tokens, prompts of several lengths in batches of 1, 2 and 3 in one process, with
``model.forward = thunder.jit(model.forward, cache="symbolic values")``. Each test asserts eager's
tokens, eager's cache field by field after every call, and the compile bound: one prefill entry
and one decode entry per cache kind for every prompt length, batch size and step, since the
prompt length, the cache length and the batch are symbolic and the batch of 1 shares its entries
(metatrace.proxies.size_oblivious). A compile takes 10-20 s on a shared 2-core machine.
"""

from __future__ import annotations

import logging
import os

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
CALLS = ((3, 1), (5, 2), (2, 3), (6, 1), (4, 3))  # five lengths, each batch 1, 2 and 3
VOCAB = 128


def prompt(length: int, batch: int, seed: int) -> torch.Tensor:
    return torch.randint(1, VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))


def greedy(model, ids, **kwargs):
    return model.generate(ids, max_new_tokens=NEW_TOKENS, do_sample=False, attention_mask=torch.ones_like(ids),
                          pad_token_id=0, **kwargs)


def assert_same_state(got, want, where: str) -> None:
    """Equal as eager's, generically: tensors by value, dtype, device and shape; containers item
    by item; objects attribute by attribute (``vars()``); anything else by type and ``==`` (a
    symbolic number left behind, an int where eager has a tensor, fails here)."""
    assert type(got) is type(want), f"{where}: {type(got).__name__} where eager has {type(want).__name__}"
    if isinstance(want, torch.Tensor):
        torch.testing.assert_close(got, want, msg=lambda m: f"{where}: {m}")
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same_state(g, w, f"{where}[{i}]")
    elif isinstance(want, dict):
        assert got.keys() == want.keys(), where
        for k in want:
            assert_same_state(got[k], want[k], f"{where}[{k!r}]")
    elif hasattr(want, "__dict__") and not isinstance(want, type):
        assert_same_state(vars(got), vars(want), where)
    else:
        assert got == want, f"{where}: {got!r} where eager has {want!r}"


def assert_caches_equal(got, want) -> None:
    """Every attribute of the cache and of every layer (keys, values, dtype, device,
    is_initialized, max_batch_size, max_cache_len, cumulative_length, ...) as eager's."""
    assert type(got) is type(want) and len(got.layers) == len(want.layers)
    for i, (g, w) in enumerate(zip(got.layers, want.layers)):
        assert_same_state(vars(g), vars(w), f"layers[{i}]")
    assert_same_state({k: v for k, v in vars(got).items() if k != "layers"},
                      {k: v for k, v in vars(want).items() if k != "layers"}, "cache")


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
    model, eager = family("llama")
    jitted = thunder.jit(model.forward, cache=SYMBOLIC)
    for seed, (length, batch) in enumerate(CALLS):
        ids = prompt(length, batch, seed)
        got, got_cache = decode(jitted, ids)
        want, want_cache = decode(eager, ids)
        assert torch.equal(got, want)
        assert_caches_equal(got_cache, want_cache)
    assert thunder.cache_misses(jitted) == 2


def test_generate_on_a_jitted_module_runs_the_compiled_forward(enabled):
    model, eager = family("llama")
    jm = thunder.jit(model, cache=SYMBOLIC)
    for seed, (length, batch) in enumerate(PROMPTS[:2]):
        ids = prompt(length, batch, seed)
        assert torch.equal(greedy(jm, ids), greedy(eager, ids))
    assert thunder.cache_misses(jm) == 2
    assert thunder.cache_hits(jm) == 2 * NEW_TOKENS - 2  # every forward of generate went through jm
    assert "forward" not in vars(model)  # the redirection is lifted after the call


# Every decoder family of the lock's transformers that tests/models/test_hf_models.py runs, tiny
# (1 layer, hidden 32, vocab 128): their attention, rotary and cache code differ from Llama's
# (Mistral's and Qwen2's sliding-window layers, GPT-2's own attention, Gemma's scaled embedding).
FAMILY_CONFIGS = {
    "llama": lambda: transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64),
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


def family(name: str):
    torch.manual_seed(0)
    config = FAMILY_CONFIGS[name]()
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    eager = transformers.AutoModelForCausalLM.from_config(config).eval()
    eager.load_state_dict(model.state_dict())
    return model, eager


def generate_both(model, eager, ids, cache: str, sample: bool, seed: int):
    """generate() on the jitted model and on eager with the same cache kind, seed and prompt:
    (tokens, the cache after the call) for each. ``user static``/``user dynamic``: the user builds
    the cache and passes it in; ``static``: generate builds (and reuses) its StaticCache."""
    results = []
    for m in (model, eager):
        kwargs = {"cache_implementation": "static"} if cache == "static" else {}
        if cache == "user static":
            kwargs["past_key_values"] = transformers.StaticCache(config=m.config, max_cache_len=ids.shape[1] + NEW_TOKENS + 2)
        elif cache == "user dynamic":
            kwargs["past_key_values"] = transformers.DynamicCache(config=m.config)
        torch.manual_seed(seed)
        out = m.generate(ids, max_new_tokens=NEW_TOKENS, do_sample=sample, pad_token_id=0, return_dict_in_generate=True,
                         attention_mask=torch.ones_like(ids), **kwargs)
        results.append((out.sequences, kwargs.get("past_key_values", out.past_key_values)))
    return results


# The default run takes one family per attention and position scheme (the suite's time budget):
# Mistral and Qwen2 run Llama's code with other configs (training: tests/models/test_hf_models.py);
# METATRACE_ALL_FAMILIES=1 runs every family above.
GENERATED = sorted(FAMILY_CONFIGS) if os.environ.get("METATRACE_ALL_FAMILIES") else ("gemma", "gpt2", "llama", "phi3")


@pytest.fixture(scope="module")
def built() -> dict[str, tuple]:
    """family -> (model, eager twin), every family of the generate tests built before the first of
    them compiles: constructing a model registers its class in transformers'
    ``_CAN_RECORD_REGISTRY``, a dict the traces read (and the prologue checks whole), so a family
    built after another's compile would make that family's entries miss. Llama's model stays, its
    forward jitted, for the one-token test (its default-cache entries are the ones it extends)."""
    return {name: family(name) for name in GENERATED}


def jitted_family(built: dict, name: str):
    """The family's model with ``model.forward`` jitted (once per module) and its eager twin."""
    model, eager = built[name] if name in built else family(name)
    if not hasattr(model.forward, "_lc_cs"):  # (thunder.jit's function carries its cache state)
        model.forward = thunder.jit(model.forward, cache=SYMBOLIC)
    if name != "llama":  # (only Llama's is used again: a larger heap slows later compiles)
        built.pop(name, None)
    return model, eager


@pytest.mark.parametrize("name", GENERATED)
def test_generate_of_each_family_equals_eager_with_every_cache_in_two_compiles_per_cache_kind(enabled, built, name,
                                                                                              caplog):
    """One jitted forward per family for every call: the default DynamicCache, a DynamicCache the
    user passes, cache_implementation="static" and a StaticCache the user builds, prompts of four
    lengths in batches of 1, 2 and 3, greedy and sampled. After every call: eager's tokens and a
    cache equal to eager's field by field. A DynamicCache and a StaticCache run different Python
    (torch.cat against index_copy_, a mask as long as the cache), so each kind has its own
    prefill and decode entry: 2 compiles for the dynamic kind, 2 more for the static kind, whatever
    the lengths, batches and steps."""
    model, eager = jitted_family(built, name)
    seed = 0
    for kinds in (("default", "user dynamic"), ("static", "user static")):
        before = thunder.cache_misses(model.forward)
        for i, (length, batch) in enumerate(CALLS):
            cache, sample = kinds[i % 2], i == len(CALLS) - 1
            ids = prompt(length, batch, seed)
            with caplog.at_level(logging.INFO, logger="metatrace.recompiles"):
                (got, got_cache), (want, want_cache) = generate_both(model, eager, ids, cache, sample, seed)
            assert torch.equal(got, want), f"{cache} cache, prompt {length}, batch {batch}"
            assert_caches_equal(got_cache, want_cache)
            seed += 1
        assert thunder.cache_misses(model.forward) - before == 2, kinds
    # METATRACE_LOG=recompiles explains every miss after the first compile: the guard or the
    # check of thunder's prologue that rejected each entry (a decode step's initialized cache,
    # the static cache's 4-d mask), never an unexplained rejection
    misses = [r.getMessage() for r in caplog.records if r.name == "metatrace.recompiles"]
    assert len(misses) == 3
    reasons = [line for m in misses for line in m.splitlines()[1:]]
    assert all("guard failed" in line or "prologue check" in line for line in reasons), reasons


def test_a_one_token_prompt_adds_its_own_prefill_entry_and_reuses_the_decode_entry(enabled, built, caplog):
    """A prompt of 1 token takes another path in transformers' own code: sdpa_attention_forward's
    ``is_causal = query.shape[2] > 1 and ...`` (and masking_utils' ``query_length == 1 or
    kv_length == query_length``) decide on the prompt length, and a trace records one outcome, so
    the prefill of 1 token is an entry of its own (torch.compile specializes a size of 1 too).
    Its decode steps, whose cache holds 1 token, reuse the decode entry of longer prompts (cat's
    meta guarded the cached length != 1 there) and the batch of 2 reuses batch 1's entries.
    (Llama's forward as the generate test above left it, whose entry 0 is its default-cache
    prefill too; run alone, the first prompt of 4 tokens compiles that prefill and decode.)"""
    model, eager = jitted_family(built, "llama")
    added, logged = [], []  # per prompt: the compiles it added, and the recompile log it wrote
    for seed, (length, batch) in enumerate(((4, 1), (1, 1), (1, 2), (5, 2))):
        ids = prompt(length, batch, seed)
        before = thunder.cache_misses(model.forward)
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="metatrace.recompiles"):
            (got, got_cache), (want, want_cache) = generate_both(model, eager, ids, "default", False, seed)
        assert torch.equal(got, want), f"prompt {length}, batch {batch}"
        assert_caches_equal(got_cache, want_cache)
        added.append(thunder.cache_misses(model.forward) - before)
        logged.append([r.getMessage() for r in caplog.records if r.name == "metatrace.recompiles"])
    # the prompt of 1 token adds one entry (its prefill: its decode steps hit); the batch of 2 and
    # a longer prompt add none
    assert added[1:] == [1, 0, 0], added
    # its one miss is logged, and says the prefill entry's guard on the prompt length failed
    assert len(logged[1]) == 1, logged[1]
    assert "entry 0: guard failed" in logged[1][0]
