"""A survey of stock thunder (metatrace not enabled) over each opinfo's first sample, under each
cache mode: the harness itself never crashes (errors in thunder or in the torch reference are
statuses, not exceptions), and tracing that finished left its first computation trace. Kept
between runs (tests/stock_baselines.py: they depend on stock thunder and the harness only). Run
with ``pytest -m sweep -s`` to see the summary.
"""

import collections

import pytest

import stock_baselines
from opinfo_harness import STATUSES, default_cases


@pytest.mark.sweep
@pytest.mark.parametrize("cache", ["symbolic values", "constant values"])
def test_stock_thunder_sweep(cache):
    cases, skipped = stock_baselines.sweep_cases(cache), default_cases()[1]
    counts = collections.Counter()
    failures = collections.defaultdict(list)  # (status, op name) -> first error lines
    for (op, _), (status, error, traced) in zip(cases, stock_baselines.opinfo_sweep(cache), strict=True):
        assert status in STATUSES
        counts[status] += 1
        if status != "ok":
            failures[status, op.name].append(error)
        if status in ("ok", "mismatch"):
            assert traced, f"{op.name}: tracing finished without a first computation trace"
    print(f"\n[{cache}] {dict(counts)}; skipped ops: {skipped}")
    for (status, name), errors in sorted(failures.items()):
        print(f"  {status:15} {name} x{len(errors)}: {errors[0]}")
    assert counts["ok"] > 0
