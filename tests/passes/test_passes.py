"""The size-producer passes (``metatrace.passes``) on small real thunder traces.

Each step's contract: after thunder's dce (``restore_producers``) and the forward/backward split
every size symbol a bound symbol uses is defined before the use; number ops that a grad rule put
after the tensor whose size they define are hoisted before it (``hoist_producers``); after an
executor pass's ``TraceSubstitutionProcessor`` re-run number ops keep their old names, renamed
sizes are carried and earlier traces stay valid (``keep_size_names``); and the compiled functions
still compute what eager PyTorch does. Tests named ``..._without_...`` knock one step out and show
the trace it leaves broken: the scenario really needs that step.
"""

from __future__ import annotations

import inspect

from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

import thunder
import thunder.core.prims as prims
import thunder.core.transform_common as transform_common
import thunder.transforms.autodiff as autodiff
from thunder.core.compile_data import compile_data_and_stats
from thunder.core.proxies import NumberProxy
from thunder.core.trace import from_trace
from thunder.core.trace_interpreter import TraceSubstitutionProcessor

import metatrace
import metatrace.passes.grad_transform as grad_transform
import metatrace.passes.size_producers as size_producers
from metatrace.checker import check_trace, find_orphans
from metatrace.state.compile_context import compile_step
from metatrace.passes.hoist_producers import hoist_size_producers, is_number_op
from metatrace.passes.keep_size_names import keep_size_names, renames
from metatrace.passes.restore_producers import index_after, restore_size_producers
from split_capture import captured_joint_traces


def _pad(a, n):
    return F.pad(a, (0, n)) * 2


def _pad_grad(a, n):
    return (F.pad(a, (0, n)) * 2).sin()


def _slice_grad(a, i):
    return (a[:, 1:i:2] * 3).exp()


def _cat_grad(a, b):
    return torch.cat([a, b], 1).relu()


# name -> (function, argument factory, whether to take gradients)
CASES = {
    "pad": (_pad, lambda: (torch.randn(4, 6), 3), False),
    "pad_grad": (_pad_grad, lambda: (torch.randn(4, 6, requires_grad=True), 3), True),
    "slice_grad": (_slice_grad, lambda: (torch.randn(8, 10, requires_grad=True), 7), True),
    "cat_grad": (_cat_grad, lambda: (torch.randn(3, 4, requires_grad=True), torch.randn(3, 5, requires_grad=True)), True),
}


def _compile(name):
    """(jitted function, its output, eager output, its input grads, eager input grads)."""
    fn, make, grad = CASES[name]
    torch.manual_seed(0)
    args = make()
    eager_args = [a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a for a in args]
    jf = thunder.jit(fn, cache="symbolic values")
    out, expected = jf(*args), fn(*eager_args)
    grads = expected_grads = None
    if grad:
        out.sum().backward()
        expected.sum().backward()
        grads = [a.grad for a in args if isinstance(a, torch.Tensor)]
        expected_grads = [a.grad for a in eager_args if isinstance(a, torch.Tensor)]
    return SimpleNamespace(jf=jf, out=out, expected=expected, grads=grads, expected_grads=expected_grads)


def _traces(jf) -> list:
    return [*thunder.last_traces(jf), *(thunder.last_backward_traces(jf) or [])]


def _provenance(trace) -> str:
    p = trace.get_provenance()
    return p.pss if p is not None else ""



@pytest.fixture(scope="module")
def compiled(module_enabled):
    return {name: _compile(name) for name in CASES}


@pytest.fixture(scope="module")
def grad_trace(compiled):
    """``_slice_grad``'s joint trace as the grad transform left it (before dce and the split)."""
    return next(t for t in thunder.last_traces(compiled["slice_grad"].jf) if "Grad transform" in _provenance(t))


@pytest.fixture(scope="module")
def joint(module_enabled):
    """(``_slice_grad``'s joint trace as the forward/backward split got it, its jitted function)."""
    with captured_joint_traces() as joints:
        jf = _compile("slice_grad").jf
    return joints[-1], jf


