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
from opinfo_harness import iter_cases, run_shared

MODES = ["symbolic values", "constant values"]
SAMPLES = defaultdict(list)
for _op, _sample in iter_cases():
    SAMPLES[_op].append(_sample)
OPS = sorted(SAMPLES, key=lambda op: op.name)


@pytest.fixture(scope="module")
def outcomes() -> dict[tuple[str, str], list[tuple]]:
    """(mode, op name) -> per sample (fresh status, shared status, shared error)."""
    result = {}
    with metatrace.enable():
        for mode in MODES:
            for op in OPS:
                samples = SAMPLES[op]
                fresh = [run_shared(op, [s], mode)[0] for s in samples]
                shared = run_shared(op, samples, mode)
                result[mode, op.name] = [(f.status, s.status, s.error) for f, s in zip(fresh, shared)]
    return result


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op_name", [op.name for op in OPS])
def test_shared_function_matches_eager(op_name, mode, outcomes):
    for i, (fresh, shared, error) in enumerate(outcomes[mode, op_name]):
        assert shared != "mismatch", f"sample {i}: wrong result from the shared function: {error}"
        if fresh == "ok":
            assert shared == "ok", f"sample {i}: works on a fresh function, {shared} on the shared one: {error}"
