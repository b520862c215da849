"""Guards: concretized values reach the prologue; relational reuse; fallback prims; explain."""

from __future__ import annotations

import re

import logging

import pytest
import torch

import thunder
import thunder.core.jit_ext as jit_ext
from thunder.core.proxies import IntegerProxy, NumberProxy

import metatrace
from metatrace.codegen import cache
from metatrace.guards.collect import GuardFailure
from metatrace.guards.compiled_program import check_guards
from metatrace.state.registry import PROGRAMS
from workloads import causal_attention, causal_mask

SYMBOLIC = "symbolic values"


def results_equal(jf, fn, calls) -> None:
    for args in calls:
        got, want = jf(*args), fn(*args)
        if isinstance(want, (tuple, list)):
            assert len(got) == len(want)
            for g, w in zip(got, want):
                torch.testing.assert_close(g, w)
        else:
            torch.testing.assert_close(got, want)


# --- the seed examples ----------------------------------------------------------------------


def test_flag_control_flow_is_guarded_by_the_relation(enabled):
    def foo(flag):
        if flag > 5:
            return torch.ones(1)
        return torch.zeros(1)

    jf = thunder.jit(foo, cache=SYMBOLIC)
    results_equal(jf, foo, [(6,), (7,)])
    assert thunder.cache_misses(jf) == 1  # 6 and 7 share one entry
    results_equal(jf, foo, [(0,), (3,), (10,)])
    assert thunder.cache_misses(jf) == 2  # 0 gets its own, 3 and 10 reuse
    explained = [e.guards for e in metatrace.explain(jf)]
    assert "flag > 5" in explained[0] and "flag <= 5" in explained[1]


def test_device_with_a_symbolic_index(enabled):
    def foo(dev, idx):
        return torch.ones(1, device=torch.device(dev, idx))

    jf = thunder.jit(foo, cache=SYMBOLIC)
    for _ in range(2):
        torch.testing.assert_close(jf("cpu", 0), foo("cpu", 0))


def test_split_of_issue_471_with_changing_sizes(enabled):
    def foo(a, dim0, dim1):
        return torch.split(a, (dim0, dim1, a.size(2) - dim0 - dim1), dim=2)

    jf = thunder.jit(foo, cache=SYMBOLIC)
    a, b = torch.randn(2, 3, 6), torch.randn(2, 3, 9)
    results_equal(jf, foo, [(a, 1, 2), (a, 2, 1), (b, 2, 3), (b, 4, 4), (a, 1, 2)])


def test_causal_attention_over_sequence_lengths_compiles_once(enabled):
    mask = causal_mask()
    jf = thunder.jit(causal_attention, cache=SYMBOLIC)
    for T in range(8, 49, 8):
        q, k, v = (torch.randn(2, 4, T, 16) for _ in range(3))
        torch.testing.assert_close(jf(q, k, v, mask), causal_attention(q, k, v, mask))
    assert thunder.cache_misses(jf) == 1 and thunder.cache_hits(jf) == 5
    metatrace.check_trace(thunder.last_traces(jf)[0])


# --- values that decide the trace -----------------------------------------------------------

A = torch.randn(2, 3, 4)
DECIDING = {
    "transpose": (lambda a, d0, d1: torch.transpose(a, d0, d1), [(A, 0, 1), (A, 1, 2), (A, 0, 1)]),
    "split": (lambda a: torch.split(a, 2), [(torch.randn(6),), (torch.randn(8),), (torch.randn(7),)]),
    "flip": (lambda a, d: torch.flip(a, (d,)), [(A, 0), (A, 2)]),
    "squeeze": (lambda a, d: torch.squeeze(a, d), [(torch.randn(1, 3, 1), 0), (torch.randn(1, 3, 1), 2)]),
    "argmax": (lambda a, d: torch.argmax(a, d), [(A, 0), (A, 1)]),
    "sum": (lambda a, d: a.sum(d), [(A, 0), (A, 2)]),
    "negative slice end": (lambda a, i: a[:, :, :i], [(A, 2), (A, -1), (A, 3), (A, 9)]),
    "all with dim": (lambda a, d: torch.all(a > 0, d), [(A, 0), (A, 1)]),
    "div rounding": (lambda a, m: torch.div(a, 3, rounding_mode=m), [(A, "floor"), (A, "trunc"), (A, None)]),
}