def _thunder_dce(trace):
    return transform_common.dce.__wrapped__(trace)  # thunder's own, under metatrace's wrapper


# -- the whole pipeline -------------------------------------------------------------------------


@pytest.mark.parametrize("name", CASES)
def test_every_trace_defines_each_size_before_use(compiled, name):
    for trace in _traces(compiled[name].jf):
        check_trace(trace, thunder_checks=False)


@pytest.mark.parametrize("name", CASES)
def test_results_equal_eager(compiled, name):
    torch.testing.assert_close(compiled[name].out, compiled[name].expected)


@pytest.mark.parametrize("name", [name for name, case in CASES.items() if case[2]])
def test_gradients_equal_eager(compiled, name):
    torch.testing.assert_close(compiled[name].grads, compiled[name].expected_grads)


# -- restore_producers: after dce and the forward/backward split ---------------------------------


def test_thunder_dce_drops_size_producers(grad_trace):
    assert find_orphans(_thunder_dce(grad_trace))


def test_restore_after_dce_defines_every_size(grad_trace):
    restored = restore_size_producers(grad_trace, _thunder_dce(grad_trace))
    assert find_orphans(restored) == []


def test_restore_keeps_what_dce_kept_in_order(grad_trace):
    dced = _thunder_dce(grad_trace)
    kept = list(dced.bound_symbols)
    restored = restore_size_producers(grad_trace, dced).bound_symbols
    positions = [next(i for i, b in enumerate(restored) if b is k) for k in kept]
    assert positions == sorted(positions)


def test_restored_producers_are_bound_symbols_dce_dropped(grad_trace):
    dced = _thunder_dce(grad_trace)
    kept_ids = {id(b) for b in dced.bound_symbols}
    before_ids = {id(b) for b in grad_trace.bound_symbols}
    added = [b for b in restore_size_producers(grad_trace, dced).bound_symbols if id(b) not in kept_ids]
    assert added and all(id(b) in before_ids or b.sym.name == "shape" for b in added)


def test_restore_returns_a_new_trace_and_leaves_dces_alone(grad_trace):
    dced = _thunder_dce(grad_trace)
    kept = list(dced.bound_symbols)
    restored = restore_size_producers(grad_trace, dced)
    assert restored is not dced and dced.bound_symbols == kept


def test_restore_names_itself_in_the_provenance(grad_trace):
    restored = restore_size_producers(grad_trace, _thunder_dce(grad_trace))
    assert "metatrace: restored" in str(restored.get_provenance())


def test_index_after_wants_the_orphaned_sizes(grad_trace):
    dced = _thunder_dce(grad_trace)
    assert set(index_after(dced).wanted) == {o.symbol for o in find_orphans(dced)}


def test_restore_leaves_a_trace_without_orphans_alone(grad_trace):
    after = from_trace(grad_trace)
    after.bound_symbols = list(grad_trace.bound_symbols)
    kept = after.bound_symbols
    assert restore_size_producers(grad_trace, after).bound_symbols is kept


def test_wrapped_dce_is_thunders_outside_symbolic_values(grad_trace):
    printed = lambda trace: [str(b) for b in trace.bound_symbols]  # (the header has the pass's time)
    assert printed(transform_common.dce(grad_trace)) == printed(_thunder_dce(grad_trace))


@pytest.mark.parametrize("name", ["pad_grad", "slice_grad", "cat_grad"])
def test_without_restore_traces_use_undefined_sizes(module_enabled, monkeypatch, name):
    monkeypatch.setattr(size_producers, "restore_size_producers", lambda before, after: after)
    assert any(find_orphans(t) for t in _traces(_compile(name).jf))


def _thunder_split(joint, jf):
    with compile_data_and_stats(thunder.compile_data(jf), thunder.compile_stats(jf)):
        # thunder's own split, under every wrapper metatrace's rows put around it
        return inspect.unwrap(autodiff.split_into_forward_and_backward)(joint)


def test_thunder_split_leaves_forward_sizes_undefined(joint):
    forward, _ = _thunder_split(*joint)
    assert find_orphans(forward)


