#!/usr/bin/env python
"""Benchmarks, measured side by side in one run (medians and ratios; the machines are noisy).

    python tools/bench.py [--samples N] [--repeats R] [--only SECTIONS] [--skip SECTIONS]

1. codegen: wall time of generating the rewritten metas (thunder already imported), median of R.
2. trace construction: for each opinfo sample, the tracing time thunder reports for the first
   call of a fresh ``thunder.jit(..., cache="symbolic values")``, with metatrace disabled and
   enabled, interleaved sample by sample (each after a full garbage collection, so one mode does
   not pay for the other's garbage); the ratio of the totals and the median per-sample ratio.
3. prologue cost on a cache hit: the cache entry's prologue function called on the same inputs,
   stock thunder against metatrace (both ``cache="symbolic values"``), timed in alternation
   (200 calls a turn), median of the turns.
4. nanoGPT (issue 4's sizes): eval forward + training step over sequence lengths 8..64 on a fresh
   jitted model, total wall time (compiles included), stock thunder under constant values
   against metatrace under symbolic values, alternated ``--gpt-repeats`` times; median totals,
   their ratio, and the compiles of each.

litgpt (``--litgpt-config``, default llama2-like with 2 layers; workloads in
tests/litgpt_workloads.py), metatrace under symbolic values against stock thunder under constant
values with metatrace disabled, alternated ``--litgpt-repeats`` times, medians and ratios:

5. litgpt-compile: the first call of a fresh jitted model (compile + one run; a run is
   milliseconds) for the training step (forward, ``out.sum().backward()``) at T=32 on each of
   ``--compile-configs`` (default llama2-like, falcon-7b-like, gpt-neox-like) and on Hugging
   Face GPT-2 (the tiny config of gpt2-train, T=32), and for the forward alone at T=32 on
   ``--litgpt-config`` (under ``torch.no_grad()``: no grad transform).
6. litgpt-train: total wall time of the training step over T = 8, 12, 16, 24, 32, 40, 48, 64 on a
   fresh jitted model, compiles included and counted.
7. litgpt-decode: KV-cache decoding, prefill 8 + ``--decode-steps`` steps, ``input_pos_maxp1``
   passed at every call (sizes change every step); stock also without ``input_pos_maxp1``, as
   litgpt's ``generate`` calls a ThunderModule (full-length cache, fixed sizes).
8. litgpt-hit: one call of the compiled forward (T=32, no grad) on the same input again, a cache
   hit (prologue, guards, computation), median of many.
9. lora-train: as litgpt-train, on litgpt's LoRA model (r=4 on query, value, projection; only
   the LoRA weights trainable), the finetuning case.
10. ddp-train: the training step over the same 8 lengths under ``thunder.distributed.ddp`` on 2
    CPU ranks (gloo, spawned with torch.multiprocessing, one torch thread each; each rank its own
    batch; workers in tests/distributed_workloads.py, shared with tests/models/test_distributed.py): the
    slowest rank's time in its training loop (compiles included, from a barrier after import and
    setup), compiles per rank; the parent's wall time around the spawn (imports included) is
    printed beside it. ``--ddp-timeout`` bounds the wait for each rank (a hang raises).
11. gpt2-train: Hugging Face GPT-2 (tests/hf_workloads.py's tiny config: 1 layer, hidden 40, 2
    heads, vocab 100), training step (``logits.sum().backward()``) over T = 8, 12, 16, 24, 32 on
    a fresh jitted model, total wall time, compiles included and counted.
12. torch-compile: litgpt-train's sequence with thunder's ``torch_compile_ex`` first among the
    executors (inductor, on CPU): total wall time, thunder compiles, dynamo graphs compiled (each
    one an inductor compile; counted with dynamo's counters), fusion regions of the forward and
    the backward (stock's under constant values are the target), and the training step on a
    cache hit at T=32 (median of 5, after the sequence). One alternation by default
    (``--torch-compile-repeats``): stock compiles inductor once per length (about a minute each).
13. moe-train: litgpt-train's sequence on thunder's ``mixtral-like`` testing config (litgpt's
    LLaMAMoE: top-2 of 8 experts, each expert's token count read from data): metatrace against
    eager PyTorch, total wall time, compiles counted. Stock thunder cannot run it (``torch.where``
    with one argument is not supported in either cache mode), so eager is the comparison.

14. compile (issue 38): the first call of a fresh jitted model, stock thunder (metatrace
    disabled, constant values) against metatrace (symbolic values), alternated
    ``--compile-repeats`` times, medians, ratio (target <= 0.5), and the phase split: thunder's
    interpretation of the model (``compile_stats``' tracing interval) and the rest (transforms,
    grad, passes, the run itself). Workloads: the tiny Hugging Face Llama of the issue (2 layers,
    hidden 32, vocab 128, ``use_cache=False``) forward under ``torch.no_grad()`` at T=16 (also
    ``torch.compile(backend="aot_eager")``'s first call), its training step
    (``logits.sum().backward()``), and litgpt's ``--litgpt-config`` training step at T=32.
15. hf-generate (issue 37): Hugging Face ``generate`` (greedy, 16 new tokens, the default
    DynamicCache) of a tiny Llama (2 layers) over 4 prompts (lengths 5-12, batches 1 and 2) with
    ``model.forward`` jitted: metatrace's total time, compiles and tokens against eager's, the median
    tokens per second of five later calls against eager's, and what stock thunder (constant values) does.
16. warm-start (issue 52): the first call of a fresh process, each mode in a new process of its own
    (imports, ``enable()`` and the model's construction excluded; one-time costs included; the
    process's whole wall time, imports included, beside it), then two more sequence lengths, the
    compiles of all three counted: metatrace (symbolic values) cold, its entry cache on in a fresh
    empty directory, and warm, a second process on the directory the first filled;
    ``torch.compile(backend="aot_eager")`` cold, in a fresh empty ``TORCHINDUCTOR_CACHE_DIR``, saving
    Mega-Cache's artifacts (``torch.compiler.save_cache_artifacts()``) at its end, and warm, a new
    process in another fresh directory that loads them (``torch.compiler.load_cache_artifacts``,
    timed within its first call) before its first call. Workloads: compile's HF Llama training
    step (T=16, then 24, 32) and litgpt's ``--litgpt-config`` training step (T=32, then 16, 48).
    Medians over ``--warm-start-repeats``; ratios metatrace warm / cold and metatrace warm /
    aot_eager warm (target < 1). What Mega-Cache holds for aot_eager (torch 2.9.1): no compiled
    code (AOTAutograd's cache takes only serializable compilers, inductor's; aot_eager has no FX
    graph cache), only dynamo's PGO profiles (which sizes turned out dynamic), recorded only
    under a job id (``TORCH_COMPILE_JOB_ID``, set here for both aot_eager processes): the warm
    process still traces every frame with dynamo and AOTAutograd, but marks the lengths dynamic at
    once instead of recompiling; the artifacts' kinds are printed.
    Compiles: ``thunder.cache_misses`` for metatrace, dynamo's ``unique_graphs`` counter for
    torch.compile. The entry cache never touches ``~/.cache/metatrace/entries`` here (a temporary
    directory each). A warm process that loaded nothing because the program key changed (metatrace's
    source edited between the two processes, as in a shared working tree) runs its pair again, at
    most twice, and says so.
17. thunderfx (issue 54): the training step over T = 8, 12, 16, 24, 32 on a fresh compiled model, a
    new process per mode (METATRACE_ENTRY_CACHE=0, a fresh empty TORCHINDUCTOR_CACHE_DIR: every
    compile happens), total wall time of the five steps (compiles included; the first step's beside
    it): thunder.jit + metatrace (symbolic values), ``torch.compile(backend="aot_eager")``,
    ThunderFX + metatrace (``thunder.dynamo.thunderfx(model)``, default options: dynamic capture,
    subgraphs under symbolic values) and stock ThunderFX (metatrace not enabled, default options).
    Dynamo graphs (dynamo's ``unique_graphs``), thunder compiles (``thunder.cache_misses`` summed
    over the backend's ``subgraph_infos[*].thunder_compiled_fns``), the thunder and inductor
    partitions and the split reasons; ratio ThunderFX + metatrace / thunder.jit + metatrace (goal
    <= 1). Workloads (``--thunderfx-workloads``): compile's tiny HF Llama, litgpt's
    ``--litgpt-config``; medians over ``--thunderfx-repeats``. tools/thunderfx_profile.py splits
    one first call into its phases (or runs it under cProfile).
18. depth (issue 53): how the first call grows with the model's depth. The first call of a fresh
    model, a new process per measurement (as warm-start's; METATRACE_ENTRY_CACHE=0, a fresh empty
    TORCHINDUCTOR_CACHE_DIR; imports, ``enable()`` and the model's construction excluded), at each
    of ``--depth-layers`` (default 2, 8, 16), for metatrace (symbolic values, repeated blocks
    stamped), metatrace with every block interpreted ("unstamped": METATRACE_STAMP_BLOCKS=0),
    stock thunder (constant values, metatrace not enabled; a model stock cannot run is said so in
    its row) and ``torch.compile(backend="aot_eager")`` (``--depth-modes`` picks some). Workloads: the HF Llama training step of issue 53
    (hidden 64, intermediate 128, 4 heads, 2 kv heads, vocab 128, ``use_cache=False``, T=16) and
    litgpt's ``--litgpt-config`` training step (T=32) at that depth. Per mode and depth: the first
    call, and for thunder the interpretation (``compile_stats``' tracing interval) and the rest
    (passes, grad transform, the run). Derived: metatrace's 8-layer / 2-layer first call (target
    <= 1.5), its cost per added layer against aot_eager's (least squares over the depths, and per
    interval; target <=), and the passes' share (first call - interpretation) against stock's at
    each depth (target <= at 2 and 8 layers on litgpt). Medians over ``--depth-repeats`` (default
    1; each repeat runs every depth's modes in turn).

Sections: codegen, tracing, prologue, nanogpt, litgpt-compile, litgpt-train, litgpt-decode,
litgpt-hit, lora-train, ddp-train, gpt2-train, torch-compile, moe-train, compile, hf-generate,
warm-start, thunderfx, depth. ``--only litgpt`` runs the litgpt ones (a name or
a prefix, comma-separated), ``--skip tracing,nanogpt`` leaves some out.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")
ROOT = Path(__file__).resolve().parents[1]
# this checkout's metatrace (a script's sys.path has tools/, not the checkout: an editable
# install elsewhere would win), and the shared workloads in tests/
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import thunder  # noqa: E402

import metatrace  # noqa: E402
from metatrace.codegen import generate  # noqa: E402


def bench_codegen(repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        generate.generate()
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


def _hit_prologue(fn, args, enable: bool):
    """(jitted function, its entry's prologue, the cache info a hit reads) after one compile and
    one hit; the jitted function keeps the entry's guard program alive."""
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
        return jf, thunder.compile_stats(jf).interpreter_cache[-1].prologue_fn, captured["info"]


def _prologue_seconds(fn, args, repeats: int) -> tuple[float, float]:
    """Stock's and metatrace's prologue per call, timed in alternation (200 calls each turn,
    ``repeats`` turns each): a burst of host load lands on both sides, not on one."""
    import timeit

    stock_jf, stock, stock_info = _hit_prologue(fn, args, False)
    ours_jf, ours, ours_info = _hit_prologue(fn, args, True)
    times: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(repeats):
        for enable, prologue, info in ((False, stock, stock_info), (True, ours, ours_info)):
            token = thunder._cache_info_ctx.set(info)
            try:
                times[enable] += timeit.repeat(lambda: prologue(*args), number=200, repeat=1)
            finally:
                thunder._cache_info_ctx.reset(token)
    return statistics.median(times[False]) / 200, statistics.median(times[True]) / 200


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
        stock, ours = _prologue_seconds(fn, args, repeats)
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


def _modes(enable: bool):
    """(context, cache option) of one side: metatrace under symbolic values, or stock thunder
    (metatrace disabled) under constant values."""
    if enable:
        return metatrace.enable(), "symbolic values"
    return contextlib.nullcontext(), "constant values"


def _alternate(measure, repeats: int) -> tuple[list, list]:
    """``measure(enable)`` for stock then metatrace, ``repeats`` times; the results of each side."""
    stock, ours = [], []
    for _ in range(repeats):
        for enable, out in ((False, stock), (True, ours)):
            gc.collect()
            out.append(measure(enable))
    return stock, ours


def _first_call_seconds(config: str, training: bool, enable: bool, T: int = 32) -> float:
    import torch
    from litgpt_workloads import build, training_input, training_step

    model = build(config)
    idx = training_input(model, T)
    context, cache = _modes(enable)
    with context:
        jm = thunder.jit(model, cache=cache)
        gc.collect()
        start = time.perf_counter()
        if training:
            training_step(jm, model, idx)
        else:
            with torch.no_grad():
                jm(idx)
        seconds = time.perf_counter() - start
        assert thunder.cache_misses(jm) == 1
    return seconds


def _gpt2_first_call_seconds(enable: bool, T: int = 32) -> float:
    from hf_workloads import build, ids, plain_output_collector

    model = build("gpt2")
    x = ids(T, 100)
    context, cache = _modes(enable)
    with plain_output_collector(), context:
        jm = thunder.jit(model, cache=cache)
        gc.collect()
        start = time.perf_counter()
        jm(input_ids=x).logits.sum().backward()
        seconds = time.perf_counter() - start
        assert thunder.cache_misses(jm) == 1
    return seconds


def _training_sequence(config: str, enable: bool, builder: str = "build") -> tuple[float, int]:
    import litgpt_workloads
    from litgpt_workloads import TRAINING_LENGTHS, training_input, training_step

    model = getattr(litgpt_workloads, builder)(config)
    inputs = [training_input(model, T) for T in TRAINING_LENGTHS]
    context, cache = _modes(enable)
    with context:
        jm = thunder.jit(model, cache=cache)
        start = time.perf_counter()
        for idx in inputs:
            training_step(jm, model, idx)
        return time.perf_counter() - start, thunder.cache_misses(jm)


def _decoding(config: str, enable: bool, steps: int, use_maxp1: bool = True) -> tuple[float, int]:
    from litgpt_workloads import decode, decode_calls, decode_models

    model, _ = decode_models(config)
    calls = decode_calls(model, steps=steps)
    context, cache = _modes(enable)
    with context:
        jm = thunder.jit(model, cache=cache)
        start = time.perf_counter()
        decode(jm, calls, use_maxp1=use_maxp1)
        return time.perf_counter() - start, thunder.cache_misses(jm)


def _hit_seconds(config: str, enable: bool, repeats: int, T: int = 32) -> float:
    import timeit

    import torch
    from litgpt_workloads import build, training_input

    model = build(config)
    idx = training_input(model, T)
    context, cache = _modes(enable)
    with context, torch.no_grad():
        jm = thunder.jit(model, cache=cache)
        jm(idx)
        times = timeit.repeat(lambda: jm(idx), number=20, repeat=repeats)
        assert thunder.cache_misses(jm) == 1, "every timed call must hit the cache"
    return statistics.median(times) / 20


def _ddp_sequence(config: str, enable: bool, timeout: float) -> tuple[float, float, dict[int, int]]:
    """(slowest rank's training-loop seconds, parent's wall seconds around the spawn, compiles per rank)."""
    from distributed_workloads import WORLD, run_ranks
    from litgpt_workloads import TRAINING_LENGTHS

    schedule = [[T] * WORLD for T in TRAINING_LENGTHS]
    cache = "symbolic values" if enable else "constant values"  # (the metatrace switch is the ranks')
    start = time.perf_counter()
    (report,) = run_ranks([("ddp", schedule, f"litgpt:{config}")], timeout, enable=enable, cache=cache,
                          collect=False, threads=1)
    wall = time.perf_counter() - start
    return max(seconds for _, _, seconds in report.values()), wall, {r: c for r, (_, c, _) in sorted(report.items())}


def _gpt2_sequence(enable: bool) -> tuple[float, int]:
    from hf_workloads import LENGTHS, build, ids, plain_output_collector

    model = build("gpt2")
    inputs = [ids(T, 100 + i) for i, T in enumerate(LENGTHS)]
    context, cache = _modes(enable)
    with plain_output_collector(), context:
        jm = thunder.jit(model, cache=cache)
        start = time.perf_counter()
        for x in inputs:
            model.zero_grad(set_to_none=True)
            jm(input_ids=x).logits.sum().backward()
        return time.perf_counter() - start, thunder.cache_misses(jm)


def _torch_compile_sequence(config: str, enable: bool) -> dict:
    """litgpt-train's sequence under ``torch_compile_ex``: seconds, thunder compiles, dynamo graphs
    compiled, regions of the forward and backward, and the median training step at T=32 on a hit."""
    import torch
    from litgpt_workloads import TRAINING_LENGTHS, build, training_input, training_step
    from thunder.executors.torch_compile import torch_compile_ex

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    model = build(config)
    inputs = [training_input(model, T) for T in TRAINING_LENGTHS]
    context, cache = _modes(enable)
    with context:
        jm = thunder.jit(model, cache=cache, executors=[torch_compile_ex, *thunder.get_default_executors()])
        start = time.perf_counter()
        for idx in inputs:
            training_step(jm, model, idx)
        seconds = time.perf_counter() - start
        hit = training_input(model, 32)
        steps = []
        for _ in range(5):
            t0 = time.perf_counter()
            training_step(jm, model, hit)
            steps.append(time.perf_counter() - t0)
        regions = tuple(sum(b.sym.is_fusion for b in traces[-1].bound_symbols)
                        for traces in (thunder.last_traces(jm), thunder.last_backward_traces(jm)))
        return {"seconds": seconds, "compiles": thunder.cache_misses(jm),
                "graphs": torch._dynamo.utils.counters["stats"]["unique_graphs"], "regions": regions,
                "hit": statistics.median(steps)}


def _ratio_line(label: str, stock: list, ours: list, unit: str = "s", scale: float = 1.0, fmt: str = ".2f") -> str:
    s, o = statistics.median(stock) * scale, statistics.median(ours) * scale
    return (f"{label} (median of {len(stock)}): stock constant values {s:{fmt}} {unit}, "
            f"metatrace symbolic values {o:{fmt}} {unit}, ratio {o / s:.3f}")


def bench_litgpt_compile(config: str, training_configs: list[str], repeats: int) -> None:
    for name in training_configs:
        stock, ours = _alternate(lambda enable: _first_call_seconds(name, True, enable), repeats)
        print(_ratio_line(f"litgpt {name} per-compile time, training step T=32", stock, ours) + "  (target <= 1.10)")
    stock, ours = _alternate(_gpt2_first_call_seconds, repeats)
    print(_ratio_line("HF GPT-2 (tiny) per-compile time, training step T=32", stock, ours) + "  (target <= 1.10)")
    stock, ours = _alternate(lambda enable: _first_call_seconds(config, False, enable), repeats)
    print(_ratio_line(f"litgpt {config} per-compile time, forward alone T=32", stock, ours))


def bench_litgpt_training(config: str, repeats: int) -> None:
    runs = _alternate(lambda enable: _training_sequence(config, enable), repeats)
    stock, ours = ([t for t, _ in side] for side in runs)
    (_, stock_compiles), (_, our_compiles) = runs[0][-1], runs[1][-1]
    print(_ratio_line(f"litgpt {config} training step over T=8,12,16,24,32,40,48,64, total", stock, ours)
          + f"; compiles: stock {stock_compiles}, metatrace {our_compiles}")


def bench_lora_training(config: str, repeats: int) -> None:
    runs = _alternate(lambda enable: _training_sequence(config, enable, "build_lora"), repeats)
    stock, ours = ([t for t, _ in side] for side in runs)
    (_, stock_compiles), (_, our_compiles) = runs[0][-1], runs[1][-1]
    print(_ratio_line(f"litgpt LoRA {config} finetuning step over T=8,12,16,24,32,40,48,64, total", stock, ours)
          + f"; compiles: stock {stock_compiles}, metatrace {our_compiles}  (target <= 0.35)")


def bench_ddp_training(config: str, repeats: int, timeout: float) -> None:
    runs = _alternate(lambda enable: _ddp_sequence(config, enable, timeout), repeats)
    stock, ours = ([loop for loop, _, _ in side] for side in runs)
    stock_wall, our_wall = (statistics.median(wall for _, wall, _ in side) for side in runs)
    (*_, stock_compiles), (*_, our_compiles) = runs[0][-1], runs[1][-1]
    print(_ratio_line(f"litgpt {config} ddp on 2 CPU ranks, training step over T=8,12,16,24,32,40,48,64, "
                      "slowest rank's loop", stock, ours)
          + f"; compiles per rank: stock {stock_compiles}, metatrace {our_compiles}; wall around the spawn: "
          f"stock {stock_wall:.2f} s, metatrace {our_wall:.2f} s  (target <= 0.35)")


def bench_gpt2_training(repeats: int) -> None:
    runs = _alternate(_gpt2_sequence, repeats)
    stock, ours = ([t for t, _ in side] for side in runs)
    (_, stock_compiles), (_, our_compiles) = runs[0][-1], runs[1][-1]
    print(_ratio_line("HF GPT-2 (tiny) training step over T=8,12,16,24,32, total", stock, ours)
          + f"; compiles: stock {stock_compiles}, metatrace {our_compiles}  (target <= 0.5)")


def bench_litgpt_decode(config: str, repeats: int, steps: int, stock_variants: str) -> None:
    ours = []
    stock = {True: [], False: []}
    variants = {"maxp1": (True,), "no-maxp1": (False,), "both": (True, False)}[stock_variants]
    compiles = {}
    for _ in range(repeats):
        for use_maxp1 in variants:
            gc.collect()
            seconds, compiles[("stock", use_maxp1)] = _decoding(config, False, steps, use_maxp1)
            stock[use_maxp1].append(seconds)
        gc.collect()
        seconds, compiles["ours"] = _decoding(config, True, steps)
        ours.append(seconds)
    for use_maxp1 in variants:
        how = "both with input_pos_maxp1" if use_maxp1 else "stock without input_pos_maxp1 (litgpt's ThunderModule path)"
        print(_ratio_line(f"litgpt {config} KV-cache decoding, prefill 8 + {steps} steps, {how}", stock[use_maxp1], ours)
              + f"; compiles: stock {compiles[('stock', use_maxp1)]}, metatrace {compiles['ours']}")


def bench_litgpt_hit(config: str, repeats: int) -> None:
    stock, ours = _alternate(lambda enable: _hit_seconds(config, enable, 15), repeats)
    print(_ratio_line(f"litgpt {config} cache-hit call, forward T=32 (no grad)", stock, ours, "ms", 1e3, ".2f")
          + "  (target <= 1.10)")


def _moe_sequence(jitted: bool) -> tuple[float, int]:
    """mixtral-like training over TRAINING_LENGTHS, metatrace-jitted or eager: seconds, compiles."""
    from litgpt_workloads import TRAINING_LENGTHS, build, training_input, training_step

    model = build("mixtral-like")
    inputs = [training_input(model, T) for T in TRAINING_LENGTHS]
    with metatrace.enable():
        fn = thunder.jit(model, cache="symbolic values") if jitted else model
        start = time.perf_counter()
        for idx in inputs:
            training_step(fn, model, idx)
        return time.perf_counter() - start, thunder.cache_misses(fn) if jitted else 0


def bench_moe_training(repeats: int) -> None:
    eager, ours = _alternate(_moe_sequence, repeats)
    compiles = ours[-1][1]
    print(_ratio_line("litgpt mixtral-like (MoE) training step over T=8,12,16,24,32,40,48,64, total",
                      [t for t, _ in eager], [t for t, _ in ours]).replace("stock constant values", "eager")
          + f"; metatrace compiles {compiles} (stock thunder cannot run it)")


def bench_torch_compile(config: str, repeats: int) -> None:
    stock, ours = _alternate(lambda enable: _torch_compile_sequence(config, enable), repeats)
    print(_ratio_line(f"litgpt {config} training step over T=8,12,16,24,32,40,48,64 under torch_compile_ex, total",
                      [r["seconds"] for r in stock], [r["seconds"] for r in ours]) + "  (target <= 0.2)")
    print(_ratio_line(f"litgpt {config} training step T=32 on a cache hit under torch_compile_ex",
                      [r["hit"] for r in stock], [r["hit"] for r in ours], "ms", 1e3) + "  (target <= 1.10)")
    s, o = stock[-1], ours[-1]
    print(f"  thunder compiles: stock {s['compiles']}, metatrace {o['compiles']} (target 1); dynamo graphs compiled "
          f"(inductor compiles): stock {s['graphs']}, metatrace {o['graphs']}; fusion regions (forward, backward): "
          f"stock {s['regions']}, metatrace {o['regions']} (target: stock's)")


GENERATE_PROMPTS = ((5, 1), (9, 1), (7, 2), (12, 2))  # (prompt length, batch)


def _generate_run(mode: str) -> dict:
    """Greedy ``generate`` of 16 new tokens over GENERATE_PROMPTS with a tiny Llama (2 layers),
    the forward run by ``mode``: "eager", "stock" (thunder.jit, constant values) or "metatrace"
    (symbolic values): total seconds, compiles, a later call's tokens per second, tokens."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    config = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config).eval()
    context, cache = _modes(mode == "metatrace")
    with context:
        if mode != "eager":
            model.forward = thunder.jit(model.forward, cache=cache)
        gen = lambda ids: model.generate(ids, max_new_tokens=16, do_sample=False, pad_token_id=0,  # noqa: E731
                                         attention_mask=torch.ones_like(ids))
        prompts = [torch.randint(1, 128, (b, t), generator=torch.Generator().manual_seed(i))
                   for i, (t, b) in enumerate(GENERATE_PROMPTS)]
        start = time.perf_counter()
        try:
            tokens = [gen(ids) for ids in prompts]
        except Exception as e:  # stock thunder's write-back of the cache's attributes
            return {"error": f"{type(e).__name__}: {str(e)[:90]}"}
        total = time.perf_counter() - start
        rates = []
        for _ in range(5):  # (the median of five later calls: one call of a few ms is noise)
            start = time.perf_counter()
            gen(prompts[-1])
            rates.append(16 * prompts[-1].shape[0] / (time.perf_counter() - start))
        rate = statistics.median(rates)
        compiles = thunder.cache_misses(model.forward) if mode != "eager" else 0
    return {"seconds": total, "compiles": compiles, "tokens/s": rate, "tokens": tokens}


def bench_hf_generate() -> None:
    runs = {mode: _generate_run(mode) for mode in ("eager", "stock", "metatrace")}
    ours, eager = runs["metatrace"], runs["eager"]
    same = all(a.equal(b) for a, b in zip(ours["tokens"], eager["tokens"])) if "tokens" in ours else False
    print(f"HF Llama generate (16 new tokens, prompts {GENERATE_PROMPTS}): metatrace {ours.get('seconds', 0):.1f} s, "
          f"{ours.get('compiles')} compiles, tokens {'equal to' if same else 'DIFFERENT from'} eager's; "
          f"later calls {ours.get('tokens/s', 0):.0f} tokens/s (median of 5) against eager's {eager['tokens/s']:.0f}; stock thunder: "
          + (runs["stock"]["error"] if "error" in runs["stock"] else
             f"{runs['stock']['seconds']:.1f} s, {runs['stock']['compiles']} compiles"))


def _hf_llama_workload(training: bool, T: int = 16, layers: int = 2, hidden: int = 32, intermediate: int = 64):
    """(model, step) of issue 38's tiny Hugging Face Llama: ``step(fn)`` runs the forward (under
    ``torch.no_grad()``) or the training step on ``fn``, the model or a compiled version of it.
    The depth section varies ``layers`` and uses issue 53's sizes (hidden 64, intermediate 128)."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=128, hidden_size=hidden, intermediate_size=intermediate,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2, use_cache=False)
    model = AutoModelForCausalLM.from_config(config).eval()
    x = torch.randint(0, 128, (2, T), generator=torch.Generator().manual_seed(0))

    def step(fn):
        if training:
            fn(input_ids=x).logits.sum().backward()
            return
        with torch.no_grad():
            fn(input_ids=x)

    return model, step


