"""Differential test over thunder's opinfos: one jitted function per op receives the op's samples
in sequence (as a user reuses a compiled function), with metatrace enabled, under
``cache="symbolic values"`` and ``cache="constant values"``.

Every result equals eager PyTorch (metadata only for random ops), and no sample fails on the
shared function that succeeds on a fresh one: zero wrong results from a reused cache entry, zero
crashes from stale state. "Fresh" is the same call on a function that has seen no other sample.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

import metatrace
from opinfo_harness import default_cases, run_shared

MODES = ["symbolic values", "constant values"]
SAMPLES = defaultdict(list)
for _op, _sample in default_cases()[0]:
    SAMPLES[_op].append(_sample)
OPS = sorted(SAMPLES, key=lambda op: op.name)


@pytest.fixture(scope="module")
def outcomes() -> dict[tuple[str, str], list[tuple]]:
    """(mode, op name) -> per sample (fresh status, shared status, shared error).

    A sample's fresh run decides nothing where the shared function got it right (or wrong: a
    mismatch fails whatever the fresh run does), so only the other samples get one (the fresh
    status of the rest is None). Every call seeds torch first: no run depends on another."""
    result = {}
    with metatrace.enable():
        for mode in MODES:
            for op in OPS:
                samples = SAMPLES[op]
                shared = run_shared(op, samples, mode)
                fresh = [None if s.status in ("ok", "mismatch") else run_shared(op, [sample], mode)[0].status
                         for sample, s in zip(samples, shared)]
                result[mode, op.name] = [(f, s.status, s.error) for f, s in zip(fresh, shared)]
    return result


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op_name", [op.name for op in OPS])
def test_shared_function_matches_eager(op_name, mode, outcomes):
    for i, (fresh, shared, error) in enumerate(outcomes[mode, op_name]):
        assert shared != "mismatch", f"sample {i}: wrong result from the shared function: {error}"
        if fresh == "ok":
            assert shared == "ok", f"sample {i}: works on a fresh function, {shared} on the shared one: {error}"
