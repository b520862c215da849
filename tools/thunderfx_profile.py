#!/usr/bin/env python
"""Where ThunderFX's compile goes under metatrace: one process, one training step (the first call).

    python tools/thunderfx_profile.py [--workload hf-llama|litgpt-CONFIG] [--T 8] [--prof FILE]
                                      [--mode thunderfx+metatrace|thunderfx-stock|thunder.jit+metatrace]

Without ``--prof``: a phase split of the first call, from a timeline of hooks (no profiler
running): Dynamo's capture (``torch._dynamo.utils.compile_times``, and the time from the call to
the backend), the backend's work per Dynamo graph (the splitter: ``is_node_supported_by_thunder`` and how
many trial runs of a node's symbol it made, ``split_module``, the deepcopy; ``torch._inductor.compile`` of every unsupported partition, timed
one by one), and each thunder subgraph's first call (``thunder.compile_stats``: the whole call, and
thunder's interpretation within it), the split reasons, and what remains (the backward run).
With ``--prof FILE``: the same first call under cProfile, the stats written to FILE and the top
entries printed by cumulative and by own time. METATRACE_ENTRY_CACHE=0 is set here (every compile
happens), and TORCHINDUCTOR_CACHE_DIR is a fresh empty directory unless ``--warm-inductor-cache``
(inductor's compiles of the partitions thunder refuses happen too). The workloads are
tools/bench.py's thunderfx section's.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import sys
import time
from pathlib import Path

os.environ["METATRACE_ENTRY_CACHE"] = "0"
if "--warm-inductor-cache" not in sys.argv:  # inductor's compiles happen too, as in a user's first run
    import tempfile

    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="thunderfx-profile-inductor-")
sys.path[:0] = [str(Path(__file__).resolve().parent)]

import bench  # noqa: E402  (this checkout's metatrace and tests/ on sys.path, thunder imported)
import metatrace  # noqa: E402
import thunder  # noqa: E402


def _hooks(events: list) -> contextlib.ExitStack:
    """Timestamped events of ThunderCompiler.__call__, the splitter and torch._inductor.compile."""
    import torch
    import thunder.dynamo.compiler as compiler

    stack = contextlib.ExitStack()

    def timed(owner, name, label):
        original = getattr(owner, name)

        def wrapper(*args, **kwargs):
            start, error = time.perf_counter(), None
            try:
                return original(*args, **kwargs)
            except BaseException as e:
                error = f"{type(e).__name__}: {str(e)[:200]}"
                raise
            finally:
                events.append((label, start, time.perf_counter(), error))

        setattr(owner, name, wrapper)
        stack.callback(setattr, owner, name, original)

    timed(compiler.ThunderCompiler, "__call__", "backend")
    timed(compiler, "_splitter", "splitter")
    timed(torch._inductor, "compile", "inductor")
    import thunder.dynamo.splitter as splitter

    timed(splitter, "is_node_supported_by_thunder", "support check")
    import thunder.dynamo.utils as utils

    # (made once per trial run of a node's symbol: metatrace runs one per graph and signature)
    timed(utils, "get_proxy_inputs_from_node", "trial run")
    timed(splitter, "split_module", "split_module")
    # the splitter's own deepcopy (its module's ``copy`` replaced: deepcopy's recursion stays untimed)
    import copy
    import types

    stack.callback(setattr, splitter, "copy", splitter.copy)
    splitter.copy = types.SimpleNamespace(deepcopy=copy.deepcopy, copy=copy.copy)
    timed(splitter.copy, "deepcopy", "deepcopy")
    return stack


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="hf-llama")
    parser.add_argument("--mode", default="thunderfx+metatrace",
                        choices=("thunderfx+metatrace", "thunderfx-stock", "thunder.jit+metatrace"))
    parser.add_argument("--T", type=int, default=8)
    parser.add_argument("--prof", help="write cProfile stats of the first call here")
    parser.add_argument("--top", type=int, default=45)
    parser.add_argument("--warm-inductor-cache", action="store_true",
                        help="keep TORCHINDUCTOR_CACHE_DIR (default: a fresh empty one)")
    args = parser.parse_args()

    import torch
    import torch._dynamo
    from hf_workloads import plain_output_collector

    model, step = bench._thunderfx_workload(args.workload)
    enable = args.mode.endswith("metatrace")
    if enable:
        with metatrace.enable():
            pass
    torch._dynamo.reset()
    events: list = []
    backend = None
    with plain_output_collector(), (metatrace.enable() if enable else contextlib.nullcontext()):
        if args.mode == "thunder.jit+metatrace":
            compiled = thunder.jit(model, cache="symbolic values")
        else:
            from thunder.dynamo import thunderfx

            compiled = thunderfx(model)
            backend = compiled._backend
        gc.collect()
        if args.prof:
            import cProfile
            import pstats

            profiler = cProfile.Profile()
            start = time.perf_counter()
            profiler.runcall(step, compiled, args.T)
            total = time.perf_counter() - start
            profiler.dump_stats(args.prof)
            print(f"first call under cProfile: {total:.2f} s; stats in {args.prof}")
            for key in ("cumulative", "tottime"):
                print(f"\n--- by {key} ---")
                pstats.Stats(args.prof).sort_stats(key).print_stats(args.top)
            return
        with _hooks(events):
            start = time.perf_counter()
            step(compiled, args.T)
            total = time.perf_counter() - start
    print(f"{args.workload} training step T={args.T}, {args.mode}, first call: {total:.2f} s")
    if backend is None:
        cs = thunder.compile_stats(compiled)
        print(f"  thunder interpretation {(cs.last_trace_tracing_stop - cs.last_trace_tracing_start) / 1e9:.2f} s")
        return
    t0 = start

    def spans(label):
        return [(s - t0, e - t0) for lab, s, e, _ in events if lab == label]

    calls = [(s - t0, e - t0, error) for lab, s, e, error in events if lab == "backend"]
    inside = sum(e - s for s, e, _ in calls)
    print(f"  backend calls {len(calls)} (Dynamo graphs compiled {len(backend.subgraph_infos)}); in the backend "
          f"{inside:.2f} s in all")
    infos = iter(backend.subgraph_infos)
    for i, (s, e, error) in enumerate(calls):
        within = lambda label: [(a, b) for a, b in spans(label) if s <= a and b <= e]  # noqa: E731
        ind = within("inductor")
        seconds = lambda label: sum(b - a for a, b in within(label))  # noqa: E731
        print(f"  backend call {i}: called at {s:.2f} s, returned at {e:.2f} s ({e - s:.2f} s): splitter "
              f"{seconds('splitter'):.2f} s (split_module {seconds('split_module'):.2f} s, "
              f"of which support checks {seconds('support check'):.2f} s over "
              f"{len(within('support check'))} calls, {len(within('trial run'))} trial runs; "
              f"deepcopy {seconds('deepcopy'):.2f} s), "
              f"inductor compiles {len(ind)}: " + ", ".join(f"{b - a:.2f} s" for a, b in ind))
        if error:
            print(f"    raised {error}")
            continue
        info = next(infos)
        nodes = sum(1 for n in info.original_graph_module.graph.nodes if n.op == "call_function"
                    or n.op == "call_method" or n.op == "call_module")
        print(f"    {nodes} call nodes in Dynamo's graph; split reasons:")
        for reason in info.split_reasons:
            print(f"      {reason.reason_type.name}: {reason.info[:150]}")
        for j, fn in enumerate(info.thunder_compiled_fns):
            cs = thunder.compile_stats(fn)
            if cs is None or cs.last_trace_host_start < 0:
                print(f"    thunder subgraph {j}: not called")
                continue
            host = (cs.last_trace_host_stop - cs.last_trace_host_start) / 1e9
            interp = (cs.last_trace_tracing_stop - cs.last_trace_tracing_start) / 1e9
            at = cs.last_trace_host_start / 1e9 - t0
            gm = fn._model if hasattr(fn, "_model") else None
            size = (sum(1 for n in gm.graph.nodes if n.op.startswith("call")) if gm is not None else "?")
            print(f"    thunder subgraph {j} ({size} call nodes): first call at {at:.2f} s took {host:.2f} s "
                  f"(interpretation {interp:.2f} s, rest {host - interp:.2f} s), compiles {thunder.cache_misses(fn)}")
    print("  Dynamo's own timers (compile_times):")
    for line in torch._dynamo.utils.compile_times(repr="str", aggregate=True).splitlines()[:40]:
        print("    " + line)


if __name__ == "__main__":
    main()
