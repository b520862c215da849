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
from metatrace.state import registry

COMPILES = 60  # (the state must return to what it was: a handful of compiles shows a leak as well as hundreds)


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


# ---------------------------------------------------------------------------------------------
# Per-trace state dies with its trace
# ---------------------------------------------------------------------------------------------

DROPPED = 12  # (a leak of 200 bytes per function is 2.4 kB over them; each compile runs under tracemalloc)


def small(a, b):
    # composites that read shapes (broadcasting, reshape's ``a.numel``) and a size in user code
    return (a + b).reshape(-1).sum() * a.shape[0]


def _compile_and_drop(i: int) -> None:
    jf = thunder.jit(small, cache="symbolic values")
    jf(torch.randn(2 + i % 3, 3), torch.randn(3))
    del jf


def _metatrace_bytes(snapshot) -> int:
    import os
    import tracemalloc

    import metatrace

    own = tracemalloc.Filter(True, os.path.join(os.path.dirname(metatrace.__file__), "*"))
    return sum(stat.size for stat in snapshot.filter_traces([own]).statistics("filename"))


def test_compiled_and_dropped_functions_leave_no_metatrace_state(enabled):
    import tracemalloc

    for i in range(2):  # warm-up: caches of the first compile (loaded metas, lazily built tables)
        _compile_and_drop(i)
    gc.collect()
    tracemalloc.start()
    try:
        gc.collect()
        before = _metatrace_bytes(tracemalloc.take_snapshot())
        for i in range(DROPPED):
            _compile_and_drop(i)
        gc.collect()
        after = _metatrace_bytes(tracemalloc.take_snapshot())
    finally:
        tracemalloc.stop()
    per_function = (after - before) / DROPPED
    assert per_function < 200, f"metatrace keeps {per_function:.0f} bytes per compiled-and-dropped function"


# ---------------------------------------------------------------------------------------------
# WeakTable: an entry dies with its object, the remembered last one too
# ---------------------------------------------------------------------------------------------


class _Key:
    pass


def test_a_weak_tables_entry_dies_with_its_object_even_when_asked_for_last():
    import weakref

    from metatrace.state.weak_tables import WeakTable

    class Entry:
        pass

    table = WeakTable(Entry)
    key = _Key()
    entry_ref = weakref.ref(table.get(key))  # the last one asked for: remembered beside the table
    del key
    gc.collect()
    assert entry_ref() is None


def test_a_weak_table_gives_the_same_entry_for_one_object_and_none_when_not_creating():
    from metatrace.state.weak_tables import WeakTable

    table = WeakTable(dict)
    first, second = _Key(), _Key()
    entry = table.get(first)
    table.get(second)  # the remembered last one is now another object's
    assert table.get(first) is entry
    assert table.get(_Key(), create=False) is None