def test_restore_after_split_defines_every_forward_size(joint):
    trace, jf = joint
    forward, _ = _thunder_split(trace, jf)
    assert find_orphans(restore_size_producers(trace, forward)) == []


# -- hoist_producers: number ops a grad rule put after the tensor whose size they define ---------


def _moved_to_end(trace, bsym):
    """A copy of ``trace`` with ``bsym`` moved just before the return."""
    moved = from_trace(trace)
    rest = [b for b in trace.bound_symbols if b is not bsym]
    moved.bound_symbols = [*rest[:-1], bsym, rest[-1]]
    return moved


def _floordiv(trace):
    return next(b for b in trace.bound_symbols if b.sym.name == "py_floordiv")


def _first_user(trace, name):
    return next(i for i, b in enumerate(trace.bound_symbols)
                if any(s.name == name for p in b.flat_proxy_outs for s in getattr(p, "_shape", ())
                       if isinstance(s, NumberProxy)))


def test_a_late_producer_leaves_a_size_undefined(grad_trace):
    late = _moved_to_end(grad_trace, _floordiv(grad_trace))
    assert find_orphans(late)


def test_hoist_defines_every_size(grad_trace):
    late = _moved_to_end(grad_trace, _floordiv(grad_trace))
    assert find_orphans(hoist_size_producers(late)) == []


def test_hoist_moves_the_producer_before_its_first_tensor(grad_trace):
    producer = _floordiv(grad_trace)
    hoisted = hoist_size_producers(_moved_to_end(grad_trace, producer))
    position = next(i for i, b in enumerate(hoisted.bound_symbols) if b is producer)
    assert position < _first_user(hoisted, producer.output.name)


def test_hoist_keeps_every_bound_symbol(grad_trace):
    late = _moved_to_end(grad_trace, _floordiv(grad_trace))
    assert sorted(map(id, hoist_size_producers(late).bound_symbols)) == sorted(map(id, grad_trace.bound_symbols))


def test_hoist_leaves_a_trace_in_order_alone(grad_trace):
    trace = from_trace(grad_trace)
    trace.bound_symbols = list(grad_trace.bound_symbols)
    kept = trace.bound_symbols
    assert hoist_size_producers(trace).bound_symbols is kept


def test_number_ops_are_number_to_number_bound_symbols(grad_trace):
    kinds = {b.sym.name: is_number_op(b) for b in grad_trace.bound_symbols}
    assert (kinds["py_floordiv"], kinds["shape"], kinds["slice_prim"]) == (True, False, False)


@pytest.mark.parametrize("name", ["pad_grad", "slice_grad", "cat_grad"])
def test_without_hoist_the_grad_trace_uses_undefined_sizes(module_enabled, monkeypatch, name):
    monkeypatch.setattr(grad_transform, "hoist_size_producers", lambda trace: trace)
    assert any(find_orphans(t) for t in _traces(_compile(name).jf))


# -- keep_size_names: through a TraceSubstitutionProcessor ---------------------------------------


class _Rerun(TraceSubstitutionProcessor):
    """Re-runs every bound symbol through its symbol, as executor passes do."""

    def process_bsym(self, bsym):
        b = bsym.from_bsym_swap_proxies(self.swap_map)
        if bsym.sym.id == prims.PrimIDs.RETURN or bsym.sym.name.startswith("unpack"):
            self.add_processed_bsyms([b])
            self.set_result(bsym.output)
            return
        self.add_bsyms_from_function(b.sym, *b.args, **b.kwargs)


def _rerun(trace, jf, *, keep: bool):
    processor = _Rerun(trace)
    with compile_step(collect=False), compile_data_and_stats(thunder.compile_data(jf), thunder.compile_stats(jf)):
        TraceSubstitutionProcessor.__call__.__wrapped__(processor)
    if keep:
        keep_size_names(processor)
    return processor.new_trace


def _number_op_outputs(trace) -> set[str]:
    return {o.name for b in trace.bound_symbols if is_number_op(b) for o in b.flat_proxy_outs}