def _litgpt_training_workload(config: str, T: int = 32, layers: int = 2):
    """(model, step) of litgpt's training step on ``config`` (tests/litgpt_workloads.py's ``build``:
    2 layers, block size 128, seed 0; another ``layers`` the same config and seed at that depth)."""
    from litgpt_workloads import build, training_input, training_step

    if layers == 2:
        model = build(config)
    else:
        import torch
        from thunder.tests.litgpt_model import GPT, Config

        torch.manual_seed(0)
        model = GPT(Config.from_name(config, n_layer=layers, block_size=128))
    idx = training_input(model, T)
    return model, lambda fn: training_step(fn, model, idx)


def _compile_seconds(workload, mode: str) -> tuple[float, float]:
    """(first call, thunder's interpretation within it) of a fresh model compiled by ``mode``:
    "stock", "metatrace" or "aot_eager" (torch.compile; no interpretation figure)."""
    import torch
    from hf_workloads import plain_output_collector

    model, step = workload()
    if mode == "aot_eager":
        torch._dynamo.reset()
        compiled = torch.compile(model, backend="aot_eager")
        gc.collect()
        start = time.perf_counter()
        step(compiled)
        return time.perf_counter() - start, float("nan")
    context, cache = _modes(mode == "metatrace")
    with plain_output_collector(), context:
        jm = thunder.jit(model, cache=cache)
        gc.collect()
        start = time.perf_counter()
        step(jm)
        seconds = time.perf_counter() - start
        assert thunder.cache_misses(jm) == 1
    cs = thunder.compile_stats(jm)
    return seconds, (cs.last_trace_tracing_stop - cs.last_trace_tracing_start) / 1e9


