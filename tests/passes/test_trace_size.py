"""What metatrace adds to a trace stays small: compile cost is linear in the nested bound symbols
every later pass re-traces (the grad transform, the executor passes).

- a composite symbol binds each tensor's sizes once (``metatrace.proxies.shape_reads``), never re-binds
  sizes its scope already defines;
- thunder's own decisions inside composites (``compute_broadcast_shape``'s ``s == 1``) are
  guards, not ``prims.eq`` bound symbols;
- integer ``//`` on symbols is one ``prims.py_floordiv`` (thunder's clang composes eight ops);
- a tensor's numel is multiplied out once per scope, and ``x * 1`` / ``x + 0`` record nothing;
- a size minus itself (the zero widths of pad's and slice's cotangents) is 0, not a ``prims.sub``.

Each claim is checked over every trace of the entry (forward, after the grad split, backward,
executor stages) of several functions, with values and gradients against eager PyTorch.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import thunder
from thunder.core.proxies import NumberProxy

from metatrace.checker import check_trace
from metatrace.proxies.shape_reads import ScopeState


def _all_traces(jf) -> list:
    return [*thunder.last_traces(jf), *(thunder.last_backward_traces(jf) or [])]


def _scopes(bsyms, depth=0):
    """(depth, list of bound symbols) for the trace's top level and every subsymbol list."""
    yield depth, bsyms
    for b in bsyms:
        if b.subsymbols:
            yield from _scopes(b.subsymbols, depth + 1)


def _redundant_shape_bindings(trace) -> list[str]:
    """``prims.shape`` bound symbols inside a composite whose every output an earlier bound symbol
    of the same scope already defines."""
    found = []
    for depth, scope in _scopes(trace.bound_symbols):
        if depth == 0:
            continue
        defined = set()
        for b in scope:
            outs = [o.name for o in b.flat_proxy_outs]
            if b.sym.name == "shape" and outs and all(o in defined for o in outs):
                found.append(str(b))
            defined.update(outs)
    return found


def _number_ops(trace, name: str) -> list:
    """Bound symbols named ``name`` at any depth whose arguments are all numbers."""
    return [
        b
        for _, scope in _scopes(trace.bound_symbols)
        for b in scope
        if b.sym.name == name and b.args and all(isinstance(a, (int, float, NumberProxy)) for a in b.args)
    ]


def _run(fn, calls, grad: bool):
    jf = thunder.jit(fn, cache="symbolic values")
    for shape in calls:
        torch.manual_seed(0)
        x = torch.randn(*shape, requires_grad=grad)
        x_eager = x.detach().clone().requires_grad_(grad)
        out, expected = jf(x), fn(x_eager)
        torch.testing.assert_close(out, expected)
        if grad:
            out.sum().backward()
            expected.sum().backward()
            torch.testing.assert_close(x.grad, x_eager.grad)
    return jf


FUNCTIONS = {
    "broadcasting_chain": (lambda x: ((x * x + x) * 2 - x).sum(-1), [(3, 4), (5, 6)]),
    "layer_norm": (lambda x: F.layer_norm(x, x.shape[-1:]) * 2, [(2, 5, 8), (3, 7, 8)]),
    "softmax_of_a_reshape": (lambda x: torch.softmax(x.reshape(-1, 4), -1), [(2, 8), (3, 8)]),
    "attention_like": (
        lambda x: F.scaled_dot_product_attention(x, x, x, is_causal=True).transpose(1, 2).reshape(x.shape[0], x.shape[2], -1),
        [(2, 2, 4, 8), (2, 2, 6, 8)],
    ),
}


@pytest.mark.parametrize("grad", [False, True], ids=["forward", "training"])
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_no_composite_rebinds_sizes_its_scope_defines(enabled, name, grad):
    fn, calls = FUNCTIONS[name]
    jf = _run(fn, calls, grad)
    redundant = [s for trace in _all_traces(jf) for s in _redundant_shape_bindings(trace)]
    assert redundant == []


@pytest.mark.parametrize("grad", [False, True], ids=["forward", "training"])
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_traces_stay_checked_and_one_entry_serves_the_sizes(enabled, name, grad):
    fn, calls = FUNCTIONS[name]
    jf = _run(fn, calls, grad)
    for trace in _all_traces(jf):
        check_trace(trace)
    assert thunder.cache_misses(jf) == 1


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_broadcast_decisions_are_guards_not_bound_symbols(enabled, name):
    fn, calls = FUNCTIONS[name]
    jf = _run(fn, calls, grad=True)
    comparisons = [b for t in _all_traces(jf) for op in ("eq", "ne") for b in _number_ops(t, op)]
    assert comparisons == []


