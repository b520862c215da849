"""The seed example, enable/disable, recording on plain numbers, the strict checker."""

from __future__ import annotations

import pytest
import torch

import thunder
import thunder.core.prims as prims

import metatrace
from metatrace.checker import TraceCheckError, find_orphans
from metatrace.codegen.generate import prim_symbols


def _slice_line(trace) -> str:
    return next(ln for ln in str(trace).splitlines() if "prims.slice_prim" in ln)


def test_seed_slice_example_has_producers_and_matches_eager(enabled):
    jf = thunder.jit(lambda a, i: a[:, :, 1:i:2], cache="symbolic values")
    a = torch.randn(8, 16, 4)
    for i in (2, 3):
        torch.testing.assert_close(jf(a, i), a[:, :, 1:i:2])
    first = thunder.last_traces(jf)[0]
    metatrace.check_trace(first)
    # The last output size is computed from i by recorded ops: (i - 1 + 2 - 1) // 2 == i // 2.
    slice_bsym = next(b for b in _walk(first.bound_symbols) if b.sym.id == prims.PrimIDs.SLICE)
    last = slice_bsym.output._shape[-1]
    producer = next(b for b in _walk(first.bound_symbols) if any(o is last for o in b.flat_proxy_outs))
    assert producer.sym.id == prims.PrimIDs.PY_FLOORDIV
    assert [getattr(x, "name", x) for x in producer.args] == ["i", 2]


def test_seed_slice_without_arithmetic_reuses_the_input_symbol(enabled):
    jf = thunder.jit(lambda a, i: a[:, :, :i], cache="symbolic values")
    a = torch.randn(8, 16, 4)
    for i in (2, 3):
        assert torch.equal(jf(a, i), a[:, :, :i])
    first = thunder.last_traces(jf)[0]
    metatrace.check_trace(first)
    line = _slice_line(first)
    (a_proxy,) = [p for p in first.args if p.name == "a"]
    assert f"f32[{a_proxy._shape[0].name}=8, " in line  # the output keeps the input's size symbol
    assert "i=2]" in line  # ... and the last size is the argument i itself: nothing recorded
    assert thunder.cache_misses(jf) == 1


def test_stock_thunder_leaves_orphans_that_the_checker_reports():
    assert not metatrace.is_enabled()
    jf = thunder.jit(lambda a, i: a[:, :, :i], cache="symbolic values")
    jf(torch.randn(8, 16, 4), 2)
    first = thunder.last_traces(jf)[0]
    orphans = find_orphans(first)
    assert len(orphans) == 3 and all("size of output" in o.role for o in orphans)
    with pytest.raises(TraceCheckError, match="3 undefined symbol use"):
        metatrace.check_trace(first)


def _walk(bsyms):
    for b in bsyms:
        yield from _walk(b.subsymbols)
        yield b


def test_constant_values_record_nothing(enabled):
    """Under the default cache the rewritten metas compute directly: the trace does not grow."""
    fn = lambda a, i: (a[:, :, 1:i:2] * 2).sum(0)  # noqa: E731
    a = torch.randn(8, 16, 4)
    jf_on = thunder.jit(fn)
    jf_on(a, 3)
    on = str(thunder.last_traces(jf_on)[0])
    metatrace.disable()
    jf_off = thunder.jit(fn)
    jf_off(a, 3)
    off = str(thunder.last_traces(jf_off)[0])
    metatrace.enable()
    assert on.count("\n") == off.count("\n")
    assert "py_floordiv" not in on


def test_enable_disable_restore_thunder_exactly():
    symbols = prim_symbols()
    from thunder.executors.pythonex import ex as pythonex

    before = {pid: sym.meta for pid, sym in symbols.items()}
    impl_before, op_before = dict(pythonex.implmap), dict(pythonex.opmap)
    handle = metatrace.enable()
    assert metatrace.enable() is not None and metatrace.is_enabled()  # idempotent
    swapped = sum(symbols[pid].meta is not before[pid] for pid in symbols)
    assert swapped >= 150
    # Executors' copies of a prim meta are swapped too (torchex registers slice with prims' meta).
    from thunder.executors.torchex import slice_prim_impl

    assert slice_prim_impl.meta is prims.slice_prim.meta
    metatrace.disable()
    metatrace.disable()  # idempotent
    assert all(symbols[pid].meta is before[pid] for pid in symbols)
    assert slice_prim_impl.meta is before[prims.PrimIDs.SLICE]
    assert dict(pythonex.implmap) == impl_before and dict(pythonex.opmap) == op_before
    del handle


def test_context_manager_disables_on_exit():
    with metatrace.enable():
        assert metatrace.is_enabled()
    assert not metatrace.is_enabled()


def test_recorded_max_and_min_execute(enabled):
    """prims.maximum on numbers needs the python-executor implementation registered on enable."""

    def fn(a, n):
        return a.reshape(max(n, 2), -1)

    jf = thunder.jit(fn, cache="symbolic values")
    a = torch.randn(4, 6)
    for n in (3, 4):
        torch.testing.assert_close(jf(a, n), fn(a, n))