def _fresh_first_call(mode: str) -> float:
    """The HF forward's first call in a new process of its own (``--fresh-first-call MODE``):
    one-time costs included (dynamo's and thunder's lazy initialization, caches filled on first
    use), as a user meets them and as issue 38 measured torch.compile; imports, ``enable()`` and
    the model's construction excluded."""
    import json
    import subprocess

    out = subprocess.run([sys.executable, __file__, "--fresh-first-call", mode], capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out.strip().splitlines()[-1])["seconds"]


def _run_fresh_first_call(mode: str) -> None:
    import json

    import torch._dynamo  # noqa: F401  (imported before the clock starts, as thunder is)

    if mode == "metatrace":
        with metatrace.enable():  # the rewritten metas loaded, as a user's enable() at startup
            pass
    seconds, _ = _compile_seconds(lambda: _hf_llama_workload(False), mode)
    print(json.dumps({"seconds": seconds}), flush=True)


def bench_compile(config: str, repeats: int) -> None:
    # every first call compiles: an entry an earlier run stored (the same model, seeded) would be
    # loaded from the entry cache instead
    os.environ["METATRACE_ENTRY_CACHE"] = "0"
    workloads = (
        ("HF Llama forward T=16", lambda: _hf_llama_workload(False), True),
        ("HF Llama training step T=16", lambda: _hf_llama_workload(True), False),
        (f"litgpt {config} training step T=32", lambda: _litgpt_training_workload(config), False),
    )
    for label, workload, with_torch_compile in workloads:
        modes = ("stock", "metatrace") + (("aot_eager",) if with_torch_compile else ())
        runs = {mode: [] for mode in modes}
        for _ in range(repeats):
            for mode in modes:
                gc.collect()
                runs[mode].append(_compile_seconds(workload, mode))
        med = {mode: (statistics.median(t for t, _ in r), statistics.median(i for _, i in r)) for mode, r in runs.items()}
        (stock, stock_interp), (ours, our_interp) = med["stock"], med["metatrace"]
        line = (f"{label} first call (median of {repeats}): stock constant values {stock:.2f} s (interpretation "
                f"{stock_interp:.2f} s, rest {stock - stock_interp:.2f} s), metatrace symbolic values {ours:.2f} s "
                f"(interpretation {our_interp:.2f} s, rest {ours - our_interp:.2f} s), ratio {ours / stock:.3f}"
                "  (target <= 0.5)")
        if with_torch_compile:
            line += f"; torch.compile aot_eager {med['aot_eager'][0]:.2f} s"
        print(line, flush=True)
    fresh = {mode: [] for mode in ("stock", "metatrace", "aot_eager")}
    for _ in range(repeats):
        for mode, seconds in fresh.items():
            seconds.append(_fresh_first_call(mode))
    med = {mode: statistics.median(seconds) for mode, seconds in fresh.items()}
    print(f"HF Llama forward T=16 first call in a new process each (median of {repeats}; one-time costs included): "
          f"stock {med['stock']:.2f} s, metatrace {med['metatrace']:.2f} s, torch.compile aot_eager "
          f"{med['aot_eager']:.2f} s; metatrace / aot_eager {med['metatrace'] / med['aot_eager']:.3f}  (target < 1)",
          flush=True)