def test_integer_floor_division_of_sizes_is_one_bound_symbol(enabled):
    jf = _run(lambda x: x.reshape(-1, 4) * 2, [(2, 8), (3, 8), (5, 4)], grad=True)
    trace = thunder.last_traces(jf)[0]
    assert [b.sym.name for b in _number_ops(trace, "py_floordiv")] == ["py_floordiv"]


def test_integer_floor_division_composes_no_signbit_or_fmod(enabled):
    jf = _run(lambda x: x.reshape(-1, 4) * 2, [(2, 8), (3, 8)], grad=True)
    composed = [b for t in _all_traces(jf) for op in ("signbit", "fmod") for b in _number_ops(t, op)]
    assert composed == []


def test_numel_is_multiplied_out_once_per_scope(enabled):
    # clang.reshape reads a.numel twice (a check, then the inferred size); numel = 1; numel *= 4
    # folds to 4: one product, i0 * i1, in the reshape's scope
    jf = _run(lambda x: x.reshape(-1, 4) * 2, [(2, 8), (3, 8)], grad=False)
    assert len(_number_ops(thunder.last_traces(jf)[0], "mul")) == 1


def test_a_one_dimensional_numel_is_a_new_number(enabled):
    # the product of one size is the size (1 * i0 folds); reshape still infers -1 from it
    jf = _run(lambda x: x.reshape(4, -1).t() * 2, [(24,), (36,)], grad=True)
    assert thunder.cache_misses(jf) == 1


def _self_subtractions(trace) -> list:
    return [b for b in _number_ops(trace, "sub") if len(b.args) == 2 and b.args[0] is b.args[1]]


@pytest.mark.parametrize("grad", [False, True], ids=["forward", "training"])
def test_a_size_minus_itself_records_nothing(enabled, grad):
    # slicing's and cat's grad rules pad the cotangent with widths such as ``B - B``
    def fn(x):
        return torch.cat([x[:, 1:], x[:, :1]], 1) * x.shape[1]

    jf = _run(fn, [(2, 5), (3, 7), (4, 2)], grad)
    found = [str(b) for t in _all_traces(jf) for b in _self_subtractions(t)]
    assert found == []


def test_a_size_minus_itself_still_serves_every_size(enabled):
    def fn(x):
        return torch.cat([x[:, 1:], x[:, :1]], 1) * x.shape[1]

    # (the sizes keep both slices longer than 1: a size-1 slice is one more entry, guarded)
    jf = _run(fn, [(2, 5), (3, 7), (4, 3)], grad=True)
    assert thunder.cache_misses(jf) == 1


class _Bsym:
    def __init__(self, *names):
        self.flat_proxy_outs = [type("P", (), {"name": n})() for n in names]


def test_scope_index_extends_incrementally():
    scope = [_Bsym("a")]
    index = ScopeState(scope)
    assert index.defined() == {"a"}
    scope.append(_Bsym("b", "c"))
    assert index.defined() == {"a", "b", "c"}


def test_scope_index_forgets_outputs_of_a_shortened_scope():
    scope = [_Bsym("a"), _Bsym("b")]
    index = ScopeState(scope)
    index.defined()
    scope[:] = [scope[0]]  # recording.prune_unused rewrites a scope in place
    assert index.defined() == {"a"}


def test_scope_index_forgets_outputs_of_a_replaced_tail():
    scope = [_Bsym("a"), _Bsym("b")]
    index = ScopeState(scope)
    index.defined()
    scope[:] = [scope[0], _Bsym("c")]  # same length, another last bound symbol
    assert index.defined() == {"a", "c"}


@pytest.mark.parametrize("n", [0, 1, 3])
def test_numel_of_a_one_dimensional_tensor_is_a_defined_number(enabled, n):
    # the product of one size is the size itself: torch.numel must still return a number the
    # trace defines (it failed with KeyError in the executor pass)
    jf = thunder.jit(lambda a: torch.numel(a) * a, cache="symbolic values")
    a = torch.randn(n)
    torch.testing.assert_close(jf(a), torch.numel(a) * a)
    for trace in _all_traces(jf):
        check_trace(trace)