def test_a_rerun_alone_gives_number_ops_new_names(compiled, grad_trace):
    new = _rerun(grad_trace, compiled["slice_grad"].jf, keep=False)
    assert not _number_op_outputs(grad_trace) <= _number_op_outputs(new)


def test_rerun_number_ops_keep_their_old_names(compiled, grad_trace):
    new = _rerun(grad_trace, compiled["slice_grad"].jf, keep=True)
    assert _number_op_outputs(grad_trace) <= _number_op_outputs(new)


def test_keep_size_names_leaves_the_old_trace_unchanged(compiled, grad_trace):
    printed = str(grad_trace)
    _rerun(grad_trace, compiled["slice_grad"].jf, keep=True)
    assert str(grad_trace) == printed


def test_rerun_with_kept_names_defines_every_size(compiled, grad_trace):
    new = _rerun(grad_trace, compiled["slice_grad"].jf, keep=True)
    assert find_orphans(new) == []


def test_without_keep_size_names_the_executor_trace_uses_undefined_sizes(module_enabled, monkeypatch):
    monkeypatch.setattr(size_producers, "keep_size_names", lambda processor: None)
    assert find_orphans(thunder.last_traces(_compile("pad").jf)[-1])


def _pad_and_mul_outputs(trace):
    return [b.flat_proxy_outs[0] for b in trace.bound_symbols if b.sym.name in ("pad", "mul")]


def test_executor_trace_carries_the_renamed_size(compiled):
    pad, mul = _pad_and_mul_outputs(thunder.last_traces(compiled["pad"].jf)[-1])
    assert mul._shape[1].name == pad._shape[1].name


def test_the_first_trace_keeps_its_own_size_name(compiled):
    first, final = thunder.last_traces(compiled["pad"].jf)[0], thunder.last_traces(compiled["pad"].jf)[-1]
    assert _pad_and_mul_outputs(first)[1]._shape[1].name != _pad_and_mul_outputs(final)[1]._shape[1].name


def test_earlier_traces_keep_their_own_size_names(compiled):
    for trace in thunder.last_traces(compiled["pad"].jf):
        check_trace(trace, thunder_checks=False)


def _n(name):
    return SimpleNamespace(name=name)


def test_renames_follow_chains_of_candidates():
    assert renames({"i1": _n("i2"), "i2": _n("i3")}, inputs=set(), kept=set())["i1"].name == "i3"


def test_renames_never_rename_an_input_size():
    assert "i1" not in renames({"i1": _n("i2")}, inputs={"i1"}, kept=set())


def test_renames_never_rename_a_kept_number():
    assert "i1" not in renames({"i1": _n("i2")}, inputs=set(), kept={"i1"})


def test_renames_stop_at_an_input():
    assert renames({"i1": _n("i2"), "i2": _n("i3")}, inputs={"i2"}, kept=set())["i1"].name == "i2"


def _split_heads(x, w):
    """GPT-2's attention input: a projection split in three, each viewed as heads with ``-1``."""
    q, k, v = (x @ w).split(4, dim=2)
    B, T, _ = v.shape
    return (q.view(B, T, -1, 2).transpose(1, 2) * v.view(B, T, -1, 2).transpose(1, 2)).sum()


def test_a_size_still_bound_after_a_rerun_split_keeps_its_name(module_enabled):
    """The grad transform re-runs ``split``, whose subsymbols compute its outputs' sizes anew;
    the old size stays bound by the ``shape`` that ``view(-1)`` reads, and the backward's
    ``reshape`` takes it: renaming it there to the new name, which only the forward's ``split``
    defines, left the backward a size defined nowhere."""
    jf = thunder.jit(_split_heads, cache="symbolic values")
    w = torch.randn(4, 12, requires_grad=True)
    for T in (3, 5):
        x = torch.randn(2, T, 4)
        jf(x, w).backward()
        expected = torch.autograd.grad(_split_heads(x, w), w)[0]
        torch.testing.assert_close(w.grad, expected)
        w.grad = None
    assert thunder.cache_misses(jf) == 1
    for trace in (*thunder.last_traces(jf), *thunder.last_backward_traces(jf)):
        check_trace(trace, thunder_checks=False)
