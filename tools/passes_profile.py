#!/usr/bin/env python
"""Where a compile's passes after interpretation go, metatrace against stock thunder (issue 53).

    python tools/passes_profile.py [--config llama2-like] [--layers 2 8] [--T 32] [--repeats 1]
                                   [--modes stock metatrace] [--prof FILE] [--one MODE LAYERS]

The first call of litgpt's training step (tests/litgpt_workloads.py) on a fresh model of each
depth, stock thunder (``cache="constant values"``) and metatrace (``cache="symbolic values"`` within
``metatrace.enable()``) alternating in one process after a warm-up compile of each (one-time costs
paid first), so that a shared machine's load falls on both alike; ``--separate``: each first call
in a process of its own (one-time costs included). Each pass thunder runs after
interpretation is timed by a wrapper installed outermost (metatrace's wrappers included in it), its
own time apart from the timed passes it calls: the prologue's part, dce, the grad transform, the
operator-executor pass, ``transform_for_execution`` (the operator pass within it counted apart),
the forward/backward split, del_last_used, ``python_callable``, ``transform_to_torch_types``; the
rest is the time after interpretation (``compile_stats``' tracing stop to the cache stop) that none
of them covers. Bound symbols of the joint trace (top level) are counted. With ``--prof FILE``
(one mode, one depth) the compile runs under cProfile from its first timed pass to the forward's
return and the top entries by own time are printed
(the stats written to FILE). METATRACE_ENTRY_CACHE=0 here: every compile happens.
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ["METATRACE_ENTRY_CACHE"] = "0"
ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

PHASES = ("prologue", "dce", "grad_transform", "operator_pass", "transform_for_execution", "split",
          "del_last_used", "python_callable", "torch_types", "inplace_check")


def _install_timers(times: dict, counts: dict, on_first=None, detail: bool = False, profile_phase=None) -> list:
    """Wraps each pass where thunder's compile looks it up, outermost; own times per phase. Returns
    (owner, name, original) rows to put back (:func:`_remove_timers`)."""
    installed: list = []
    import thunder
    import thunder.core.transform_common as transform_common
    import thunder.executors.passes as passes
    import thunder.transforms.autodiff as autodiff
    from thunder.core.trace import TraceCtx

    stack: list[list] = []

    def timed(owner, name, phase):
        original = getattr(owner, name)
        installed.append((owner, name, original))

        def wrapper(*args, **kwargs):
            if on_first is not None and not counts.get("started"):
                counts["started"] = 1
                on_first()
            frame = [phase, 0.0]
            stack.append(frame)
            profiling = profile_phase is not None and phase == profile_phase[0]
            if profiling:
                profile_phase[1].enable()
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - start
                if profiling:
                    profile_phase[1].disable()
                stack.pop()
                times[phase] += elapsed - frame[1]
                if stack:
                    stack[-1][1] += elapsed

        setattr(owner, name, wrapper)

    timed(thunder, "dce", "dce")
    timed(autodiff, "grad_transform_on_trace", "grad_transform")
    timed(passes, "_transform_for_operator_executor_execution", "operator_pass")
    timed(thunder, "transform_for_execution", "transform_for_execution")
    timed(autodiff, "split_into_forward_and_backward", "split")
    timed(passes, "del_last_used", "del_last_used")
    timed(TraceCtx, "python_callable", "python_callable")
    timed(thunder, "transform_to_torch_types", "torch_types")
    timed(transform_common, "_inplace_copy_sanity_check", "inplace_check")

    if detail:  # metatrace's own pass-level steps, looked up where its wrappers call them
        import metatrace.passes.grad_transform as grad_transform
        import metatrace.passes.size_producers as size_producers

        for owner, name in ((size_producers, "keep_size_names"), (size_producers, "restore_size_producers"),
                            (size_producers, "without_rebindings"), (grad_transform, "hoist_size_producers"),
                            (grad_transform, "fill_grad_program")):
            times.setdefault("mt:" + name, 0.0)
            timed(owner, name, "mt:" + name)

    grad = autodiff.grad_transform_on_trace

    def counting(trace, *args, **kwargs):
        counts["joint_bsyms_in"] = len(trace.bound_symbols)
        result = grad(trace, *args, **kwargs)
        counts["joint_bsyms_out"] = len(result.bound_symbols)
        return result

    installed.append((autodiff, "grad_transform_on_trace", grad))
    autodiff.grad_transform_on_trace = counting

    # the collector's time, by the phase it interrupted ("gc:rest" outside every timed phase)
    gc_start: list = []

    def on_gc(event, info):
        if event == "start":
            gc_start[:] = [time.perf_counter()]
        elif gc_start:
            key = "gc:" + (stack[-1][0] if stack else "rest")
            times[key] = times.get(key, 0.0) + time.perf_counter() - gc_start[0]
            counts[f"gc{info['generation']}"] = counts.get(f"gc{info['generation']}", 0) + 1

    gc.callbacks.append(on_gc)
    installed.append((gc.callbacks, None, on_gc))
    return installed


def _remove_timers(installed: list) -> None:
    for owner, name, original in reversed(installed):
        if name is None:
            owner.remove(original)
        else:
            setattr(owner, name, original)


def _one(mode: str, layers: int, config: str, T: int, prof: str | None, phase: str | None = None) -> dict:
    """One first call of a fresh model of ``layers`` layers, metatrace enabled for it by mode."""
    import contextlib

    import metatrace

    with metatrace.enable() if mode == "metatrace" else contextlib.nullcontext():
        return _timed_first_call(mode, layers, config, T, prof, phase)


def _timed_first_call(mode: str, layers: int, config: str, T: int, prof: str | None, phase: str | None) -> dict:
    import torch
    import thunder
    from litgpt_workloads import training_input, training_step
    from thunder.tests.litgpt_model import GPT, Config

    times: dict = collections.defaultdict(float)
    counts: dict = {}
    profiler = None
    if prof:
        import cProfile

        profiler = cProfile.Profile()
    installed = _install_timers(times, counts, profiler.enable if profiler is not None and phase is None else None,
                                detail=mode == "metatrace",
                                profile_phase=(phase, profiler) if profiler is not None and phase else None)
    torch.manual_seed(0)
    model = GPT(Config.from_name(config, n_layer=layers, block_size=128))
    idx = training_input(model, T)
    jm = thunder.jit(model, cache="symbolic values" if mode == "metatrace" else "constant values")
    gc.collect()

    def forward(x):  # (the profile, if any, runs from the first pass to the forward's return)
        out = jm(x)
        if profiler is not None and phase is None:
            profiler.disable()
        return out

    start = time.perf_counter()
    try:
        training_step(forward, model, idx)
    finally:
        _remove_timers(installed)
    total = time.perf_counter() - start
    counts.pop("started", None)
    if profiler is not None:
        profiler.dump_stats(prof)
    cs = thunder.compile_stats(jm)
    interp = (cs.last_trace_tracing_stop - cs.last_trace_tracing_start) / 1e9
    after = (cs.last_prologue_execution_start - cs.last_trace_tracing_stop) / 1e9
    out = {"mode": mode, "layers": layers, "total": total, "interpretation": interp, "after": after,
           **{p: times[p] for p in PHASES}, **counts,
           "detail": {p: t for p, t in times.items() if p.startswith("mt:")},
           "gc": {p[3:]: t for p, t in times.items() if p.startswith("gc:")}}
    # the prologue: pre-prologue transforms, its transform_for_execution and python_callable
    out["prologue"] = (cs.last_prologue_transformation_stop - cs.last_prologue_transformation_start) / 1e9
    return out


def _report(rows: list[dict]) -> None:
    cols = ("interpretation", "after", *PHASES, "rest")
    print(f"{'mode':<10}{'layers':>7}{'bsyms':>7}{'total':>8}" + "".join(f"{c[:11]:>12}" for c in cols))
    for r in rows:
        # (the prologue interval holds one transform_for_execution and python_callable: counted there)
        r["rest"] = r["after"] - sum(r[p] for p in PHASES if p != "prologue")
        print(f"{r['mode']:<10}{r['layers']:>7}{r.get('joint_bsyms_in', 0):>7}{r['total']:>8.2f}"
              + "".join(f"{r[c]:>12.3f}" for c in cols))
        if r.get("gc"):
            print("    the collector's time by phase: " + ", ".join(f"{k} {v:.3f}" for k, v in sorted(r["gc"].items()))
                  + "; collections by generation: " + ", ".join(f"{g} {r.get('gc' + g, 0)}" for g in "012"))
        if r.get("detail"):
            print("    metatrace's own steps (own time, within the phases above): "
                  + ", ".join(f"{k[3:]} {v:.3f}" for k, v in r["detail"].items()))
    print("(prologue: the interval thunder times for it, its transform_for_execution and python_callable "
          "are counted in those columns too; rest = after - the other phases)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default="llama2-like")
    p.add_argument("--layers", type=int, nargs="+", default=[2, 8])
    p.add_argument("--T", type=int, default=32)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--modes", nargs="+", default=["stock", "metatrace"])
    p.add_argument("--prof")
    p.add_argument("--prof-phase", help="with --prof: profile only within this phase (a column name)")
    p.add_argument("--one", nargs=2, metavar=("MODE", "LAYERS"))
    p.add_argument("--separate", action="store_true", help="each first call in a process of its own")
    a = p.parse_args()
    if a.one:
        print(json.dumps(_one(a.one[0], int(a.one[1]), a.config, a.T, a.prof)), flush=True)
        return
    if a.prof:
        mode, layers = a.modes[0], a.layers[0]
        if not a.separate:
            _one(mode, 1, a.config, a.T, None)
        r = _one(mode, layers, a.config, a.T, a.prof, a.prof_phase)
        _report([r])
        import pstats

        stats = pstats.Stats(a.prof)
        _own_time_by_owner(stats)
        stats.sort_stats("tottime").print_stats(45)
        return
    rows = []
    if not a.separate:  # one-time costs (lazy initialization, the rewritten metas' load) paid first
        for mode in a.modes:
            _one(mode, 1, a.config, a.T, None)
    for _ in range(a.repeats):
        for layers in a.layers:
            for mode in a.modes:
                if not a.separate:
                    gc.collect()
                    rows.append(_one(mode, layers, a.config, a.T, None))
                    continue
                out = subprocess.run([sys.executable, __file__, "--one", mode, str(layers), "--config", a.config,
                                      "--T", str(a.T)], capture_output=True, text=True)
                if out.returncode:
                    sys.exit(out.stderr[-3000:])
                rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    _report(rows)
    if a.repeats > 1:
        _medians(rows)


def _own_time_by_owner(stats) -> None:
    """The profile's own time summed by owner: metatrace's modules (each), its generated metas,
    thunder, the rest."""
    owners: dict = collections.Counter()
    modules: dict = collections.Counter()
    for (filename, _, name), (_, _, own, _, _) in stats.stats.items():
        if f"{ROOT}/metatrace/" in filename:
            owners["metatrace"] += own
            modules[filename.split(f"{ROOT}/")[1]] += own
        elif "/metatrace/thunder-" in filename:
            owners["metatrace's generated metas"] += own
        elif "/thunder/" in filename:
            owners["thunder"] += own
        else:
            owners["other (builtins, stdlib, torch, optree)"] += own
    print("own time by owner: " + ", ".join(f"{k} {v:.3f}" for k, v in owners.most_common()))
    print("metatrace's modules: " + ", ".join(f"{k} {v:.3f}" for k, v in modules.most_common(25)))


def _medians(rows: list[dict]) -> None:
    import statistics

    cols = ("after", *PHASES[1:], "rest")
    print(f"medians of {len(rows) // max(1, len({(r['mode'], r['layers']) for r in rows}))}:")
    print(f"{'mode':<10}{'layers':>7}" + "".join(f"{c[:11]:>12}" for c in cols))
    for layers in sorted({r["layers"] for r in rows}):
        for mode in dict.fromkeys(r["mode"] for r in rows):
            sel = [r for r in rows if r["mode"] == mode and r["layers"] == layers]
            print(f"{mode:<10}{layers:>7}" + "".join(f"{statistics.median(r[c] for r in sel):>12.3f}" for c in cols))


if __name__ == "__main__":
    main()
