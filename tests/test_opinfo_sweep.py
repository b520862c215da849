"""Baseline sweep of thunder's opinfos with stock thunder (metatrace not enabled).

Records what stock thunder does under each cache mode, and checks that the harness
itself never crashes: errors in thunder or in the torch reference are statuses, not
exceptions.  Samples per op: $METATRACE_SWEEP_SAMPLES (default in opinfo_harness).
Run with ``pytest -m sweep -s`` to see the summary.
"""

import collections
import time

import pytest
import thunder

from opinfo_harness import STATUSES, default_cases, run_case


@pytest.mark.sweep
# (the constant-values half is in test_metatrace_sweep, which runs the same stock sweep as its
# baseline: one run serves both)
@pytest.mark.parametrize("cache", ["symbolic values"])
def test_stock_thunder_sweep(cache):
    counts = collections.Counter()
    failures = collections.defaultdict(list)  # (status, op name) -> first error lines
    start = time.perf_counter()

    cases, skipped = default_cases()
    for op, sample in cases:
        result = run_case(op, sample, cache=cache)
        assert result.status in STATUSES
        counts[result.status] += 1
        if result.status != "ok":
            failures[result.status, op.name].append((result.error or "").splitlines()[0][:160])
        if result.status in ("ok", "mismatch"):
            # Tracing finished, so the first computation trace is there for callers.
            assert thunder.last_traces(result.jfn)[0] is not None

    elapsed = time.perf_counter() - start
    print(f"\n[{cache}] {dict(counts)} in {elapsed:.1f}s; skipped ops: {skipped}")
    for (status, name), errors in sorted(failures.items()):
        print(f"  {status:15} {name} x{len(errors)}: {errors[0]}")

    assert counts["ok"] > 0
