#!/usr/bin/env python
"""Benchmarks, measured side by side in one run (medians and ratios; the machines are noisy).

    python tools/bench.py [--samples N] [--repeats R]

1. codegen: wall time of generating the rewritten metas (thunder already imported), median of R.
2. trace construction: for each opinfo sample, the tracing time thunder reports for the first
   call of a fresh ``thunder.jit(..., cache="symbolic values")``, with metatrace disabled and
   enabled, interleaved sample by sample (each after a full garbage collection, so one mode does
   not pay for the other's garbage); the ratio of the totals and the median per-sample ratio.
3. prologue cost on a cache hit: the cache entry's prologue function called on the same inputs,
   stock thunder against metatrace (both ``cache="symbolic values"``), median of many calls.
4. nanoGPT (issue 4's sizes): eval forward + training step over sequence lengths 8..64 on a fresh
   jitted model, total wall time (compiles included), stock thunder under constant values
   against metatrace under symbolic values, alternated ``--gpt-repeats`` times; median totals,
   their ratio, and the compiles of each.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
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

    # Start each measurement with no garbage-collection debt: toggling metatrace per sample
    # allocates (wrappers for 171 metas), and a full collection of torch's and thunder's heap
    # (~0.2 s) would otherwise land in whichever trace happens to trigger it.
    gc.collect()
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


def _prologue_seconds(fn, args, enable: bool, repeats: int) -> float:
    import timeit

    with metatrace.enable() if enable else contextlib.nullcontext():
        jf = thunder.jit(fn, cache="symbolic values")
        jf(*args)
        # The prologue reads the call's cache info (autocast, grad mode, ...) from a context
        # variable thunder sets per call: capture it during a hit, then time the prologue alone.
        captured = {}
        original = thunder._get_cache_info
        thunder._get_cache_info = lambda: captured.setdefault("info", original())
        try:
            jf(*args)
        finally:
            thunder._get_cache_info = original
        assert thunder.cache_hits(jf) == 1, "the second call must hit the cache"
        prologue = thunder.compile_stats(jf).interpreter_cache[-1].prologue_fn
        token = thunder._cache_info_ctx.set(captured["info"])
        try:
            times = timeit.repeat(lambda: prologue(*args), number=200, repeat=repeats)
        finally:
            thunder._cache_info_ctx.reset(token)
    return statistics.median(times) / 200


def bench_prologue(repeats: int) -> list[tuple[str, float, float]]:
    import torch
    from workloads import causal_attention, causal_mask

    mask = causal_mask()

    def sliced(a, i, flag):
        return a[:, :, 1:i:2] * 2 if flag > 5 else a.sum(1)

    cases = [
        ("slice + branch (a, i, flag)", sliced, (torch.randn(8, 16, 4), 3, 6)),
        ("causal attention (q, k, v, mask)", causal_attention, (*(torch.randn(2, 4, 16, 16) for _ in range(3)), mask)),
    ]
    out = []
    for label, fn, args in cases:
        stock = _prologue_seconds(fn, args, False, repeats)
        ours = _prologue_seconds(fn, args, True, repeats)
        out.append((label, stock, ours))
    return out


def _gpt_sequence(enable: bool) -> tuple[float, int]:
    import torch
    from test_modules import SEQUENCE_LENGTHS, small_gpt

    model = small_gpt()
    cache = "symbolic values" if enable else "constant values"
    context = metatrace.enable() if enable else contextlib.nullcontext()
    gc.collect()
    with context:
        jm = thunder.jit(model, cache=cache)
        start = time.perf_counter()
        for T in SEQUENCE_LENGTHS:
            x, y = torch.randint(0, 256, (2, T)), torch.randint(0, 256, (2, T))
            model.eval()
            with torch.no_grad():
                jm(x)
            model.train()
            model.zero_grad()
            _, loss = jm(x, y)
            loss.backward()
        return time.perf_counter() - start, thunder.cache_misses(jm)


def bench_nanogpt(repeats: int) -> tuple[float, float, int, int]:
    stock, ours = [], []
    for _ in range(repeats):
        stock_s, stock_compiles = _gpt_sequence(False)
        ours_s, our_compiles = _gpt_sequence(True)
        stock.append(stock_s)
        ours.append(ours_s)
    return statistics.median(stock), statistics.median(ours), stock_compiles, our_compiles


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=2, help="opinfo samples per op")
    parser.add_argument("--repeats", type=int, default=3, help="codegen repetitions")
    parser.add_argument("--gpt-repeats", type=int, default=3, help="nanoGPT sequence repetitions (0: skip)")
    args = parser.parse_args()

    with metatrace.enable():  # warm: cache generated and loaded, first-use costs paid
        pass
    print(f"codegen (generate, median of {args.repeats}): {bench_codegen(args.repeats):.2f} s  (target < 3 s)")
    off, on, median_ratio, count = bench_tracing(args.samples)
    print(f"trace construction over {count} opinfo samples: stock {off:.2f} s, metatrace {on:.2f} s, "
          f"ratio of totals {on / off:.3f}, median per-sample ratio {median_ratio:.3f}  (target <= 1.15)")
    for label, stock, ours in bench_prologue(args.repeats * 5):
        print(f"prologue on a cache hit, {label}: stock {stock * 1e6:.1f} us, metatrace {ours * 1e6:.1f} us, "
              f"ratio {ours / stock:.3f}  (target <= 1.10)")
    if args.gpt_repeats:
        stock, ours, stock_compiles, our_compiles = bench_nanogpt(args.gpt_repeats)
        print(f"nanoGPT eval + training step over T=8..64 (median of {args.gpt_repeats}): stock constant values "
              f"{stock:.1f} s ({stock_compiles} compiles), metatrace symbolic values {ours:.1f} s "
              f"({our_compiles} compiles), ratio {ours / stock:.3f}")


if __name__ == "__main__":
    main()
