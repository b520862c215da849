"""metatrace.gc_pacing and metatrace.interpret.costs.gc_pacing_phases: the collector runs less often
during thunder's compile phases and the codegen, and every threshold the user set is back
afterwards."""

from __future__ import annotations

import gc
import queue
import threading

import pytest
import torch

import thunder

from metatrace.gc_pacing import YOUNG_THRESHOLD, enter_phase, leave_phase
from metatrace.state.process_tables import GC_PACING


@pytest.fixture
def user_thresholds():
    saved = gc.get_threshold()
    gc.set_threshold(700, 11, 12)
    yield (700, 11, 12)
    gc.set_threshold(*saved)


def _seen_while_interpreting(calls: int = 1):
    # (a queue, not a list: metatrace checks a list the trace reads by its contents, and the call
    # appending to it would miss the entry it just compiled)
    seen = queue.SimpleQueue()

    def fn(x):
        seen.put(gc.get_threshold())  # builtins: thunder's interpreter calls them as they are
        return x * 2

    jf = thunder.jit(fn, cache="symbolic values")
    for n in range(3, 3 + calls):
        x = torch.randn(n)
        torch.testing.assert_close(jf(x), x * 2)
    return [seen.get() for _ in range(seen.qsize())]


def test_a_compile_runs_under_the_raised_young_threshold(enabled, user_thresholds):
    assert _seen_while_interpreting() == [(YOUNG_THRESHOLD, 11, 12)]


def test_the_user_thresholds_are_back_after_a_compile(enabled, user_thresholds):
    _seen_while_interpreting(calls=3)
    assert gc.get_threshold() == user_thresholds


def test_without_metatrace_a_compile_keeps_the_user_thresholds(user_thresholds):
    assert _seen_while_interpreting() == [user_thresholds]


def test_a_larger_user_threshold_is_not_lowered(enabled):
    saved = gc.get_threshold()
    gc.set_threshold(10 * YOUNG_THRESHOLD, 10, 10)
    try:
        assert _seen_while_interpreting() == [(10 * YOUNG_THRESHOLD, 10, 10)]
    finally:
        gc.set_threshold(*saved)


def test_a_disabled_collector_stays_disabled(enabled):
    gc.disable()
    try:
        _seen_while_interpreting()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_failing_compile_puts_the_thresholds_back(enabled, user_thresholds):
    def fn(x):
        raise ValueError("the user's error")

    with pytest.raises(ValueError, match="the user's error"):
        thunder.jit(fn, cache="symbolic values")(torch.randn(2))
    assert gc.get_threshold() == user_thresholds


def test_nested_phases_restore_once_at_the_outermost(user_thresholds):
    enter_phase()
    enter_phase()
    leave_phase()
    inner_left = gc.get_threshold()
    leave_phase()
    assert (inner_left, gc.get_threshold()) == ((YOUNG_THRESHOLD, 11, 12), user_thresholds)


def test_concurrent_phases_restore_what_the_first_found(user_thresholds):
    barrier = threading.Barrier(4)

    def phase():
        enter_phase()
        barrier.wait(timeout=10)  # all four inside at once
        leave_phase()

    threads = [threading.Thread(target=phase) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert (gc.get_threshold(), GC_PACING.phases) == (user_thresholds, 0)


def test_a_training_compile_runs_few_collections(enabled):
    # 12 linear layers with a training step: at the default threshold (700) its compile runs about
    # 260 collections under metatrace, and about 12 paced; counted with gc.callbacks.
    model = torch.nn.Sequential(*(torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.GELU()) for _ in range(12)))
    collections = []

    def count(phase, info):
        if phase == "start":
            collections.append(info["generation"])

    jm = thunder.jit(model, cache="symbolic values")
    x = torch.randn(4, 16)
    gc.collect()
    gc.callbacks.append(count)
    try:
        jm(x).sum().backward()
    finally:
        gc.callbacks.remove(count)
    assert len(collections) < 50


def test_the_codegen_runs_paced_and_puts_the_thresholds_back(user_thresholds, monkeypatch):
    from metatrace.codegen import generate

    seen = []

    class Stop(Exception):
        pass

    def first_step():  # generate's first call: record the thresholds, then stop it there
        seen.append(gc.get_threshold())
        raise Stop

    monkeypatch.setattr(generate, "prim_symbols", first_step)
    with pytest.raises(Stop):
        generate.generate()
    assert (seen, gc.get_threshold()) == ([(YOUNG_THRESHOLD, 11, 12)], user_thresholds)
