#!/usr/bin/env python
"""Benchmarks, measured side by side in one run (medians and ratios; the machines are noisy).

    python tools/bench.py [--samples N] [--repeats R]

1. codegen: wall time of generating the rewritten metas (thunder already imported), median of R.
2. trace construction: for each opinfo sample, the tracing time thunder reports for the first
   call of a fresh ``thunder.jit(..., cache="symbolic values")``, with metatrace disabled and
   enabled, interleaved sample by sample; the ratio of the totals and the median per-sample ratio.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import thunder  # noqa: E402

import metatrace  # noqa: E402
from metatrace import codegen  # noqa: E402


def bench_codegen(repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        codegen.generate()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _tracing_seconds(op, sample) -> float | None:
    from opinfo_harness import run_case

    result = run_case(op, sample, cache="symbolic values")
    if result.status != "ok":
        return None
    cs = thunder.compile_stats(result.jfn)
    return (cs.last_trace_tracing_stop - cs.last_trace_tracing_start) / 1e9


def bench_tracing(samples: int) -> tuple[float, float, float, int]:
    from opinfo_harness import iter_cases

    off_total = on_total = 0.0
    ratios = []
    count = 0
    for op, sample in iter_cases(max_samples_per_op=samples):
        off = _tracing_seconds(op, sample)
        with metatrace.enable():
            on = _tracing_seconds(op, sample)
        if off is None or on is None:
            continue
        off_total += off
        on_total += on
        ratios.append(on / off)
        count += 1
    return off_total, on_total, statistics.median(ratios), count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=2, help="opinfo samples per op")
    parser.add_argument("--repeats", type=int, default=3, help="codegen repetitions")
    args = parser.parse_args()

    with metatrace.enable():  # warm: cache generated and loaded, first-use costs paid
        pass
    print(f"codegen (generate, median of {args.repeats}): {bench_codegen(args.repeats):.2f} s  (target < 3 s)")
    off, on, median_ratio, count = bench_tracing(args.samples)
    print(f"trace construction over {count} opinfo samples: stock {off:.2f} s, metatrace {on:.2f} s, "
          f"ratio of totals {on / off:.3f}, median per-sample ratio {median_ratio:.3f}  (target <= 1.15)")


if __name__ == "__main__":
    main()