def test_symbolic_repeat_and_expand_reuse_one_entry(enabled):
    for fn, calls in [
        (lambda a, r: a.repeat(r, 1, 1), [(A, 1), (A, 2), (A, 3)]),
        (lambda a, n: a[:1].expand(n, 3, 4), [(A, 2), (A, 5)]),
    ]:
        jf = thunder.jit(fn, cache=SYMBOLIC)
        results_equal(jf, fn, calls)
        assert thunder.cache_misses(jf) == 1


@pytest.mark.parametrize("name", sorted(DECIDING))
def test_a_value_that_decides_the_trace_misses_the_cache(name, enabled):
    fn, calls = DECIDING[name]
    jf = thunder.jit(fn, cache=SYMBOLIC)
    results_equal(jf, fn, calls)
    assert thunder.cache_misses(jf) >= 2


def test_arguments_the_trace_never_read_are_guarded_under_constant_values(enabled):
    fn = lambda a, dims: torch.flip(a, dims)  # noqa: E731
    jf = thunder.jit(fn)
    results_equal(jf, fn, [(A, ()), (A, (0,)), (A, ())])
    assert thunder.cache_misses(jf) == 2


def test_a_value_breaking_a_thunder_check_gets_thunders_error(enabled):
    fn = lambda a, n: torch.narrow(a, 2, 0, n)  # noqa: E731
    jf = thunder.jit(fn, cache=SYMBOLIC)
    results_equal(jf, fn, [(A, 2), (A, 3)])
    with pytest.raises(RuntimeError):
        fn(A, 9)  # eager refuses
    with pytest.raises(RuntimeError, match="exceeds dimension size"):
        jf(A, 9)  # the entry's guard misses; the new trace fails thunder's own check


# --- fallback prims -------------------------------------------------------------------------

# A program that reaches each prim, and two calls differing in a value the prim receives.
FALLBACK_CASES = {
    "SLICE": (lambda a, i: a[:, :, :i] * 2, [(A, 2), (A, 3), (A, 2)]),
    "TRANSPOSE": (lambda a, d: a.transpose(0, d), [(A, 1), (A, 2)]),
    "RESHAPE": (lambda a, n: a.reshape(n, -1), [(A, 2), (A, 4)]),
    "PAD": (lambda a, p: torch.nn.functional.pad(a, (p, p)), [(A, 1), (A, 2)]),
}


def _fallback_prims() -> list[str]:
    manifest = cache.ensure().manifest
    return sorted({n for n, e in manifest["prims"].items() if e["status"] == "fallback"} | set(FALLBACK_CASES))


@pytest.mark.parametrize("prim", _fallback_prims())
def test_fallback_prim_misses_on_a_new_static_value_and_is_correct(prim):
    assert prim in FALLBACK_CASES, f"add a program reaching fallback prim {prim} to FALLBACK_CASES"
    fn, calls = FALLBACK_CASES[prim]
    with metatrace.enable(force_fallback=(prim,)):
        jf = thunder.jit(fn, cache=SYMBOLIC)
        results_equal(jf, fn, calls)
        distinct = len({tuple(a for a in args if not isinstance(a, torch.Tensor)) for args in calls})
        assert thunder.cache_misses(jf) == distinct
        metatrace.check_trace(thunder.last_traces(jf)[0])


# --- explaining and logging -----------------------------------------------------------------


_PIN = re.compile(r"^(\w+(\.shape\[\d+\])?) == [-\w.]+")  # an input size or number fixed to one value


