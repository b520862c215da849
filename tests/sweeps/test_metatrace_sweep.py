"""Every opinfo sample (CPU, float32 where supported) under ``cache="symbolic values"``:
with metatrace enabled the strict checker passes on every trace (prologue, every computation
stage down to the executed one), and every sample that works with stock thunder under constant
values (thunder's default cache) works under symbolic values too and gives the same result
(compared with the op's torch reference by the harness): drop-in. Samples per op:
$METATRACE_SWEEP_SAMPLES (harness default).
"""

from __future__ import annotations

from collections import defaultdict

import pytest

import thunder

import metatrace
from metatrace.checker import find_orphans
from opinfo_harness import default_cases, run_case

CASES, _ = default_cases()
OPS = sorted({op.name for op, _ in CASES})


@pytest.fixture(scope="module")
def outcomes() -> dict[str, list[tuple[str | None, str, str, list]]]:
    """op name -> per sample (stock thunder's status under constant values, thunder's default
    cache, or None where it was not needed; metatrace's status, error and orphans). Stock thunder
    runs a sample only where metatrace's status is not ok: the claim is "stock ok => metatrace
    ok", which a sample metatrace runs ok meets whatever stock thunder does. (run_case copies the
    sample's arguments, so the sample stock thunder gets is the one metatrace got.)"""
    runs = []
    with metatrace.enable():
        for op, sample in CASES:
            r = run_case(op, sample, cache="symbolic values")
            orphans = []
            if r.status in ("ok", "mismatch"):
                traces = [*thunder.last_prologue_traces(r.jfn), *thunder.last_traces(r.jfn)]
                orphans = [f"{t.get_provenance()}: {o}".replace("\n", " ") for t in traces for o in find_orphans(t)]
            runs.append((r.status, (r.error or "")[:400], orphans))
    result: dict[str, list] = defaultdict(list)
    for (op, sample), (status, error, orphans) in zip(CASES, runs):
        stock = None if status == "ok" else run_case(op, sample, cache="constant values").status
        result[op.name].append((stock, status, error, orphans))
    return result


@pytest.mark.parametrize("op_name", OPS)
def test_op_under_metatrace(op_name, outcomes):
    for i, (stock, status, error, orphans) in enumerate(outcomes[op_name]):
        if stock == "ok":  # (None: metatrace ran it ok, stock thunder was not needed)
            assert status == "ok", f"sample {i}: stock thunder (constant values) ok, metatrace {status}: {error}"
        if status == "ok":
            assert not orphans, f"sample {i}: {orphans[:3]}"


def test_sweep_reached_most_ops(outcomes):
    ok = sum(status == "ok" for per_op in outcomes.values() for _, status, _, _ in per_op)
    assert len(outcomes) >= 200 and ok >= 0.9 * sum(map(len, outcomes.values()))
