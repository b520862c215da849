"""litgpt models under ``cache="symbolic values"`` with metatrace: one compiled entry serves many
sizes, results equal eager.

thunder's small litgpt testing configs (2 layers, block 128, float32 CPU, fixed seeds; shared code in
tests/litgpt_workloads.py):

- training step over sequence lengths: output and every parameter gradient equal eager, at most 2
  compiles per config, every trace (prologue, forward, backward) passes the strict checker;
- KV-cache decoding (prefill 8 tokens, then one token per step with ``input_pos`` and
  ``input_pos_maxp1`` advancing): logits equal eager at every step, at most 2 compiles.

Compiles cost seconds each, so these tests are marked ``slow``; tools/bench.py measures the same
workloads against stock thunder.
"""

from __future__ import annotations

import dataclasses
import re

import pytest
import torch

import thunder

import metatrace
from litgpt_workloads import (
    CONFIG_NAMES,
    DECODE_STEPS,
    MIXTRAL_REASON,
    all_traces,
    build,
    decode_calls,
    decode_models,
    training_input,
    training_step,
)

# A subset of the lengths (8, 12, 16, 24, 32, 40, 48, 64) to keep CI time down: until an
# entry is reused, every length costs a compile. tools/bench.py's litgpt training section runs
# all eight (litgpt_workloads.TRAINING_LENGTHS).
CI_TRAINING_LENGTHS = (8, 16, 24, 64)
MAX_COMPILES = 2

CONFIGS = [
    *CONFIG_NAMES,
    pytest.param("mixtral-like", marks=pytest.mark.skip(reason=MIXTRAL_REASON)),
]

pytestmark = pytest.mark.slow


def trace_check_failures(jm, where: str) -> list[str]:
    """Strict checker over every trace of the entry just compiled; one line per failing trace.

    Collected rather than raised at once, so that a failing test still reports its compile
    counts (the test prints them; pytest shows them with the failure).
    """
    failures = []
    for i, trace in enumerate(all_traces(jm)):
        try:
            metatrace.check_trace(trace)
        except Exception as e:  # TraceCheckError, or thunder's own checks
            failures.append(f"{where}, trace {i} of the entry ({type(e).__name__}): {e}")
    return failures


@pytest.fixture(scope="module")
def trained() -> dict:
    """The llama2-like model and its jitted model, by name, after
    test_training_step_over_sequence_lengths ran them: a later test that reads a training entry
    reads that one instead of compiling another."""
    return {}


@pytest.mark.parametrize("name", CONFIGS)
def test_training_step_over_sequence_lengths(enabled, name, trained):
    model = build(name)
    model.train()
    jm = thunder.jit(model, cache="symbolic values")
    if name == "llama2-like":
        trained[name] = model, jm
    misses = []  # cache misses after each length, for the message
    bad_traces = []
    for T in CI_TRAINING_LENGTHS:
        idx = training_input(model, T)
        expected_out, expected_grads = training_step(model, model, idx)
        out, grads = training_step(jm, model, idx)
        misses.append((T, thunder.cache_misses(jm)))
        torch.testing.assert_close(out, expected_out, atol=1e-5, rtol=1e-5, msg=lambda m: f"T={T} output: {m}")
        assert grads.keys() == expected_grads.keys(), f"T={T}: parameters with a gradient differ"
        for pname, grad in grads.items():
            torch.testing.assert_close(
                grad, expected_grads[pname], atol=1e-4, rtol=1e-4, msg=lambda m: f"T={T} grad of {pname}: {m}"
            )
        if len(misses) == 1 or misses[-1][1] > misses[-2][1]:  # a new entry (a reused one was checked)
            bad_traces += trace_check_failures(jm, f"T={T}")
    print(f"{name}: cache misses after each T: {misses}; trace check failures: {len(bad_traces)}")
    assert thunder.cache_misses(jm) <= MAX_COMPILES, f"compiles (cache misses) after each T: {misses}"
    assert not bad_traces, "\n".join(bad_traces)


@pytest.mark.parametrize("name", CONFIGS)
def test_kv_cache_decoding(enabled, name):
    # The 32 decode steps: on a reused entry a step costs milliseconds.
    model, reference = decode_models(name)
    model.eval()
    reference.eval()
    jm = thunder.jit(model, cache="symbolic values")
    misses = []
    bad_traces = []
    with torch.no_grad():
        for idx, input_pos, maxp1 in decode_calls(model, steps=DECODE_STEPS):
            logits = jm(idx, input_pos, input_pos_maxp1=maxp1)
            expected = reference(idx, input_pos, input_pos_maxp1=maxp1)
            pos = int(input_pos[0])
            misses.append((pos, thunder.cache_misses(jm)))
            torch.testing.assert_close(logits, expected, atol=1e-5, rtol=1e-5, msg=lambda m: f"pos={pos}: {m}")
            if len(misses) == 1 or misses[-1][1] > misses[-2][1]:  # a new entry (~4 s to check all its traces)
                bad_traces += trace_check_failures(jm, f"pos={pos}")
    # The cache buffers were updated in place by the jitted model as by the eager one.
    for (bname, buf), (_, ref_buf) in zip(model.named_buffers(), reference.named_buffers()):
        torch.testing.assert_close(buf, ref_buf, atol=1e-5, rtol=1e-5, msg=lambda m: f"buffer {bname}: {m}")
    print(f"{name}: cache misses after each position: {misses}; trace check failures: {len(bad_traces)}")
    assert thunder.cache_misses(jm) <= MAX_COMPILES, f"compiles (cache misses) after each position: {misses}"
    assert not bad_traces, "\n".join(bad_traces)