WARM_START_MODES = ("metatrace-cold", "metatrace-warm", "aot_eager-cold", "aot_eager-warm")


def _warm_start_workloads(config: str) -> dict[str, tuple[str, tuple[int, ...]]]:
    """name: (label, sequence lengths: the timed first call's, then the others) of warm-start."""
    return {"hf-llama": ("HF Llama training step", (16, 24, 32)),
            f"litgpt-{config}": (f"litgpt {config} training step", (32, 16, 48))}


def _warm_start_workload(name: str):
    """(model, ``step(fn, T)``) of a warm-start workload: the training step at length T."""
    import torch

    if name == "hf-llama":
        model, _ = _hf_llama_workload(True)

        def step(fn, T):
            x = torch.randint(0, 128, (2, T), generator=torch.Generator().manual_seed(T))
            fn(input_ids=x).logits.sum().backward()

        return model, step
    from litgpt_workloads import build, training_input, training_step

    model = build(name.removeprefix("litgpt-"))
    return model, lambda fn, T: training_step(fn, model, training_input(model, T))


def _run_warm_start(spec: str) -> None:
    """One warm-start process (``--warm-start-run WORKLOAD:MODE:LENGTHS``): the first call timed,
    the other lengths run, compiles counted; a JSON line. The directories come in the environment
    (``METATRACE_ENTRY_CACHE_DIR``, ``TORCHINDUCTOR_CACHE_DIR``, ``BENCH_WARM_START_ARTIFACTS``)."""
    import json
    import os

    import torch
    import torch._dynamo  # noqa: F401  (imported before the clock starts, as thunder is)

    name, mode, lengths = spec.split(":")
    lengths = [int(T) for T in lengths.split(",")]
    model, step = _warm_start_workload(name)
    out = {}
    if mode.startswith("metatrace"):
        from hf_workloads import plain_output_collector

        from metatrace.entry_cache import entry_cache_stats

        with metatrace.enable():  # the rewritten metas loaded, as a user's enable() at startup
            pass
        with plain_output_collector(), metatrace.enable():
            jm = thunder.jit(model, cache="symbolic values")
            gc.collect()
            start = time.perf_counter()
            step(jm, lengths[0])
            out["first"] = time.perf_counter() - start
            out["first compiles"] = thunder.cache_misses(jm)
            for T in lengths[1:]:
                step(jm, T)
            out["compiles"] = thunder.cache_misses(jm)
            stats = entry_cache_stats(jm)
            if stats is None:
                out["note"] = "entry cache off"
            else:
                out.update(loaded=stats.loaded, stored=stats.stored, load=stats.load_seconds,
                           kept_local=stats.kept_local[:3], skipped=stats.skipped[:3])
            entries = Path(os.environ["METATRACE_ENTRY_CACHE_DIR"])  # the program keys stored under
            out["keys"] = sorted(p.name for p in entries.iterdir() if p.is_dir()) if entries.is_dir() else []
    else:
        artifacts = Path(os.environ["BENCH_WARM_START_ARTIFACTS"])
        torch._dynamo.reset()
        counters = torch._dynamo.utils.counters
        counters.clear()
        compiled = torch.compile(model, backend="aot_eager")
        gc.collect()
        start = time.perf_counter()
        if mode == "aot_eager-warm":
            data = artifacts.read_bytes()  # empty: the cold process had nothing to save
            info = torch.compiler.load_cache_artifacts(data) if data else None
            out["load"] = time.perf_counter() - start
            out["artifacts"] = {kind: len(keys) for kind, keys in info.artifacts.items()} if info else {}
        step(compiled, lengths[0])
        out["first"] = time.perf_counter() - start
        out["first compiles"] = counters["stats"]["unique_graphs"]
        for T in lengths[1:]:
            step(compiled, T)
        out["compiles"] = counters["stats"]["unique_graphs"]
        if mode == "aot_eager-cold":
            saved = torch.compiler.save_cache_artifacts()
            data, info = saved if saved is not None else (b"", None)
            artifacts.write_bytes(data)
            out["artifacts"] = {kind: len(keys) for kind, keys in info.artifacts.items()} if info else {}
            out["artifact bytes"] = len(data)
    print(json.dumps(out), flush=True)


