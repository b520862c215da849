#!/usr/bin/env python
"""Drop-in count over thunder's opinfo samples: how many first calls of a fresh jitted function
succeed (and equal the torch reference) under stock thunder's constant values, stock symbolic
values, and symbolic values with metatrace, from one run; and every sample that works under
constant values but not with metatrace (there should be none; tests/sweeps/test_metatrace_sweep.py
asserts it per sample).

    python tools/opinfo_counts.py        # $METATRACE_SWEEP_SAMPLES samples per op (default 5)
"""

from __future__ import annotations

import collections
import sys
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import metatrace  # noqa: E402
from opinfo_harness import iter_cases, run_case  # noqa: E402


def main() -> None:
    cases = list(iter_cases())
    constant = [run_case(op, s, cache="constant values").status for op, s in cases]
    stock_symbolic = [run_case(op, s, cache="symbolic values").status for op, s in cases]
    with metatrace.enable():
        ours = [run_case(op, s, cache="symbolic values") for op, s in cases]
    print(f"{len(cases)} samples of {len({op.name for op, _ in cases})} ops; first calls ok:")
    print(f"  stock, constant values:      {constant.count('ok')}")
    print(f"  stock, symbolic values:      {stock_symbolic.count('ok')}")
    print(f"  metatrace, symbolic values:  {sum(r.status == 'ok' for r in ours)}")
    lost = collections.defaultdict(list)
    for (op, _), c, r in zip(cases, constant, ours):
        if c == "ok" and r.status != "ok":
            lost[op.name].append((r.error or r.status).splitlines()[0][:150])
    for name, errors in sorted(lost.items()):
        print(f"  ok under constant values, not with metatrace: {name} x{len(errors)}: {errors[0]}")


if __name__ == "__main__":
    main()
