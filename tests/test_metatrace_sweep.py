"""Every opinfo sample (CPU, float32 where supported) under ``cache="symbolic values"``:
with metatrace enabled the strict checker passes on every trace (prologue, every computation
stage down to the executed one), and every sample that works with stock thunder under constant
values (thunder's default cache) works under symbolic values too and gives the same result
(compared with the op's torch reference by the harness): drop-in. Samples per op:
$METATRACE_SWEEP_SAMPLES (harness default).
"""

from __future__ import annotations

import collections
from collections import defaultdict

import pytest

import thunder

import metatrace
from metatrace.checker import find_orphans
from opinfo_harness import STATUSES, default_cases, run_case

CASES, SKIPPED = default_cases()  # SKIPPED: op name -> why its samples could not be built
OPS = sorted({op.name for op, _ in CASES})


@pytest.fixture(scope="module")
def stock() -> list[tuple[str, str, bool]]:
    """Per case, stock thunder (metatrace not enabled) under constant values, thunder's default
    cache: (status, first error line, whether a first computation trace is there)."""
    assert not metatrace.is_enabled()
    result = []
    for op, sample in CASES:
        r = run_case(op, sample, cache="constant values")
        traced = r.status in ("ok", "mismatch") and thunder.last_traces(r.jfn)[0] is not None
        result.append((r.status, (r.error or "").splitlines()[0][:160] if r.error else "", traced))
    return result


@pytest.mark.sweep
@pytest.mark.parametrize("cache", ["constant values"])
def test_stock_thunder_sweep(cache, stock):
    """The baseline sweep's constant-values half (``test_opinfo_sweep`` has the symbolic one):
    the harness never crashes, and tracing that finished left its first computation trace."""
    counts = collections.Counter()
    failures = collections.defaultdict(list)  # (status, op name) -> first error lines
    for (op, _), (status, error, traced) in zip(CASES, stock):
        assert status in STATUSES
        counts[status] += 1
        if status != "ok":
            failures[status, op.name].append(error)
        if status in ("ok", "mismatch"):
            assert traced
    print(f"\n[{cache}] {dict(counts)}; skipped ops: {SKIPPED}")
    for (status, name), errors in sorted(failures.items()):
        print(f"  {status:15} {name} x{len(errors)}: {errors[0]}")
    assert counts["ok"] > 0


@pytest.fixture(scope="module")
def outcomes(stock) -> dict[str, list[tuple[str, str, str, list]]]:
    """op name -> per sample (stock constant-values status, metatrace status, metatrace error, orphans)."""
    result: dict[str, list] = defaultdict(list)
    with metatrace.enable():
        for (op, sample), (stock_status, _, _) in zip(CASES, stock):
            r = run_case(op, sample, cache="symbolic values")
            orphans = []
            if r.status in ("ok", "mismatch"):
                traces = [*thunder.last_prologue_traces(r.jfn), *thunder.last_traces(r.jfn)]
                orphans = [f"{t.get_provenance()}: {o}".replace("\n", " ") for t in traces for o in find_orphans(t)]
            result[op.name].append((stock_status, r.status, (r.error or "")[:400], orphans))
    return result


@pytest.mark.parametrize("op_name", OPS)
def test_op_under_metatrace(op_name, outcomes):
    for i, (stock, status, error, orphans) in enumerate(outcomes[op_name]):
        if stock == "ok":
            assert status == "ok", f"sample {i}: stock thunder (constant values) ok, metatrace {status}: {error}"
        if status == "ok":
            assert not orphans, f"sample {i}: {orphans[:3]}"


def test_sweep_reached_most_ops(outcomes):
    ok = sum(status == "ok" for per_op in outcomes.values() for _, status, _, _ in per_op)
    assert len(outcomes) >= 200 and ok >= 0.9 * sum(map(len, outcomes.values()))
