"""Gradients over every opinfo that supports grad (CPU, float32) under symbolic values.

For each op, its first samples (``SAMPLES_PER_OP``) with ``requires_grad=True`` tensors run
through stock thunder under constant values (the baseline: what thunder can differentiate at
all), then with metatrace under symbolic values, once on a fresh jitted function per sample
and once on one jitted function shared by the op's samples. Wherever the baseline is ok:
forward results and gradients equal eager PyTorch in both runs, and every trace of the fresh
function (prologue, computation stages, backward) passes the strict checker, except for the ops
listed below with the reason.

The baseline depends on stock thunder only: it is kept in the cache directory
(tests/stock_baselines.py) and computed again only when its key changes.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

import thunder

import metatrace
import stock_baselines
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


def _valid(statuses) -> bool:
    return isinstance(statuses, dict) and statuses.keys() == OPS.keys()


@pytest.fixture(scope="module")
def outcomes() -> dict[str, list[dict]]:
    """op name -> per sample: stock thunder's status under constant values (the baseline: from
    the cache directory when an earlier run computed it), the fresh and the shared run's results
    under metatrace, and the fresh function's orphans."""
    assert not metatrace.is_enabled()
    cached = stock_baselines.cached("grad-sweep", SAMPLES_PER_OP, valid=_valid)
    baselines: dict[str, list[str]] = {}
    result: dict[str, list[dict]] = defaultdict(list)
    samples = {name: iter_grad_samples(op, SAMPLES_PER_OP) for name, op in OPS.items()}
    for name, op in OPS.items():
        if cached is not None and len(cached[name]) == len(samples[name]):
            baselines[name] = cached[name]
        else:
            baselines[name] = [run_grad_case(op, s, cache="constant values").status for s in samples[name]]
    with metatrace.enable():  # (once for every op: an enable() costs 0.17 s)
        for name, op in OPS.items():
            baseline = baselines[name]
            # (a sample thunder cannot differentiate at all is not checked: no fresh run for it;
            # the shared function still gets every sample, in order, as a user's would)
            fresh = [run_grad_case(op, s, cache="symbolic values") if b == "ok" else None
                     for s, b in zip(samples[name], baseline)]
            orphans = [_orphans(r.jfn) if r is not None and r.status == "ok" else [] for r in fresh]
            shared = list(run_grad_shared(op, samples[name], cache="symbolic values"))
            for b, f, o, s in zip(baseline, fresh, orphans, shared):
                result[name].append({"baseline": b, "fresh": f, "orphans": o, "shared": s})
    if baselines != cached:
        stock_baselines.store("grad-sweep", SAMPLES_PER_OP, value=baselines)
    return result


@pytest.mark.sweep
@pytest.mark.parametrize("op_name", sorted(OPS))
def test_gradients_under_metatrace(op_name, outcomes):
    errors, orphans = [], []
    for i, case in enumerate(outcomes[op_name]):
        if case["baseline"] != "ok":
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
    baseline_ok = sum(c["baseline"] == "ok" for c in cases)
    print(f"\n{len(OPS)} grad ops, {len(cases)} samples, baseline ok {baseline_ok}")
    assert len(OPS) >= 150 and baseline_ok >= 0.8 * len(cases)