def _explained_with_fallback(prim: str) -> list[str]:
    """explain()'s texts for the first call of FALLBACK_CASES[prim] with that prim a fallback."""
    fn, calls = FALLBACK_CASES[prim]
    with metatrace.enable(force_fallback=(prim,)):
        jf = thunder.jit(fn, cache=SYMBOLIC)
        jf(*calls[0])
        return [g for entry in metatrace.explain(jf) for g in entry.guards]


@pytest.mark.parametrize("prim", sorted(FALLBACK_CASES))
def test_every_pin_names_what_fixed_it(prim):
    pins = [g for g in _explained_with_fallback(prim) if _PIN.match(g) and not g.startswith(("len(args)", "len(kwargs)"))]
    assert pins and all(re.search(r" == \S+ \(.+\)$", g) for g in pins), pins


@pytest.mark.parametrize("prim", sorted(FALLBACK_CASES))
def test_explain_shows_no_thunder_proxy_names(prim):
    texts = _explained_with_fallback(prim)
    assert not [g for g in texts if re.search(r"\b[ifsbt]\d+\b", g)], texts



def test_explain_lists_guards_with_input_names(enabled):
    jf = thunder.jit(lambda a, i: a[:, :, 1:i:2], cache=SYMBOLIC)
    jf(torch.randn(8, 16, 4), 3)
    (entry,) = metatrace.explain(jf)
    assert "i < a.shape[2]" in entry.guards  # i >= a.shape[2] was decided False
    assert "a: rank 3, torch.float32, cpu, requires_grad=False" in entry.guards
    assert str(entry).startswith("cache entry 0:")


def test_recompile_log_names_the_failed_guard(enabled, caplog):
    def foo(flag):
        return torch.ones(1) if flag > 5 else torch.zeros(1)

    jf = thunder.jit(foo, cache=SYMBOLIC)
    jf(6)
    with caplog.at_level(logging.INFO, logger="metatrace.recompiles"):
        jf(7)
        assert not caplog.records  # a hit logs nothing
        jf(0)
    (record,) = caplog.records
    assert "entry 0: guard failed: flag > 5" in record.getMessage()


def test_guard_programs_raise_rather_than_assert(enabled):
    jf = thunder.jit(lambda a, i: a[:, :, :i], cache=SYMBOLIC)
    jf(torch.randn(8, 16, 4), 2)
    (program_id, *arguments), = [b.args for b in thunder.last_prologue_traces(jf)[-1].bound_symbols
                                 if b.sym.name == "metatrace_guards"]
    program = PROGRAMS[program_id]
    good = [p.value for p in arguments]  # the leaves, then the number arguments whose types it checks
    check_guards(program_id, *good)
    n = len(program.leaves)
    bad = [-5 if isinstance(p, IntegerProxy) else v for p, v in zip(program.leaves, good)] + good[n:]
    with pytest.raises(GuardFailure, match="guard failed"):
        check_guards(program_id, *bad)


def _prologue_calls(jf) -> list[str]:
    return [b.sym.name for b in thunder.last_prologue_traces(jf)[-1].bound_symbols
            if b.sym.name.startswith("metatrace_")]


def test_number_argument_types_are_checked_by_the_guard_program(enabled):
    jf = thunder.jit(lambda a, i: a[:, :, :i], cache=SYMBOLIC)
    jf(torch.randn(8, 16, 4), 2)
    assert _prologue_calls(jf) == ["metatrace_guards"]


def test_a_number_argument_of_another_type_fails_the_guard_program_first(enabled):
    from metatrace.guards.structure import StructureMismatch

    jf = thunder.jit(lambda a, i: a[:, :, :i], cache=SYMBOLIC)
    jf(torch.randn(8, 16, 4), 2)
    (program_id, *arguments), = [b.args for b in thunder.last_prologue_traces(jf)[-1].bound_symbols
                                 if b.sym.name == "metatrace_guards"]
    n = len(PROGRAMS[program_id].leaves)
    values = [p.value for p in arguments[:n]] + [2.0]  # i as a float, every guard still holding
    with pytest.raises(StructureMismatch, match="number argument types changed: expected int, got float"):
        check_guards(program_id, *values)