def _warm_start_process(name: str, mode: str, lengths: tuple[int, ...], tmp: Path) -> dict:
    """``mode``'s process on workload ``name`` with its directories under ``tmp`` (a repeat's: the
    warm processes find what the cold ones left there); its JSON, and its wall time."""
    import os

    tool = mode.split("-")[0]
    tmp.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, METATRACE_ENTRY_CACHE="1" if tool == "metatrace" else "0",
               METATRACE_ENTRY_CACHE_DIR=str(tmp / "entries"),  # never the user's ~/.cache/metatrace/entries
               TORCHINDUCTOR_CACHE_DIR=str(tmp / f"inductor-{mode}"),  # fresh for each process
               BENCH_WARM_START_ARTIFACTS=str(tmp / "mega-cache.bin"),
               # a job id turns dynamo's PGO on (without one it records nothing), the only thing
               # Mega-Cache saves for aot_eager; the same id in the cold and the warm process
               TORCH_COMPILE_JOB_ID=f"bench-warm-start-{name}")
    return _child_process("--warm-start-run", f"{name}:{mode}:{','.join(map(str, lengths))}", env,
                          f"warm-start {name} {mode}")


def _child_process(flag: str, arg: str, env: dict, what: str) -> dict:
    """One measurement in a fresh process (``bench.py <flag> <arg>`` under ``env``): the JSON of its
    last line of output, with the process's wall time as ``process``; raises with its stderr."""
    import json
    import subprocess

    start = time.perf_counter()
    done = subprocess.run([sys.executable, __file__, flag, arg], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if done.returncode:
        raise RuntimeError(f"{what} failed:\n{done.stderr[-3000:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    out["process"] = wall
    return out


def bench_warm_start(config: str, repeats: int) -> None:
    import tempfile

    workloads = _warm_start_workloads(config)
    runs = {(name, mode): [] for name in workloads for mode in WARM_START_MODES}
    for _ in range(repeats):
        for name, (_, lengths) in workloads.items():
            with tempfile.TemporaryDirectory(prefix="bench-warm-start-") as tmp:
                for attempt in range(3):  # metatrace's pair again if its source changed in between
                    entries = Path(tmp) / f"metatrace-{attempt}"
                    cold, warm = (_warm_start_process(name, mode, lengths, entries) for mode in WARM_START_MODES[:2])
                    if warm.get("loaded") or len(warm.get("keys", ())) < 2:
                        break
                    print(f"  ({name}: the program key changed between metatrace's cold and warm processes, "
                          "metatrace's source edited meanwhile; the pair runs again)", flush=True)
                runs[name, "metatrace-cold"].append(cold)
                runs[name, "metatrace-warm"].append(warm)
                for mode in WARM_START_MODES[2:]:
                    runs[name, mode].append(_warm_start_process(name, mode, lengths, Path(tmp)))
    print(f"warm start: first call of a new process (median of {repeats}; the process's wall time, imports included, "
          "beside it), compiles over the three lengths (the first call's in parentheses)")
    print(f"  {'workload':<44} {'mode':<16} {'first call (s)':>14} {'process (s)':>11} {'compiles':>10}  notes")
    med = {}
    for (name, mode), results in runs.items():
        label, lengths = workloads[name]
        med[name, mode] = first = statistics.median(r["first"] for r in results)
        process = statistics.median(r["process"] for r in results)
        compiles = "/".join(sorted({f"{r['compiles']} ({r['first compiles']})" for r in results}))
        last = results[-1]
        if mode.startswith("metatrace"):
            notes = (f"entries loaded {'/'.join(str(r.get('loaded')) for r in results)}, "
                     f"stored {'/'.join(str(r.get('stored')) for r in results)}")
            if last.get("load"):
                notes += f", load {statistics.median(r['load'] for r in results):.3f} s"
            for key in ("kept_local", "skipped", "note"):
                if last.get(key):
                    notes += f"; {key}: {last[key]}"
            if mode == "metatrace-warm" and any(len(r.get("keys", ())) > 1 for r in results):
                # a second program key: metatrace's source (or the model's) changed between the processes
                notes += "; the program key changed between cold and warm in some repeat (a source edited?)"
        else:
            notes = f"artifacts {last.get('artifacts')}"
            if "artifact bytes" in last:
                notes += f", {last['artifact bytes']} bytes"
            if "load" in last:
                notes += f", load {statistics.median(r['load'] for r in results):.3f} s"
        print(f"  {label + ' T=' + ','.join(map(str, lengths)):<44} {mode:<16} {first:>14.3f} {process:>11.2f} "
              f"{compiles:>10}  {notes}", flush=True)
    for name, (label, _) in workloads.items():
        warm, cold, aot_warm = med[name, "metatrace-warm"], med[name, "metatrace-cold"], med[name, "aot_eager-warm"]
        print(f"{label} first call in a new process (median of {repeats}): metatrace warm {warm:.3f} s / metatrace cold "
              f"{cold:.3f} s, ratio {warm / cold:.3f}; metatrace warm / torch.compile aot_eager warm {aot_warm:.3f} s, "
              f"ratio {warm / aot_warm:.3f}  (target < 1)", flush=True)


THUNDERFX_MODES = ("thunder.jit+metatrace", "aot_eager", "thunderfx+metatrace", "thunderfx-stock")
THUNDERFX_LENGTHS = (8, 12, 16, 24, 32)


def _thunderfx_workload(name: str):
    """(model, ``step(fn, T)``) of a thunderfx workload: the training step at length T (HF Llama's
    input ids drawn per length, as warm-start's; litgpt's from litgpt_workloads)."""
    if name == "hf-llama":
        return _warm_start_workload("hf-llama")
    from litgpt_workloads import build, training_input, training_step

    model = build(name.removeprefix("litgpt-"))
    return model, lambda fn, T: training_step(fn, model, training_input(model, T))


def _run_thunderfx(spec: str) -> None:
    """One thunderfx process (``--thunderfx-run WORKLOAD:MODE``): the training step over
    THUNDERFX_LENGTHS on a fresh compiled model, the total wall time (compiles included), the first
    call's, Dynamo graphs, thunder compiles and what the splitter sent elsewhere; a JSON line."""
    import json

    import torch
    import torch._dynamo  # noqa: F401  (imported before the clock starts, as thunder is)
    from hf_workloads import plain_output_collector

    name, mode = spec.split(":")
    model, step = _thunderfx_workload(name)
    enable = mode in ("thunder.jit+metatrace", "thunderfx+metatrace")
    if enable:
        with metatrace.enable():  # the rewritten metas loaded, as a user's enable() at startup
            pass
    torch._dynamo.reset()
    counters = torch._dynamo.utils.counters
    counters.clear()
    out, backend = {}, None
    with plain_output_collector(), (metatrace.enable() if enable else contextlib.nullcontext()):
        if mode == "thunder.jit+metatrace":
            compiled = thunder.jit(model, cache="symbolic values")
        elif mode == "aot_eager":
            compiled = torch.compile(model, backend="aot_eager")
        else:  # default options: under metatrace dynamic=True and symbolic values, stock's otherwise
            from thunder.dynamo import thunderfx

            compiled = thunderfx(model)
            backend = compiled._backend
        gc.collect()
        start = time.perf_counter()
        for i, T in enumerate(THUNDERFX_LENGTHS):
            step(compiled, T)
            if not i:
                out["first"] = time.perf_counter() - start
        out["seconds"] = time.perf_counter() - start
    if mode == "thunder.jit+metatrace":
        out["compiles"], out["graphs"] = thunder.cache_misses(compiled), None
    else:
        out["graphs"] = counters["stats"]["unique_graphs"]
        out["compiles"] = None
    if backend is not None:
        infos = backend.subgraph_infos
        out["compiles"] = sum(thunder.cache_misses(fn) for info in infos for fn in info.thunder_compiled_fns)
        out["backend calls"] = len(infos)
        out["thunder subgraphs"] = sum(len(info.thunder_compiled_fns) for info in infos)
        out["inductor subgraphs"] = sum(
            sum(1 for c in info.submodule_to_compiled_functions.values() if c.compiler.name != "THUNDER")
            for info in infos)
        reasons = {}
        for info in infos:
            for reason in info.split_reasons:
                key = f"{reason.reason_type.name}: {reason.info}"[:160]
                reasons[key] = reasons.get(key, 0) + 1
        out["split reasons"] = reasons
    print(json.dumps(out), flush=True)


def _thunderfx_process(name: str, mode: str) -> dict:
    """``mode``'s process on workload ``name``; its JSON, and its wall time. Every compile happens:
    metatrace's entry cache off, inductor's cache a fresh empty directory (ThunderFX sends the
    partitions thunder refuses to inductor: a user's first run compiles them)."""
    import os
    import tempfile

    with tempfile.TemporaryDirectory(prefix="bench-thunderfx-inductor-") as inductor:
        env = dict(os.environ, METATRACE_ENTRY_CACHE="0", TORCHINDUCTOR_CACHE_DIR=inductor)
        return _child_process("--thunderfx-run", f"{name}:{mode}", env, f"thunderfx {name} {mode}")


def bench_thunderfx(config: str, repeats: int, workloads: list[str]) -> None:
    """ThunderFX against thunder.jit and aot_eager over the same lengths (section 17).

    Where ThunderFX + metatrace's first step goes (tools/thunderfx_profile.py, T=8, 2 shared cores;
    the earlier causes, inductor's compiles of refused partitions and a restarted first backend
    call, are gone: one thunder subgraph per Dynamo graph). HF Llama, 9.7 s against thunder.jit +
    metatrace's 6.6 s (interpretation 4.1 s): Dynamo's capture up to the backend 2.6 s; the
    splitter 2.0 s, nearly all trial runs of a node's symbol (its meta, and its vjp where grad is
    required), since metatrace.thunderfx runs one per graph and signature (85 of 175 nodes; litgpt
    41 of 148: 1.63 s -> 0.71 s); the thunder subgraph's compile 3.8 s (interpretation 2.1 s,
    passes and the first forward 1.7 s), less than thunder.jit's whole compile of the same model;
    and a second frame (transformers' output capturing sets a ContextVar: a graph break, the
    lm_head resumed in a frame of its own) 0.9 s of Dynamo tracing and 0.2 s of thunder. litgpt,
    5.8 s against 3.2 s: Dynamo 0.9 s, splitter 1.6 s (0.7 s now), subgraph 2.7 s (interpretation
    1.3 s, as thunder.jit's 1.3 s). What stays above thunder.jit is Dynamo's own capture. On hits
    (the training step at lengths already seen, interleaved rounds in one process, medians) ThunderFX
    costs what thunder.jit does: HF Llama 62 ms against 65 ms (eager 60 ms), litgpt 68 ms against
    75 ms (eager 58 ms): Dynamo's guards and thunder's prologue are not where the difference is.
    The steps at new lengths run matmuls on new shapes, whose cost on this host varies by seconds
    from run to run in every mode (eager too): compare totals of one run only.
    """
    labels = {"hf-llama": "HF Llama training step", f"litgpt-{config}": f"litgpt {config} training step"}
    names = [n if n == "hf-llama" else f"litgpt-{config}" for n in workloads]
    runs = {(name, mode): [] for name in names for mode in THUNDERFX_MODES}
    for _ in range(repeats):
        for name in names:
            for mode in THUNDERFX_MODES:
                runs[name, mode].append(_thunderfx_process(name, mode))
    lengths = ",".join(map(str, THUNDERFX_LENGTHS))
    print(f"thunderfx: training step over T={lengths} on a fresh compiled model, a new process per mode (median of "
          f"{repeats}; the entry cache off); total wall time of the {len(THUNDERFX_LENGTHS)} steps, compiles included "
          "(the first step's beside it)")
    print(f"  {'workload':<34} {'mode':<22} {'dynamo graphs':>13} {'thunder compiles':>16} {'total (s)':>9} "
          f"{'first (s)':>9}  notes")
    med = {}
    for (name, mode), results in runs.items():
        med[name, mode] = total = statistics.median(r["seconds"] for r in results)
        first = statistics.median(r["first"] for r in results)
        last = results[-1]
        graphs = "-" if last["graphs"] is None else "/".join(sorted({str(r["graphs"]) for r in results}))
        compiles = "-" if last["compiles"] is None else "/".join(sorted({str(r["compiles"]) for r in results}))
        notes = ""
        if "thunder subgraphs" in last:
            notes = (f"backend calls {last['backend calls']}, thunder subgraphs {last['thunder subgraphs']}, "
                     f"inductor subgraphs {last['inductor subgraphs']}")
            if last["split reasons"]:
                notes += "; split: " + "; ".join(f"{n}x {r}" for r, n in list(last["split reasons"].items())[:3])
        print(f"  {labels[name]:<34} {mode:<22} {graphs:>13} {compiles:>16} {total:>9.2f} {first:>9.2f}  {notes}",
              flush=True)
    for name in names:
        ours, jit = med[name, "thunderfx+metatrace"], med[name, "thunder.jit+metatrace"]
        stock, aot = med[name, "thunderfx-stock"], med[name, "aot_eager"]
        print(f"{labels[name]} over T={lengths} (median of {repeats}): ThunderFX+metatrace {ours:.2f} s / "
              f"thunder.jit+metatrace {jit:.2f} s, ratio {ours / jit:.3f}  (goal <= 1); / ThunderFX stock "
              f"{stock:.2f} s, ratio {ours / stock:.3f}; / torch.compile aot_eager {aot:.2f} s, ratio {ours / aot:.3f}",
              flush=True)


# "unstamped": metatrace with every block interpreted (METATRACE_STAMP_BLOCKS=0), beside the
# default that stamps a list's later blocks from its first (metatrace.interpret.modules.repeated_blocks)
DEPTH_MODES = ("metatrace", "unstamped", "stock", "aot_eager")


def _depth_workloads(config: str) -> dict[str, str]:
    """name: label of the depth section's workloads."""
    return {"hf-llama": "HF Llama training step T=16", f"litgpt-{config}": f"litgpt {config} training step T=32"}


def _depth_workload(name: str, layers: int):
    """(model, step) of a depth workload at ``layers`` layers: issue 53's HF Llama (hidden 64,
    intermediate 128, 4 heads, 2 kv heads, vocab 128, ``use_cache=False``) training step at T=16,
    or litgpt's training step at T=32."""
    if name == "hf-llama":
        return _hf_llama_workload(True, T=16, layers=layers, hidden=64, intermediate=128)
    return _litgpt_training_workload(name.removeprefix("litgpt-"), T=32, layers=layers)


def _run_depth(spec: str) -> None:
    """One depth process (``--depth-run WORKLOAD:LAYERS:MODE``): ``_compile_seconds`` of the
    workload at that depth, a JSON line (``first``, ``interpretation``; ``error`` where stock
    thunder cannot run the model)."""
    import json

    import torch._dynamo  # noqa: F401  (imported before the clock starts, as thunder is)

    name, layers, mode = spec.split(":")
    if mode == "unstamped":
        mode = "metatrace"  # (its process has METATRACE_STAMP_BLOCKS=0)
    if mode == "metatrace":
        with metatrace.enable():  # the rewritten metas loaded, as a user's enable() at startup
            pass
    try:
        first, interpretation = _compile_seconds(lambda: _depth_workload(name, int(layers)), mode)
    except Exception as e:  # noqa: BLE001
        if mode != "stock":
            raise
        out = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"}
    else:
        out = {"first": first, "interpretation": None if mode == "aot_eager" else interpretation}
    print(json.dumps(out), flush=True)


def _depth_process(name: str, layers: int, mode: str) -> dict:
    """``mode``'s process on workload ``name`` at ``layers`` layers; its JSON and its wall time.
    Every compile happens (the entry cache off, a fresh empty TORCHINDUCTOR_CACHE_DIR). A stock
    process that dies is a row's note, not a failure of the section."""
    import os
    import tempfile

    with tempfile.TemporaryDirectory(prefix="bench-depth-inductor-") as inductor:
        env = dict(os.environ, METATRACE_ENTRY_CACHE="0", TORCHINDUCTOR_CACHE_DIR=inductor,
                   METATRACE_STAMP_BLOCKS="0" if mode == "unstamped" else "1")
        try:
            return _child_process("--depth-run", f"{name}:{layers}:{mode}", env, f"depth {name} {layers} {mode}")
        except RuntimeError as e:
            if mode != "stock":
                raise
            return {"error": str(e).strip().splitlines()[-1][:200]}


def _slope(points: list[tuple[int, float]]) -> float:
    """Least-squares seconds per layer through (layers, seconds)."""
    mx = statistics.mean(x for x, _ in points)
    my = statistics.mean(y for _, y in points)
    return sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)


def bench_depth(config: str, depths: list[int], repeats: int, modes: tuple = DEPTH_MODES) -> None:
    """How the first call grows with depth (issue 53): a fresh process per measurement (section 18)."""
    workloads = _depth_workloads(config)
    runs = {(name, layers, mode): [] for name in workloads for layers in depths for mode in modes}
    for repeat in range(repeats):
        for layers in depths:
            for name in workloads:
                for mode in modes:
                    r = _depth_process(name, layers, mode)
                    runs[name, layers, mode].append(r)
                    done = (f"first call {r['first']:.2f} s" if "first" in r else f"failed: {r['error']}")
                    print(f"  (depth {repeat + 1}/{repeats}: {name} {layers} layers {mode}: {done}; "
                          f"process {r['process']:.1f} s)" if "process" in r else
                          f"  (depth {repeat + 1}/{repeats}: {name} {layers} layers {mode}: {done})", flush=True)
    print(f"depth: the first call of a fresh model in a new process per measurement (median of {repeats}; imports, "
          "enable() and the model's construction excluded; the entry cache off); thunder's interpretation "
          "(compile_stats' tracing interval) and the rest (passes, grad transform, the run)")
    print(f"  {'workload':<40} {'layers':>6} {'mode':<10} {'first call (s)':>14} {'interpretation (s)':>18} "
          f"{'rest (s)':>9} {'process (s)':>11}  notes")
    med = {}  # (name, layers, mode): (first, interpretation or None), absent where it failed
    for (name, layers, mode), results in runs.items():
        ok = [r for r in results if "first" in r]
        errors = sorted({r["error"] for r in results if "error" in r})
        notes = ("; ".join(f"stock thunder cannot run it: {e}" for e in errors)
                 + (f" ({len(ok)} of {len(results)} ran)" if ok and errors else ""))
        if not ok:
            print(f"  {workloads[name]:<40} {layers:>6} {mode:<10} {'-':>14} {'-':>18} {'-':>9} {'-':>11}  {notes}",
                  flush=True)
            continue
        first = statistics.median(r["first"] for r in ok)
        process = statistics.median(r["process"] for r in ok)
        interp = None if ok[0]["interpretation"] is None else statistics.median(r["interpretation"] for r in ok)
        med[name, layers, mode] = (first, interp)
        interp_s, rest_s = ("-", "-") if interp is None else (f"{interp:.2f}", f"{first - interp:.2f}")
        print(f"  {workloads[name]:<40} {layers:>6} {mode:<10} {first:>14.2f} {interp_s:>18} {rest_s:>9} "
              f"{process:>11.1f}  {notes}", flush=True)
    base = min(depths)
    for name, label in workloads.items():
        parts = []
        ours = {d: med[name, d, "metatrace"][0] for d in depths if (name, d, "metatrace") in med}
        for d in depths:
            if d != base and d in ours and base in ours:
                target = "  (target <= 1.5)" if (base, d) == (2, 8) else ""
                parts.append(f"metatrace {d}-layer / {base}-layer {ours[d] / ours[base]:.3f}{target}")
        aot = {d: med[name, d, "aot_eager"][0] for d in depths if (name, d, "aot_eager") in med}
        if len(ours) >= 2 and len(aot) >= 2:
            s_ours, s_aot = _slope(sorted(ours.items())), _slope(sorted(aot.items()))
            steps = ", ".join(
                f"{a}->{b}: {(ours[b] - ours[a]) / (b - a):.2f} s against {(aot[b] - aot[a]) / (b - a):.2f} s"
                for a, b in zip(depths, depths[1:]) if a in ours and b in ours and a in aot and b in aot)
            parts.append(f"cost per added layer (least squares over {','.join(map(str, sorted(ours)))} layers): "
                         f"metatrace {s_ours:.2f} s, aot_eager {s_aot:.2f} s, ratio {s_ours / s_aot:.2f}  "
                         f"(target <= 1; per interval {steps})")
        for d in depths:
            if (name, d, "metatrace") in med and (name, d, "unstamped") in med:
                parts.append(f"stamping at {d} layers: first call {med[name, d, 'metatrace'][0]:.2f} s against "
                             f"{med[name, d, 'unstamped'][0]:.2f} s with every block interpreted, ratio "
                             f"{med[name, d, 'metatrace'][0] / med[name, d, 'unstamped'][0]:.3f}")
        for d in depths:
            if (name, d, "metatrace") not in med:
                continue
            first, interp = med[name, d, "metatrace"]
            target = "  (target <= 1)" if d in (2, 8) and name.startswith("litgpt") else ""
            if (name, d, "stock") in med:
                stock_first, stock_interp = med[name, d, "stock"]
                parts.append(f"passes' share (first call - interpretation) at {d} layers: metatrace "
                             f"{first - interp:.2f} s / stock {stock_first - stock_interp:.2f} s, ratio "
                             f"{(first - interp) / (stock_first - stock_interp):.3f}{target}")
            else:
                parts.append(f"passes' share at {d} layers: metatrace {first - interp:.2f} s, stock n/a "
                             "(stock thunder cannot run it)")
        print(f"{label} (median of {repeats}):")
        for part in parts:
            print(f"  {part}", flush=True)


SECTIONS = ("codegen", "tracing", "prologue", "nanogpt", "litgpt-compile", "litgpt-train", "litgpt-decode", "litgpt-hit",
            "lora-train", "ddp-train", "gpt2-train", "torch-compile", "moe-train", "compile", "hf-generate",
            "warm-start", "thunderfx", "depth")


def _selected(only: str | None, skip: str | None) -> list[str]:
    def expand(names: str) -> set[str]:
        out = set()
        for name in filter(None, (n.strip() for n in names.split(","))):
            matched = [s for s in SECTIONS if s == name or s.startswith(name)]
            if not matched:
                raise SystemExit(f"unknown section {name!r}; sections: {', '.join(SECTIONS)}")
            out.update(matched)
        return out

    chosen = expand(only) if only else set(SECTIONS)
    chosen -= expand(skip) if skip else set()
    return [s for s in SECTIONS if s in chosen]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=2, help="opinfo samples per op")
    parser.add_argument("--repeats", type=int, default=3, help="codegen repetitions")
    parser.add_argument("--gpt-repeats", type=int, default=3, help="nanoGPT sequence repetitions (0: skip)")
    parser.add_argument("--only", help=f"comma-separated sections (or prefixes, e.g. litgpt) to run: {', '.join(SECTIONS)}")
    parser.add_argument("--skip", help="comma-separated sections (or prefixes) to leave out")
    parser.add_argument("--litgpt-config", default="llama2-like", help="thunder litgpt testing config (2 layers)")
    parser.add_argument("--compile-configs", default="llama2-like,falcon-7b-like,gpt-neox-like",
                        help="litgpt configs of litgpt-compile's training step (comma-separated)")
    parser.add_argument("--litgpt-repeats", type=int, default=3, help="stock/metatrace alternations per litgpt section")
    parser.add_argument("--decode-steps", type=int, default=32, help="decode steps after the 8-token prefill")
    parser.add_argument("--decode-stock", choices=("maxp1", "no-maxp1", "both"), default="both",
                        help="stock decoding with input_pos_maxp1 (recompiles every step), without, or both")
    parser.add_argument("--torch-compile-repeats", type=int, default=1,
                        help="stock/metatrace alternations of torch-compile (stock: about 8 minutes each)")
    parser.add_argument("--compile-repeats", type=int, default=3,
                        help="stock/metatrace alternations of the compile section")
    parser.add_argument("--ddp-timeout", type=float, default=1800,
                        help="seconds to wait for each ddp rank's report before giving up (a hang)")
    parser.add_argument("--warm-start-repeats", type=int, default=3,
                        help="repetitions of the warm-start section's four processes per workload")
    parser.add_argument("--fresh-first-call", choices=("stock", "metatrace", "aot_eager"),
                        help=argparse.SUPPRESS)  # the compile section's measurement in a new process
    parser.add_argument("--warm-start-run", help=argparse.SUPPRESS)  # one of warm-start's processes
    parser.add_argument("--thunderfx-repeats", type=int, default=3,
                        help="repetitions of the thunderfx section's four processes per workload")
    parser.add_argument("--thunderfx-workloads", default="hf-llama,litgpt",
                        help="thunderfx's workloads (comma-separated): hf-llama, litgpt (--litgpt-config)")
    parser.add_argument("--thunderfx-run", help=argparse.SUPPRESS)  # one of thunderfx's processes
    parser.add_argument("--depth-layers", default="2,8,16",
                        help="the depth section's layer counts (comma-separated; issue 53's targets read 2 and 8)")
    parser.add_argument("--depth-modes", default=",".join(DEPTH_MODES),
                        help="the depth section's modes (comma-separated): metatrace, unstamped, stock, aot_eager")
    parser.add_argument("--depth-repeats", type=int, default=1,
                        help="repetitions of the depth section's processes (modes alternate)")
    parser.add_argument("--depth-run", help=argparse.SUPPRESS)  # one of depth's processes
    args = parser.parse_args()
    if args.fresh_first_call:
        return _run_fresh_first_call(args.fresh_first_call)
    if args.warm_start_run:
        return _run_warm_start(args.warm_start_run)
    if args.thunderfx_run:
        return _run_thunderfx(args.thunderfx_run)
    if args.depth_run:
        return _run_depth(args.depth_run)
    sections = _selected(args.only, args.skip)
    if not args.gpt_repeats and "nanogpt" in sections:
        sections.remove("nanogpt")

    with metatrace.enable():  # warm: cache generated and loaded, first-use costs paid
        pass
    if "codegen" in sections:
        print(f"codegen (generate, median of {args.repeats}): {bench_codegen(args.repeats):.2f} s  (target < 3 s)")
    if "tracing" in sections:
        off, on, median_ratio, count = bench_tracing(args.samples)
        print(f"trace construction over {count} opinfo samples: stock {off:.2f} s, metatrace {on:.2f} s, "
              f"ratio of totals {on / off:.3f}, median per-sample ratio {median_ratio:.3f}  (target <= 1.10)")
    if "prologue" in sections:
        for label, stock, ours in bench_prologue(args.repeats * 5):
            print(f"prologue on a cache hit, {label}: stock {stock * 1e6:.1f} us, metatrace {ours * 1e6:.1f} us, "
                  f"ratio {ours / stock:.3f}  (target <= 1.0)")
    if "nanogpt" in sections:
        stock, ours, stock_compiles, our_compiles = bench_nanogpt(args.gpt_repeats)
        print(f"nanoGPT eval + training step over T=8..64 (median of {args.gpt_repeats}): stock constant values "
              f"{stock:.1f} s ({stock_compiles} compiles), metatrace symbolic values {ours:.1f} s "
              f"({our_compiles} compiles), ratio {ours / stock:.3f}")
    config, repeats = args.litgpt_config, args.litgpt_repeats
    if "litgpt-compile" in sections:
        bench_litgpt_compile(config, args.compile_configs.split(","), repeats)
    if "litgpt-train" in sections:
        bench_litgpt_training(config, repeats)
    if "litgpt-decode" in sections:
        bench_litgpt_decode(config, repeats, args.decode_steps, args.decode_stock)
    if "litgpt-hit" in sections:
        bench_litgpt_hit(config, repeats)
    if "lora-train" in sections:
        bench_lora_training(config, repeats)
    if "ddp-train" in sections:
        bench_ddp_training(config, repeats, args.ddp_timeout)
    if "gpt2-train" in sections:
        bench_gpt2_training(repeats)
    if "torch-compile" in sections:
        bench_torch_compile(config, args.torch_compile_repeats)
    if "moe-train" in sections:
        bench_moe_training(repeats)
    if "compile" in sections:
        bench_compile(config, args.compile_repeats)
    if "hf-generate" in sections:
        bench_hf_generate()
    if "warm-start" in sections:
        bench_warm_start(config, args.warm_start_repeats)
    if "thunderfx" in sections:
        bench_thunderfx(config, args.thunderfx_repeats, args.thunderfx_workloads.split(","))
    if "depth" in sections:
        bench_depth(config, sorted(int(d) for d in args.depth_layers.split(",")), args.depth_repeats,
                    tuple(m for m in DEPTH_MODES if m in args.depth_modes.split(",")))


if __name__ == "__main__":
    main()
