"""Hugging Face transformers models under ``cache="symbolic values"`` with metatrace.

Two config shapes of tests/hf_workloads.py for GPT-2, Llama, Mistral, Qwen2, Phi-3, Gemma and
BERT (masked LM): ``tiny`` (1 layer, hidden 40, vocab 100, eager attention, over sequence lengths
8, 12, 16, 24, 32) and ``user`` (as a user writes it: ``AutoConfig.for_model``,
``AutoModelFor*.from_config``, 2 layers, hidden 64, the default attention implementation (sdpa),
``model.eval()`` then ``model.train()``, over 8, 12, 20); no dropout, float32 CPU, fixed seed;
one jitted model per family and shape (module-scoped fixture), nothing patched in transformers
(its output collector used to need a plain ContextVar: metatrace.interpret.reads.library_state):

- eval (``torch.no_grad()``): logits equal eager at every length;
- training step (``loss = logits.sum()``): loss and every parameter gradient equal eager;
- compiles (``thunder.cache_misses``) for each phase, asserted exactly as measured (one each, in
  either order);
- both trace checkers (``metatrace.check_trace``: metatrace's strict one and thunder's own) on the
  last computation trace, and on the last backward trace after training;
- ``metatrace.explain`` names every guard by its source: no thunder proxy name (``i84``,
  ``f341``, ``s413``, ``t12``) in its text.

Needs ``transformers`` (pinned in requirements.lock with ``regex`` and ``tokenizers==0.22.2``;
skipped when it does not import, e.g. beside a newer tokenizers, see the lock's header).
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
from hf_workloads import FAMILIES, LENGTHS, SHAPES, USER_LENGTHS, USER_VOCAB  # noqa: E402
from hf_workloads import build  # noqa: E402
from hf_workloads import VOCAB as hf_vocab  # noqa: E402
from hf_workloads import ids as make_ids  # noqa: E402

pytestmark = pytest.mark.slow

# thunder's proxy names: a letter then digits (i84, f341, s413, t12), as a whole word
PROXY_NAME = re.compile(r"(?<![\w.'\"])[a-z]\d+\b")

# compiles over all lengths, measured: (eval, training: the grad mode differs, so its own entry),
# whichever test runs first. GPT-2's user shape has head size 16, and T=16 is not among
# USER_LENGTHS: no broadcast guard.
EXPECTED_COMPILES = {(name, "tiny"): (1, 1) for name in FAMILIES} | {(name, "user"): (1, 1) for name in FAMILIES}

CASES = [(name, shape) for shape in SHAPES for name in FAMILIES]
CASE_IDS = [f"{name}-{shape}" for name, shape in CASES]


class Family:
    def __init__(self, name, shape):
        self.name = f"{name}-{shape}"
        self.key = (name, shape)
        self.shape = shape
        self.model = build(name, shape)
        self.jm = thunder.jit(self.model, cache="symbolic values")
        self.lengths = LENGTHS if shape == "tiny" else USER_LENGTHS
        self.vocab = USER_VOCAB if shape == "user" else hf_vocab
        self.eval_misses = []
        self.train_misses = []
        # float32 sums over 2 layers of hidden 64 in another order (GPT-2's tied embedding: 2e-5)
        self.grad_tolerance = dict(atol=1e-4, rtol=1e-4) if shape == "user" else {}

    def ids(self, T, seed):
        return make_ids(T, seed, self.vocab)


@pytest.fixture(scope="module")
def families(module_enabled):
    return {}


@pytest.fixture
def family(families, request):
    key = request.param
    if key not in families:
        families[key] = Family(*key)
    return families[key]


def _check_traces(jm, backward: bool = False):
    """Both checkers on the last computation trace, and on the last backward trace after training
    (GPT-2's: a size of the attention projection's split, renamed in the backward's reshape to a
    name only the forward's split defined, failed the strict checker)."""
    metatrace.check_trace(thunder.last_traces(jm)[-1])
    if backward:
        metatrace.check_trace(thunder.last_backward_traces(jm)[-1])


def _explain_text(jm) -> str:
    return "\n".join(g for entry in metatrace.explain(jm) for g in entry.guards)


@pytest.mark.parametrize("family", CASES, ids=CASE_IDS, indirect=True)
def test_eval_over_lengths(family):
    model, jm = family.model, family.jm
    model.eval()
    before = thunder.cache_misses(jm)
    for i, T in enumerate(family.lengths):
        ids = family.ids(T, i)
        with torch.no_grad():
            expected = model(input_ids=ids).logits
            actual = jm(input_ids=ids).logits
        family.eval_misses.append((T, thunder.cache_misses(jm)))
        torch.testing.assert_close(actual, expected, msg=lambda m: f"{family.name} T={T}: {m}")
    _check_traces(jm)
    misses = thunder.cache_misses(jm) - before
    assert misses == EXPECTED_COMPILES[family.key][0], family.eval_misses


@pytest.mark.parametrize("family", CASES, ids=CASE_IDS, indirect=True)
def test_training_step_over_lengths(family):
    model, jm = family.model, family.jm
    if family.shape == "user":
        model.train()  # as a user does; the tiny shape trains in eval mode (no dropout either way)
    before = thunder.cache_misses(jm)
    params = [p for p in model.parameters() if p.requires_grad]
    for i, T in enumerate(family.lengths):
        ids = family.ids(T, 100 + i)
        expected_loss = model(input_ids=ids).logits.sum()
        expected_grads = torch.autograd.grad(expected_loss, params, allow_unused=True)
        loss = jm(input_ids=ids).logits.sum()
        grads = torch.autograd.grad(loss, params, allow_unused=True)
        family.train_misses.append((T, thunder.cache_misses(jm)))
        torch.testing.assert_close(loss, expected_loss, msg=lambda m: f"{family.name} T={T} loss: {m}")
        for (pname, _), g, e in zip(model.named_parameters(), grads, expected_grads):
            assert (g is None) == (e is None), f"{family.name} T={T}: {pname} has a gradient in one only"
            if e is not None:
                torch.testing.assert_close(g, e, **family.grad_tolerance,
                                           msg=lambda m: f"{family.name} T={T} grad {pname}: {m}")
    _check_traces(jm, backward=True)
    misses = thunder.cache_misses(jm) - before
    assert misses == EXPECTED_COMPILES[family.key][1], family.train_misses


@pytest.mark.parametrize("family", CASES, ids=CASE_IDS, indirect=True)
def test_explain_names_guards_by_source(family):
    if not thunder.cache_misses(family.jm):  # (run alone: the eval and training tests compile it otherwise)
        with torch.no_grad():
            family.jm(input_ids=family.ids(family.lengths[0], 0))
    text = _explain_text(family.jm)
    names = sorted(set(PROXY_NAME.findall(text)))
    assert not names, f"{family.name}: proxy names in explain(): {names}\n" + "\n".join(
        line for line in text.splitlines() if PROXY_NAME.search(line)
    )