def test_number_argument_types_without_guards_keep_their_own_check(enabled):
    jf = thunder.jit(lambda a, i: a.sum(), cache=SYMBOLIC)  # nothing to guard: no guard program
    jf(torch.randn(3), 2)
    assert _prologue_calls(jf) == ["metatrace_structure"]


def test_a_float_where_an_int_was_compiles_again_and_matches_eager(enabled):
    fn = lambda a, i: a[:, :, : int(i)] * i  # noqa: E731
    jf = thunder.jit(fn, cache=SYMBOLIC)
    a = torch.randn(8, 16, 4)
    jf(a, 2)
    torch.testing.assert_close(jf(a, 3.0), fn(a, 3.0))
    assert thunder.cache_misses(jf) == 2


def test_disable_restores_number_proxy_and_the_jit():
    before = {n: NumberProxy.__dict__[n] for n in ("__bool__", "__eq__", "__lt__", "__add__", "__int__")}
    hooks = (jit_ext.jit_ctx, jit_ext.propagate_constraints, jit_ext.interpret, jit_ext._general_jit_lookaside_map[bool])
    with metatrace.enable():
        assert NumberProxy.__dict__["__bool__"] is not before["__bool__"]
    assert {n: NumberProxy.__dict__[n] for n in before} == before
    assert (jit_ext.jit_ctx, jit_ext.propagate_constraints, jit_ext.interpret, jit_ext._general_jit_lookaside_map[bool]) == hooks


# --- a check that fails on the call that compiled the entry -----------------------------------


def test_a_side_effect_on_a_captured_list_is_replayed(enabled):
    """The append is undone after tracing and replayed on every call (metatrace.mutations): the
    entry's check of ``seen`` holds on the call that compiled it, and each call matches eager."""
    seen, eager_seen = [], []

    def fn(x):
        seen.append(1)
        return x * len(seen)

    def eager(x):
        eager_seen.append(1)
        return x * len(eager_seen)

    jf = thunder.jit(fn, cache=SYMBOLIC)
    for _ in range(3):
        torch.testing.assert_close(jf(torch.ones(2)), eager(torch.ones(2)))
    assert seen == eager_seen


def test_recompile_log_names_a_changed_argument_structure(enabled, caplog):
    def fn(x, items):  # the trace never reads items: only its structure is checked (a tuple: by contents)
        return x * 2

    jf = thunder.jit(fn, cache=SYMBOLIC)
    jf(torch.ones(2), (1,))
    with caplog.at_level(logging.INFO, logger="metatrace.recompiles"):
        jf(torch.ones(2), (1, 2))
    (record,) = caplog.records
    assert "entry 0: argument changed: expected items: tuple[int], got tuple[int, int]" in record.getMessage()


def test_recompile_log_names_the_thunder_check_that_failed(enabled, caplog):
    jf = thunder.jit(lambda a: a * 2, cache=SYMBOLIC)
    jf(torch.ones(2, 3))
    with caplog.at_level(logging.INFO, logger="metatrace.recompiles"):
        jf(torch.ones(2, 3, dtype=torch.float64))  # a dtype: checked by thunder's prologue, not metatrace's
    (record,) = caplog.records
    assert "entry 0: rejected by thunder's prologue check check_tensor_metadata(a," in record.getMessage()
    assert "float64" in record.getMessage()


