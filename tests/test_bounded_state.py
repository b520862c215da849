"""metatrace's own state does not grow with the number of compiles.

The prologue's guard operators look up their guard program (``registry.PROGRAMS``) and expected
argument structure (``registry.EXPECTED``) by id; both live as long as the jitted function whose
cache entries use them. Ids come from counters, so a released id is never made again.
"""

from __future__ import annotations

import gc

import pytest
import torch

import thunder
from metatrace.guards import registry

COMPILES = 200


def branchy(a, n, mode):
    # ``n > 3`` makes a guard program; the string argument a structure check by value, so every
    # new string is a cache miss: one compile, one program and two structures per call.
    if n > 3:
        return a * n
    return a + len(mode)


def _sizes() -> tuple[int, int]:
    return len(registry.PROGRAMS), len(registry.EXPECTED)


@pytest.fixture
def collected():
    """Registry sizes before the test, with earlier tests' jitted functions collected."""
    gc.collect()
    return _sizes()


def test_one_function_compiled_many_times_releases_its_state_when_deleted(enabled, collected):
    jf = thunder.jit(branchy, cache="symbolic values")
    a = torch.randn(3)
    for i in range(COMPILES):
        jf(a, 5, f"mode{i}")
    assert len(thunder.compile_stats(jf).interpreter_cache) == COMPILES
    grown = _sizes()
    assert grown[0] >= collected[0] + COMPILES  # the test exercises the guard programs
    assert grown[1] >= collected[1] + COMPILES  # and the structure checks
    del jf
    gc.collect()
    assert _sizes() == collected


def test_fresh_jitted_functions_do_not_accumulate_state(enabled, collected):
    a = torch.randn(3)
    for i in range(COMPILES // 10):
        jf = thunder.jit(branchy, cache="symbolic values")
        jf(a, 5 + i, "mode")
        del jf
    gc.collect()
    assert _sizes() == collected


def _ids() -> set[str]:
    return set(registry.PROGRAMS) | set(registry.EXPECTED)


def test_released_ids_are_not_made_again(enabled, collected):
    a = torch.randn(3)
    existing = _ids()
    jf = thunder.jit(branchy, cache="symbolic values")
    jf(a, 5, "mode")
    first = _ids() - existing
    del jf
    gc.collect()
    jf = thunder.jit(branchy, cache="symbolic values")
    jf(a, 5, "mode")
    second = _ids() - existing
    assert first, "the first compile made no ids: nothing to compare"
    assert first & second == set()  # ids from len() would repeat once the first ones are released


def test_a_live_function_keeps_its_guards(enabled):
    a = torch.randn(3)
    jf = thunder.jit(branchy, cache="symbolic values")
    jf(a, 5, "mode")
    gc.collect()
    jf(a, 2, "mode")  # n <= 3: the entry's guard program must still run and reject the call
    assert len(thunder.compile_stats(jf).interpreter_cache) == 2