# Guard lines of the forms thunder's own structure and module checks print (explain lists those
# too): not the relational guards the issue bounds.
_STRUCTURAL = ("len(", "isinstance(", "self.", "check_")


def _relational_guards(entry) -> list[str]:
    return [g for g in entry.guards if not g.startswith(_STRUCTURAL) and ": rank " not in g]


@pytest.fixture(scope="module")
def llama2_inference_entry():
    """explain() of the llama2-like inference entry, one entry for T = 8, 16, 32."""
    with metatrace.enable():
        model = build("llama2-like")
        model.eval()
        jm = thunder.jit(model, cache="symbolic values")
        with torch.no_grad():
            for T in (8, 16, 32):
                idx = training_input(model, T)
                torch.testing.assert_close(jm(idx), model(idx), atol=1e-5, rtol=1e-5)
        return thunder.cache_misses(jm), metatrace.explain(jm)


def test_inference_entry_serves_every_length(llama2_inference_entry):
    misses, _ = llama2_inference_entry
    assert misses == 1


def test_inference_entry_has_at_most_15_relational_guards(llama2_inference_entry):
    _, (entry,) = llama2_inference_entry
    assert len(_relational_guards(entry)) <= 15, "\n".join(entry.guards)


def test_inference_entry_guards_have_no_duplicates(llama2_inference_entry):
    _, (entry,) = llama2_inference_entry
    relational = _relational_guards(entry)
    assert len(set(relational)) == len(relational)


def test_inference_entry_guards_have_no_tautologies(llama2_inference_entry):
    _, (entry,) = llama2_inference_entry
    tautologies = [g for g in _relational_guards(entry) if re.fullmatch(r"(\S+) (==|<=|>=) \1", g)]
    assert tautologies == []


def test_inference_entry_guards_name_operands_by_source(llama2_inference_entry):
    # thunder's own proxy names (i63, f29, t5) mean a guard the user cannot read
    _, (entry,) = llama2_inference_entry
    unnamed = [g for g in _relational_guards(entry) if re.search(r"\b[itfb]\d+\b", g)]
    assert unnamed == []


def test_inference_entry_explains_in_at_most_20_lines(llama2_inference_entry):
    # the module's values and its parameters' metadata are one summary line per kind
    _, (entry,) = llama2_inference_entry
    assert len(str(entry).splitlines()) <= 20, str(entry)


def test_inference_entry_verbose_lists_every_check(llama2_inference_entry):
    _, (entry,) = llama2_inference_entry
    verbose = dataclasses.replace(entry, verbose=True)
    listed = f"cache entry {entry.index}:\n" + "\n".join(f"  {g}" for g in entry.guards)
    assert str(verbose).startswith(listed)  # (then the blocks the compile stamped)


def test_inference_entry_summary_counts_the_module_checks(llama2_inference_entry):
    _, (entry,) = llama2_inference_entry
    counted = sum(int(line.split()[0]) for line in str(entry).splitlines() if " checks of module " in line)
    assert counted == sum(len(texts) for texts in entry.on_state.values())


def test_inference_entry_pins_and_exclusions_say_why(llama2_inference_entry):
    # a guard that fixes or excludes one value of an input (B == 2, B != 64) names its decision
    _, (entry,) = llama2_inference_entry
    single = [g for g in entry.on_inputs if not g.startswith("len(") and "(" not in g
              and (re.fullmatch(r"\S+ == -?\d+", g) or " != " in g)]
    assert single == [], "\n".join(entry.on_inputs)


def test_last_traces_of_a_training_entry_name_metatraces_passes(enabled, trained):
    """A pass of metatrace's returns a new trace whose provenance names it, after thunder's (the
    llama2-like training entry of test_training_step_over_sequence_lengths; compiled here when
    that test did not run)."""
    _, jm = trained.get("llama2-like", (None, None))
    if jm is None or not thunder.cache_misses(jm):
        model = build("llama2-like")
        jm = thunder.jit(model, cache="symbolic values")
        training_step(jm, model, training_input(model, 8))
    headers = [str(t.get_provenance()) for t in thunder.last_traces(jm) if t.get_provenance() is not None]
    assert any(", then metatrace: " in h for h in headers), headers
