"""A timed differential fuzz run with fresh seeds (the suite runs a fixed-seed slice).

    .venv/bin/python tools/fuzz.py --minutes 10

Generates programs (tests/fuzz_programs.py, and the families of tests/fuzz_families.py: argument
kinds, text through C code, mutations of arguments and modules, value-dependent result types;
half of the programs each), runs each jitted with metatrace enabled over a
sequence of calls, compares everything with eager, and prints every program that differs with
its differences, then the totals: programs, calls, compiles, programs with a difference. Exits 1
when any program differs. ``--seed`` repeats a run.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
warnings.filterwarnings("ignore")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=None, help="default: a fresh one, printed")
    args = parser.parse_args()

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


if __name__ == "__main__":
    sys.exit(main())