def test_recompile_log_names_an_argument_attribute_thunder_checked(enabled, caplog):
    class Config:
        def __init__(self, flag):
            self.flag = flag

    jf = thunder.jit(lambda x, cfg: x * 2 if cfg.flag else x, cache=SYMBOLIC)
    jf(torch.ones(2), Config(True))
    with caplog.at_level(logging.INFO, logger="metatrace.recompiles"):
        jf(torch.ones(2), Config(False))
    (record,) = caplog.records
    assert "check_number_type_and_value(cfg.flag, True)" in record.getMessage()


def test_recompile_log_names_changed_number_types(enabled, caplog):
    jf = thunder.jit(lambda a, n: a[: a.shape[0] // 2] * n if n > 1 else a, cache=SYMBOLIC)
    jf(torch.ones(4), 2)
    with caplog.at_level(logging.INFO, logger="metatrace.recompiles"):
        jf(torch.ones(4), 2.0)
    (record,) = caplog.records
    assert "entry 0: number argument types changed: expected int, got float" in record.getMessage()


def test_the_named_error_is_still_a_structure_mismatch_and_a_guard_failure():
    from metatrace.guards.structure import ChangedWhileTracing, StructureMismatch

    assert issubclass(ChangedWhileTracing, StructureMismatch) and issubclass(ChangedWhileTracing, GuardFailure)


def test_a_check_failing_on_a_later_call_raises_the_plain_failure(enabled):
    from thunder.core.compile_data import compile_data_and_stats

    jf = thunder.jit(lambda a, i: a[:, :, :i], cache=SYMBOLIC)
    a = torch.randn(8, 16, 4)
    jf(a, 2)
    jf(a, 3)  # a hit: the call's stamps are those of a lookup, not of a compile
    (program_id, *arguments), = [b.args for b in thunder.last_prologue_traces(jf)[-1].bound_symbols
                                 if b.sym.name == "metatrace_guards"]
    program = PROGRAMS[program_id]
    good = [p.value for p in arguments]
    bad = [-5 if isinstance(p, IntegerProxy) else v for p, v in zip(program.leaves, good)] + good[len(program.leaves):]
    with compile_data_and_stats(thunder.compile_data(jf), thunder.compile_stats(jf)):
        with pytest.raises(GuardFailure) as failure:
            check_guards(program_id, *bad)
    assert type(failure.value) is GuardFailure


def _weighted_by_position(x, **kw):
    out = x
    for i, (_, v) in enumerate(kw.items()):
        out = out * (i + 2) + v
    return out


@pytest.mark.parametrize("cache", ["symbolic values", "constant values"])
def test_keyword_order_misses_the_entry(enabled, cache):
    # issue 30: the entry of f(x, a=, b=) served f(x, b=, a=) with the first order's result
    jf = thunder.jit(_weighted_by_position, cache=cache)
    x, a, b = torch.randn(3), torch.randn(3), torch.randn(3) * 10
    for kw in ({"a": a, "b": b}, {"b": b, "a": a}, {"a": a, "b": b}):
        torch.testing.assert_close(jf(x, **kw), _weighted_by_position(x, **kw))
    assert thunder.cache_misses(jf) == 2


def test_keyword_order_is_explained(enabled):
    jf = thunder.jit(_weighted_by_position, cache="symbolic values")
    jf(torch.randn(3), b=torch.randn(3), a=torch.randn(3))
    assert "keyword arguments in the order b, a" in metatrace.explain(jf)[0].guards


def test_shapes_of_different_lengths_differ_without_a_guard_on_their_sizes(enabled):
    # broadcasting (n,) against (4, n) asks same_shape; Python's tuple == compared n with 4 first,
    # so the entry guarded n != x.shape[0] and n == 4 recompiled
    def scaled_prefix(x, w, n):
        return x[:, :n] * w[:n]

    jf = thunder.jit(scaled_prefix, cache="symbolic values")
    x, w = torch.randn(4, 6), torch.randn(6)
    for n in (2, 3, 4):
        torch.testing.assert_close(jf(x, w, n), scaled_prefix(x, w, n))
    assert thunder.cache_misses(jf) == 1
