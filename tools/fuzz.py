"""A timed differential fuzz run with fresh seeds (the suite runs a fixed-seed slice).

    .venv/bin/python tools/fuzz.py --minutes 10

Generates programs (tests/fuzz_programs.py, and the families of tests/fuzz_families.py: argument
kinds, text through C code, mutations of arguments and modules, value-dependent result types;
half of the programs each), runs each jitted with metatrace enabled over a
sequence of calls, compares everything with eager, and prints every program that differs with
its differences, then the totals: programs, calls, compiles, programs with a difference. Exits 1
when any program differs. ``--seed`` repeats a run.

Two-process mode (the entry cache, ``metatrace.entry_cache``):

    .venv/bin/python tools/fuzz.py --two-process --minutes 10 [--batch 16]

Generates the same programs and call sequences in batches; each batch is written as real modules
(one ``.py`` file per program in a temporary package, so that entries can be stored: code made by
``exec`` stays in its process) and run by a fresh process with ``METATRACE_ENTRY_CACHE=1`` and a
fresh ``METATRACE_ENTRY_CACHE_DIR`` (it compiles and stores), then by a second fresh process with
the same directory (it loads the stored entries; their prologues decide hits). Both compare every
call with eager as above (the arguments are rebuilt from the pickled call sequence). A program
differs when either process differs from eager; it is printed with its differences and its batch
directory, which is kept (``tools/fuzz_two_process.py`` runs a child by hand). The totals add: the
compiles of the first and the second process, the entries stored and loaded, the programs whose
second run loaded entries, the programs with an entry kept in the first process (``kept_local``)
and the top reasons, the programs whose second run compiled although the first stored an entry
for every compile (not a failure: a prologue may reject), stored entries skipped when loading.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # (fuzz_two_process)
warnings.filterwarnings("ignore")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=None, help="default: a fresh one, printed")
    parser.add_argument("--two-process", action="store_true",
                        help="run every program in a process that stores its entries, then in a fresh one that loads them")
    parser.add_argument("--batch", type=int, default=16, help="--two-process: programs per pair of processes")
    args = parser.parse_args()
    if args.two_process:
        return two_process(args)

    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as hypothesis_seed
    from hypothesis import strategies as st

    import metatrace
    from fuzz_families import family_calls, family_programs
    from fuzz_family_runner import check_family_program
    from fuzz_programs import calls, check_program, programs

    run_seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    print(f"seed {run_seed}, {args.minutes} minutes", flush=True)
    deadline = time.monotonic() + 60 * args.minutes
    totals = {"programs": 0, "calls": 0, "compiles": 0, "differing programs": 0}

    class TimeUp(Exception):
        pass

    @hypothesis_seed(run_seed)
    @settings(max_examples=10**9, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(case=st.one_of(st.tuples(programs(), calls()), st.tuples(family_programs(), family_calls())))
    def fuzz(case):
        if time.monotonic() > deadline:
            raise TimeUp
        program, sequence = case
        check = check_family_program if hasattr(program, "family") else check_program
        outcome = check(program, sequence)
        totals["programs"] += 1
        totals["calls"] += outcome.calls
        totals["compiles"] += outcome.compiles
        if outcome.differences:
            totals["differing programs"] += 1
            shown = [] if hasattr(program, "family") else [f"sequence: {sequence!r}"]  # (families print theirs)
            print("---- differs from eager:\n" + program.source() + "\n".join([*shown, *outcome.differences]), flush=True)

    with metatrace.enable():
        try:
            fuzz()
        except TimeUp:
            pass
    print(", ".join(f"{k}: {v}" for k, v in totals.items()), flush=True)
    return 1 if totals["differing programs"] else 0


def two_process(args) -> int:
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed
    from hypothesis import strategies as st

    from fuzz_families import family_calls, family_programs
    from fuzz_programs import calls, programs
    from fuzz_two_process import Totals, run_batch, snapshot_metatrace

    run_seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    snapshot = Path(tempfile.mkdtemp(prefix="fuzz_two_process_metatrace_"))
    digest = snapshot_metatrace(snapshot)  # (the children import this copy: files edited meanwhile change nothing)
    print(f"seed {run_seed}, {args.minutes} minutes, two processes, batches of {args.batch}, "
          f"metatrace {digest} (copied to {snapshot})", flush=True)
    deadline = time.monotonic() + 60 * args.minutes
    totals, batch, per_program = Totals(), [], [None]

    class TimeUp(Exception):
        pass

    def flush():
        if batch:
            seconds = run_batch(list(batch), totals)
            per_program[0] = seconds / len(batch)
            batch.clear()
            print(f"[{totals.programs} programs, {seconds:.0f} s for the last batch] " + totals.line(), flush=True)

    def batch_size() -> int:  # the last batches are cut to end near the deadline
        if per_program[0] is None:
            return args.batch
        return max(1, min(args.batch, int((deadline - time.monotonic()) / per_program[0])))

    @hypothesis_seed(run_seed)
    @settings(max_examples=10**9, deadline=None, database=None, suppress_health_check=list(HealthCheck),
              phases=[Phase.generate])
    @given(case=st.one_of(st.tuples(programs(), calls()), st.tuples(family_programs(), family_calls())))
    def fuzz(case):
        if time.monotonic() > deadline:
            raise TimeUp
        batch.append(case)
        if len(batch) >= batch_size():
            flush()

    try:
        try:
            fuzz()
        except TimeUp:
            pass
        flush()  # (what was drawn before the deadline and not yet run)
    finally:
        shutil.rmtree(snapshot, ignore_errors=True)
    print(f"seed {run_seed}: " + totals.line(), flush=True)
    if totals.kept_local_reasons or totals.skipped_reasons or totals.recompiled_examples:
        print(totals.reasons(), flush=True)
    for warning in totals.warnings:
        print(f"warning: {warning}", flush=True)
    return 1 if totals.differing else 0


if __name__ == "__main__":
    sys.exit(main())
