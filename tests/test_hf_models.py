"""Hugging Face transformers models under ``cache="symbolic values"`` with metatrace.

The tiny random configs of tests/hf_workloads.py (1 layer, hidden 40, vocab 100, eager
attention, no dropout, float32 CPU, fixed seed) of GPT-2, Llama, Mistral, Qwen2, Phi-3, Gemma
and BERT (masked LM), over sequence lengths 8, 12, 16, 24, 32, each with one jitted model per
family (module-scoped fixture):

- eval (``torch.no_grad()``): logits equal eager at every length;
- training step (``loss = logits.sum()``): loss and every parameter gradient equal eager;
- compiles (``thunder.cache_misses``) for each phase, asserted exactly as measured (at most 2);
- both trace checkers (``metatrace.check_trace``: metatrace's strict one and thunder's own) on the
  last computation trace, and on the last backward trace after training;
- ``metatrace.explain`` names every guard by its source: no thunder proxy name (``i84``,
  ``f341``, ``s413``, ``t12``) in its text.

Needs ``transformers`` (pinned in requirements.lock with ``regex`` and ``tokenizers==0.22.2``;
skipped when it does not import, e.g. beside a newer tokenizers, see the lock's header). The
module's fixture gives transformers' output collector a plain ``ContextVar``
(``hf_workloads.plain_output_collector``: thunder cannot replay the global attribute store
transformers 5 uses while compiling).
"""

from __future__ import annotations

import re

import pytest
import torch

import thunder

import metatrace

# ImportError too: transformers 5.3 refuses to import beside tokenizers newer than 0.23.0 (its
# import-time version check); requirements.lock pins tokenizers==0.22.2 for that reason.
transformers = pytest.importorskip(
    "transformers", exc_type=ImportError,
    reason="transformers not importable: install requirements.lock's transformers, regex and tokenizers pins",
)
from hf_workloads import FAMILIES, LENGTHS  # noqa: E402
from hf_workloads import build, plain_output_collector  # noqa: E402
from hf_workloads import ids as make_ids  # noqa: E402

pytestmark = pytest.mark.slow

# thunder's proxy names: a letter then digits (i84, f341, s413, t12), as a whole word
PROXY_NAME = re.compile(r"(?<![\w.'\"])[a-z]\d+\b")

# thunder.cache_misses after all lengths, measured: (eval, eval + training)
EXPECTED_COMPILES = {name: (1, 2) for name in FAMILIES}


@pytest.fixture(scope="module")
def hf_enabled():
    with plain_output_collector(), metatrace.enable():
        yield


class Family:
    def __init__(self, name):
        self.name = name
        self.model = build(name)
        self.jm = thunder.jit(self.model, cache="symbolic values")
        self.eval_misses = []
        self.train_misses = []


@pytest.fixture(scope="module")
def families(hf_enabled):
    return {}


@pytest.fixture
def family(families, request):
    name = request.param
    if name not in families:
        families[name] = Family(name)
    return families[name]


def _check_traces(jm, backward: bool = False):
    """Both checkers on the last computation trace, and on the last backward trace after training
    (GPT-2's: a size of the attention projection's split, renamed in the backward's reshape to a
    name only the forward's split defined, failed the strict checker)."""
    metatrace.check_trace(thunder.last_traces(jm)[-1])
    if backward:
        metatrace.check_trace(thunder.last_backward_traces(jm)[-1])


def _explain_text(jm) -> str:
    return "\n".join(g for entry in metatrace.explain(jm) for g in entry.guards)


@pytest.mark.parametrize("family", FAMILIES, indirect=True)
def test_eval_over_lengths(family):
    model, jm = family.model, family.jm
    for i, T in enumerate(LENGTHS):
        ids = make_ids(T, i)
        with torch.no_grad():
            expected = model(input_ids=ids).logits
            actual = jm(input_ids=ids).logits
        family.eval_misses.append((T, thunder.cache_misses(jm)))
        torch.testing.assert_close(actual, expected, msg=lambda m: f"{family.name} T={T}: {m}")
    _check_traces(jm)
    misses = thunder.cache_misses(jm)
    assert misses <= 2, family.eval_misses
    assert misses == EXPECTED_COMPILES[family.name][0], family.eval_misses


@pytest.mark.parametrize("family", FAMILIES, indirect=True)
def test_training_step_over_lengths(family):
    model, jm = family.model, family.jm
    before = thunder.cache_misses(jm)
    params = [p for p in model.parameters() if p.requires_grad]
    for i, T in enumerate(LENGTHS):
        ids = make_ids(T, 100 + i)
        expected_loss = model(input_ids=ids).logits.sum()
        expected_grads = torch.autograd.grad(expected_loss, params, allow_unused=True)
        loss = jm(input_ids=ids).logits.sum()
        grads = torch.autograd.grad(loss, params, allow_unused=True)
        family.train_misses.append((T, thunder.cache_misses(jm)))
        torch.testing.assert_close(loss, expected_loss, msg=lambda m: f"{family.name} T={T} loss: {m}")
        for (pname, _), g, e in zip(model.named_parameters(), grads, expected_grads):
            assert (g is None) == (e is None), f"{family.name} T={T}: {pname} has a gradient in one only"
            if e is not None:
                torch.testing.assert_close(g, e, msg=lambda m: f"{family.name} T={T} grad {pname}: {m}")
    _check_traces(jm, backward=True)
    misses = thunder.cache_misses(jm) - before
    assert misses <= 2, family.train_misses
    assert thunder.cache_misses(jm) == EXPECTED_COMPILES[family.name][1], family.train_misses


@pytest.mark.parametrize("family", FAMILIES, indirect=True)
def test_explain_names_guards_by_source(family):
    if not thunder.cache_misses(family.jm):
        pytest.skip("the eval and training tests compile this model")
    text = _explain_text(family.jm)
    names = sorted(set(PROXY_NAME.findall(text)))
    assert not names, f"{family.name}: proxy names in explain(): {names}\n" + "\n".join(
        line for line in text.splitlines() if PROXY_NAME.search(line)
    )
