"""One process of tests/entry_cache/test_warm_start.py: the models users train and serve, jitted
under symbolic values with the entry cache on, over several lengths; writes what each run returned
(outputs, gradients, generated tokens) and its compile and load counts to the pickle file named by
its argument. The test runs it twice with one cache directory: a cold process, then a warm one.

    METATRACE_ENTRY_CACHE=1 METATRACE_ENTRY_CACHE_DIR=<dir> python warm_start_driver.py OUT.pkl
"""

from __future__ import annotations

import pickle
import sys
import warnings
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(TESTS))
warnings.filterwarnings("ignore")

import torch  # noqa: E402
import thunder  # noqa: E402

import metatrace  # noqa: E402
from metatrace.entry_cache import entry_cache_stats  # noqa: E402

SYMBOLIC = "symbolic values"
HF_LENGTHS = (8, 12, 16, 24, 32)
PROMPT_LENGTHS = (4, 6, 9)
NEW_TOKENS = 3


def _numpy(tree):
    """Tensors as numpy arrays (a pickled tensor is bitwise what it was, but numpy is plainer)."""
    if isinstance(tree, torch.Tensor):
        return tree.detach().numpy().copy()
    if isinstance(tree, dict):
        return {k: _numpy(v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return [_numpy(v) for v in tree]
    return tree


def litgpt(config: str):
    from litgpt_workloads import TRAINING_LENGTHS, build, training_input, training_step

    model = build(config)
    jm = thunder.jit(model, cache=SYMBOLIC)
    return jm, [training_step(jm, model, training_input(model, T)) for T in TRAINING_LENGTHS]


def hf_llama():
    import transformers

    from hf_workloads import configs

    name, config = configs()["llama"]
    torch.manual_seed(0)
    model = getattr(transformers, name)(config)
    jm = thunder.jit(model, cache=SYMBOLIC)
    steps = []
    for T in HF_LENGTHS:
        ids = torch.randint(0, config.vocab_size, (2, T), generator=torch.Generator().manual_seed(T))
        out = jm(ids, labels=ids)
        out.loss.backward()
        steps.append((out.loss, {n: p.grad.clone() for n, p in model.named_parameters()}))
        model.zero_grad()
    return jm, steps


def hf_generate():
    import transformers

    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    jm = thunder.jit(model, cache=SYMBOLIC)
    tokens = []
    for seed, length in enumerate(PROMPT_LENGTHS):
        ids = torch.randint(0, 128, (1, length), generator=torch.Generator().manual_seed(seed))
        tokens.append(jm.generate(ids, max_new_tokens=NEW_TOKENS, do_sample=False, attention_mask=torch.ones_like(ids),
                                  pad_token_id=0))
    return jm, tokens


def _gelu_head(x, w):
    return torch.nn.functional.gelu(x @ w).sum(-1)


def fusion_regions():
    """A torch_compile_ex entry: its fusion regions are stored as their traces' text and compiled
    again by torch.compile in the loading process."""
    from thunder.executors.torch_compile import torch_compile_ex

    jf = thunder.jit(_gelu_head, cache=SYMBOLIC, executors=[torch_compile_ex, *thunder.get_default_executors()])
    w = torch.randn(8, 4, generator=torch.Generator().manual_seed(0), requires_grad=True)
    steps = []
    for T in (3, 5, 7):
        x = torch.randn(T, 8, generator=torch.Generator().manual_seed(T))
        out = jf(x, w)
        out.sum().backward()
        steps.append((out, w.grad.clone()))
        w.grad = None
    return jf, steps


WORKLOADS = {
    "litgpt llama2-like training": lambda: litgpt("llama2-like"),
    "HF Llama training": hf_llama,
    "HF generate (DynamicCache)": hf_generate,
    "litgpt MoE training": lambda: litgpt("mixtral-like"),
    "torch_compile_ex fusion regions": fusion_regions,
}


def main(out: str) -> None:
    metatrace.enable()
    report = {}
    for name, run in WORKLOADS.items():
        jm, results = run()
        stats = entry_cache_stats(jm)
        report[name] = {"results": _numpy(results), "compiles": thunder.cache_misses(jm), "loaded": stats.loaded,
                        "stored": stats.stored, "kept_local": list(stats.kept_local)}
    with open(out, "wb") as f:
        pickle.dump(report, f)


if __name__ == "__main__":
    main(sys.argv[1])
