"""``python -m metatrace report --model SPEC``: run a model over several lengths, list every pin.

A pin is a guard that fixes an input size or input number to one value (``idx.shape[1] == 8``):
the entry cannot serve another value, so the model recompiles for it. Every pin says what fixed
it (``(float() at model.py:12 in forward)``, ``(input of fallback prim PAD at ...)``); this report
collects them per cache entry, with the compile count, so a user can see which line of which
model keeps one entry from serving every length.

SPEC is ``litgpt:<config>`` (thunder's litgpt testing configs, 2 layers), ``litgpt.lora:<config>``
(LoRA on query, value and projection, only LoRA weights trainable) or ``<module>:<function>``,
a function returning ``(model, make_input)`` with ``make_input(T)`` the arguments for length T.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass

import torch

# an argument or one of its sizes fixed to one value: ``idx.shape[1] == 8``, ``n == 3 (...)``
_PIN = re.compile(r"^(?!self\b|len\()([A-Za-z_]\w*)(\.shape\[\d+\])? == ")


@dataclass(frozen=True)
class ModelReport:
    compiles: int
    lengths: tuple[int, ...]
    pins: list[tuple[int, str]]  # (cache entry, guard text)

    def __str__(self) -> str:
        lines = [f"{self.compiles} compile(s) for lengths {', '.join(map(str, self.lengths))}"]
        if not self.pins:
            lines.append("no pins: every entry serves any length its relational guards admit")
        for entry, text in self.pins:
            lines.append(f"  entry {entry}: {text}")
        return "\n".join(lines)


def pins(jitted_fn) -> list[tuple[int, str]]:
    """Every pin of every cache entry of ``jitted_fn``: (entry index, guard text with its reason)."""
    from metatrace.guards.explain import explain

    return [(entry.index, text) for entry in explain(jitted_fn) for text in entry.guards
            if _PIN.match(text) and not text.endswith("(read by the trace)")]  # (a global's value check)


def _litgpt(config: str, lora: bool = False):
    if lora:
        import litgpt.lora as lora_module

        cfg = lora_module.Config.from_name(config, n_layer=2, block_size=128, lora_r=4, lora_alpha=8,
                                           lora_query=True, lora_value=True, lora_projection=True)
        model = lora_module.GPT(cfg)
        lora_module.mark_only_lora_as_trainable(model)
    else:
        from thunder.tests.litgpt_model import GPT, Config

        cfg = Config.from_name(config, n_layer=2, block_size=128)
        model = GPT(cfg)
    vocab = cfg.padded_vocab_size
    return model, lambda T: (torch.randint(0, vocab, (2, T), generator=torch.Generator().manual_seed(T)),)


def build(spec: str):
    """(model, make_input) for SPEC (see the module docstring)."""
    kind, _, name = spec.partition(":")
    if not name:
        raise ValueError(f"--model wants KIND:NAME (litgpt:llama2-like, litgpt.lora:pythia-14m, pkg.mod:fn), got {spec!r}")
    torch.manual_seed(0)
    if kind == "litgpt":
        return _litgpt(name)
    if kind == "litgpt.lora":
        return _litgpt(name, lora=True)
    return getattr(importlib.import_module(kind), name)()


def run(spec: str, lengths: tuple[int, ...] = (8, 12, 16, 24), train: bool = True) -> ModelReport:
    """Runs SPEC's model under metatrace (a training step per length when ``train``) and reports
    its compiles and pins."""
    import thunder

    import metatrace

    model, make_input = build(spec)
    with metatrace.enable():
        jitted = thunder.jit(model, cache="symbolic values")
        for T in lengths:
            if train:
                out = jitted(*make_input(T))
                (out if isinstance(out, torch.Tensor) else out[0]).sum().backward()
            else:
                with torch.no_grad():
                    jitted(*make_input(T))
        return ModelReport(thunder.cache_misses(jitted), tuple(lengths), pins(jitted))
