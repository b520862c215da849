"""metatrace.interpret.callee_checks: a function the trace inlines, read from a global or a closure
cell, is checked by identity and by its defaults; every call equals eager."""

from __future__ import annotations

import types

import torch

import thunder

import metatrace

SYMBOLIC = "symbolic values"


def scale_by_two(x, factor=2):
    return x * factor


def scale_by_five(x, factor=5):
    return x * factor


helper = scale_by_two


def calls_helper(x):
    return helper(x)


def _results_and_misses(fn, changes):
    """Calls the jitted ``fn`` before and after each change; (equal to eager each time, misses)."""
    jf = thunder.jit(fn, cache=SYMBOLIC)
    x = torch.ones(3)
    equal = [torch.equal(jf(x), fn(x))]
    for change in changes:
        change()
        equal.append(torch.equal(jf(x), fn(x)))
    return equal, thunder.cache_misses(jf)


def test_a_rebound_global_function_misses_the_entry(enabled):
    global helper
    try:
        def rebind():
            global helper
            helper = scale_by_five

        assert _results_and_misses(calls_helper, [rebind]) == ([True, True], 2)
    finally:
        helper = scale_by_two


def test_changed_defaults_miss_the_entry(enabled):
    saved = scale_by_two.__defaults__
    try:
        def change():
            scale_by_two.__defaults__ = (3,)

        assert _results_and_misses(calls_helper, [change]) == ([True, True], 2)
    finally:
        scale_by_two.__defaults__ = saved


def test_a_mutated_mutable_default_misses_the_entry(enabled):
    def scaled(x, config={"factor": 2}):  # noqa: B006 (the pattern under test)
        return x * config["factor"]

    def fn(x):
        return scaled(x)

    def mutate():
        scaled.__defaults__[0]["factor"] = 4

    assert _results_and_misses(fn, [mutate]) == ([True, True], 2)


def test_a_rebound_closure_function_misses_the_entry(enabled):
    inner = scale_by_two

    def fn(x):
        return inner(x)

    def rebind():
        nonlocal inner
        inner = scale_by_five

    assert _results_and_misses(fn, [rebind]) == ([True, True], 2)


def test_an_unchanged_helper_keeps_one_entry_over_sizes(enabled):
    jf = thunder.jit(calls_helper, cache=SYMBOLIC)
    for n in (3, 5, 8, 13):
        x = torch.randn(n)
        torch.testing.assert_close(jf(x), calls_helper(x))
    assert thunder.cache_misses(jf) == 1


def test_a_helper_called_twice_is_checked_once(enabled):
    def fn(x):
        return helper(x) + helper(x * 2)

    jf = thunder.jit(fn, cache=SYMBOLIC)
    jf(torch.ones(3))
    (entry,) = metatrace.explain(jf)
    assert [g.split(" == ")[0] for g in entry.guards if "inlines" in g] == ["helper"]


def test_a_function_from_a_module_of_code_is_not_checked(enabled):
    helpers = types.ModuleType("helpers")
    helpers.scale = scale_by_two

    def fn(x):
        return helpers.scale(x)

    jf = thunder.jit(fn, cache=SYMBOLIC)
    torch.testing.assert_close(jf(torch.ones(3)), fn(torch.ones(3)))
    (entry,) = metatrace.explain(jf)
    assert [g for g in entry.guards if "inlines" in g or "defaults" in g] == []
