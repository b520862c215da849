"""Gradients over every opinfo that supports grad (CPU, float32) under symbolic values.

For each op, its first samples (``SAMPLES_PER_OP``) with ``requires_grad=True`` tensors run
with metatrace under symbolic values, once on a fresh jitted function per sample and once on
one jitted function shared by the op's samples. Forward results and gradients equal eager
PyTorch in both runs, and every trace of the fresh function (prologue, computation stages,
backward) passes the strict checker, except for the ops listed below with the reason, and
except where stock thunder under constant values cannot differentiate the sample at all (the
baseline). Stock thunder runs a sample only where a metatrace run was not ok: a sample both runs
get right needs no baseline.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

import thunder

import metatrace
from grad_harness import grad_ops, iter_grad_samples, run_grad_case, run_grad_shared
from metatrace.checker import find_orphans

SAMPLES_PER_OP = 2
OPS = {op.name: op for op in grad_ops()}

# Known failures, each accounted for (the tests below fail when one is fixed, so the lists
# stay true). No op gives a wrong value: these raise, or leave orphan sizes in a trace.
KNOWN_ERRORS: dict[str, str] = {}  # none at present (multi_dot runs on static views: metatrace.metas.torch_ops.torch_metas)
# Ops whose traces still show size symbols without a definition: none at present (keep the
# mechanism: a regression of an op thunder cannot avoid goes here, with its reason).
KNOWN_ORPHANS: set[str] = set()


def _orphans(jfn) -> list[str]:
    traces = [*thunder.last_prologue_traces(jfn), *thunder.last_traces(jfn), *thunder.last_backward_traces(jfn)]
    return [f"{t.get_provenance()}: {o}".replace("\n", " ")[:200] for t in traces for o in find_orphans(t)]


@pytest.fixture(scope="module")
def outcomes() -> dict[str, list[dict]]:
    """op name -> per sample: the fresh and the shared run's results under metatrace, the fresh
    function's orphans, and stock thunder's status under constant values (the baseline) where a
    run was not ok, else None (not needed)."""
    result: dict[str, list[dict]] = defaultdict(list)
    samples = {name: iter_grad_samples(op, SAMPLES_PER_OP) for name, op in OPS.items()}
    with metatrace.enable():  # (once for every op: an enable() costs 0.17 s)
        for name, op in OPS.items():
            # (the shared function gets every sample, in order, as a user's would)
            fresh = [run_grad_case(op, s, cache="symbolic values") for s in samples[name]]
            orphans = [_orphans(r.jfn) if r.status == "ok" else [] for r in fresh]
            shared = list(run_grad_shared(op, samples[name], cache="symbolic values"))
            for f, o, s in zip(fresh, orphans, shared):
                result[name].append({"baseline": None, "fresh": f, "orphans": o, "shared": s})
    for name, op in OPS.items():  # stock thunder, metatrace disabled, only where it decides
        for sample, case in zip(samples[name], result[name]):
            if case["fresh"].status != "ok" or case["shared"].status != "ok":
                case["baseline"] = run_grad_case(op, sample, cache="constant values").status
    return result


@pytest.mark.sweep
@pytest.mark.parametrize("op_name", sorted(OPS))
def test_gradients_under_metatrace(op_name, outcomes):
    errors, orphans = [], []
    for i, case in enumerate(outcomes[op_name]):
        if case["baseline"] not in (None, "ok"):
            continue  # thunder cannot differentiate this sample at all (counted below)
        for run in ("fresh", "shared"):
            r = case[run]
            # Never a wrong value: a mismatch is a failure whatever the known lists say.
            assert r.status != "mismatch", f"sample {i} ({run}): {r.error}"
            if r.status != "ok":
                errors.append(f"sample {i} ({run}): {r.status}: {r.error}")
        orphans.extend(case["orphans"])
    if op_name in KNOWN_ERRORS:
        assert errors, f"{op_name} works now: remove it from KNOWN_ERRORS"
    else:
        assert not errors, errors[0]
    if op_name in KNOWN_ORPHANS:
        assert orphans, f"{op_name} has no orphans now: remove it from KNOWN_ORPHANS"
    else:
        assert not orphans, orphans[:3]


def test_grad_sweep_covers_most_samples(outcomes):
    cases = [c for per_op in outcomes.values() for c in per_op]
    checked = sum(c["baseline"] in (None, "ok") for c in cases)
    print(f"\n{len(OPS)} grad ops, {len(cases)} samples, checked {checked}")
    assert len(OPS) >= 150 and checked >= 0.8 * len(cases)
