"""The forward/backward split keeps the backward out of the forward when a factory's sizes are
inputs of the computation (``passes.rebindings``).

A factory sized by module globals (``torch.zeros(N, M)``) or closure variables has sizes that are
number inputs of the computation, and the backward's tensors of that shape carry them. The
backward binds the sizes of such a tensor with a ``shape`` (``(i92, M) = shape(t94)``, so that a
recorded ``pad`` width can read ``i92``), which re-binds ``M``; thunder's split takes every bound
symbol outputting a name the forward needs (inputs included) as forward, and pulled that binding,
its tensor and their whole chain back to the incoming gradient into the forward: the forward
read ``get_grad``'s output, which only the joint trace has (``UnboundLocalError``). Sizes read from
a module's attributes (static constants) are covered as the third source of the same class.
"""

from __future__ import annotations

import inspect

import pytest
import torch

import thunder
import thunder.transforms.autodiff as autodiff
from thunder.core.compile_data import compile_data_and_stats
from thunder.core.proxies import Proxy
from thunder.core.pytree import tree_iter

from metatrace.checker import check_trace, find_orphans
from metatrace.passes.rebindings import without_rebindings
from metatrace.passes.restore_producers import restore_size_producers
from split_capture import captured_joint_traces

# read by the "global" functions below: metatrace makes them number inputs of the computation
N, M = 4, 3

SIZES = [(4, 3), (6, 5), (3, 2)]


def _use(op, d, x, s):
    """``d``, a factory's zeros sized (n, m), written or read with ``op``; x and s are (n, m)."""
    if op == "setitem":
        d[1:] = s[1:]
        return (d * x).sum()
    if op == "copy_":
        d[1:].copy_(s[1:])
        return (d * x).sum()
    if op == "index_copy_":
        d.index_copy_(0, torch.arange(1, d.shape[0]), s[1:])
        return (d * x).sum()
    assert op == "slice"  # no in-place write
    return ((d + x)[1:] * 2 * s[1:]).sum()


OPS = ["setitem", "copy_", "index_copy_", "slice"]


def _from_globals(op):
    def f(x, s):
        return _use(op, torch.zeros(N, M), x, s)

    def resize(n, m):
        global N, M
        N, M = n, m

    return f, resize


def _from_closure(op):
    n, m = 4, 3

    def f(x, s):
        return _use(op, torch.zeros(n, m), x, s)

    def resize(a, b):
        nonlocal n, m
        n, m = a, b

    return f, resize


class _Sized(torch.nn.Module):
    def __init__(self, op):
        super().__init__()
        self.op, self.n, self.m = op, 4, 3

    def forward(self, x, s):
        return _use(self.op, torch.zeros(self.n, self.m), x, s)


def _from_attributes(op):
    module = _Sized(op)

    def resize(n, m):
        module.n, module.m = n, m

    return module, resize


SOURCES = {"globals": _from_globals, "closure": _from_closure, "attributes": _from_attributes}


@pytest.fixture
def restore_globals():
    yield
    global N, M
    N, M = 4, 3


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("source", SOURCES)
def test_factory_sized_by_inputs_matches_eager(enabled, restore_globals, source, op):
    fn, resize = SOURCES[source](op)
    jf = thunder.jit(fn, cache="symbolic values")
    for n, m in SIZES:
        resize(n, m)
        torch.manual_seed(n * 10 + m)
        x, s = torch.randn(n, m, requires_grad=True), torch.randn(n, m, requires_grad=True)
        ex, es = (t.detach().clone().requires_grad_() for t in (x, s))
        out, expected = jf(x, s), fn(ex, es)
        torch.testing.assert_close(out, expected)
        out.backward()
        expected.backward()
        torch.testing.assert_close((x.grad, s.grad), (ex.grad, es.grad))
        for trace in (*thunder.last_traces(jf), *thunder.last_backward_traces(jf)):
            check_trace(trace, thunder_checks=False)


# -- the pass on the joint trace the split gets ---------------------------------------------------


@pytest.fixture
def joint(enabled, restore_globals):
    """(the globals/setitem case's joint trace as metatrace's split wrapper got it, its jitted function)."""
    with captured_joint_traces() as joints:
        fn, _ = _from_globals("setitem")
        jf = thunder.jit(fn, cache="symbolic values")
        jf(torch.randn(4, 3, requires_grad=True), torch.randn(4, 3, requires_grad=True))
    return joints[-1], jf


def _thunder_split(trace, jf):
    with compile_data_and_stats(thunder.compile_data(jf), thunder.compile_stats(jf)):
        # thunder's own split, under every wrapper metatrace's rows put around it
        return inspect.unwrap(autodiff.split_into_forward_and_backward)(trace)


def _rebound(trace) -> list[str]:
    """Names a top-level ``shape`` outputs that a parameter or an earlier bound symbol bound."""
    bound = {p.name for p in tree_iter((trace.args, trace.kwargs)) if isinstance(p, Proxy)}
    rebound = []
    for b in trace.bound_symbols:
        if b.sym.name == "shape":
            rebound += [o.name for o in b.flat_proxy_outs if o.name in bound]
        bound.update(o.name for o in b.flat_proxy_outs)
    return rebound


def test_the_joint_trace_rebinds_an_input_size(joint):
    trace, _ = joint
    assert set(_rebound(trace)) & {"N", "M"}


def _uses_incoming_gradient(forward, joint_trace) -> bool:
    """Whether ``forward`` takes what the joint trace's ``get_grad`` outputs (backward only)."""
    grads = {o.name for b in joint_trace.bound_symbols if b.sym.name == "get_grad" for o in b.flat_proxy_outs}
    return any(a.name in grads for b in forward.bound_symbols for a in b.flat_proxy_args)


def test_thunder_split_without_dropping_rebindings_puts_the_backward_in_the_forward(joint):
    trace, jf = joint
    forward, _ = _thunder_split(trace, jf)
    assert _uses_incoming_gradient(forward, trace)
    assert find_orphans(forward)


def test_without_rebindings_binds_each_name_once(joint):
    trace, _ = joint
    assert _rebound(without_rebindings(trace)) == []


def test_split_after_dropping_rebindings_keeps_the_forward_defined(joint):
    trace, jf = joint
    dropped = without_rebindings(trace)
    forward, backward = _thunder_split(dropped, jf)
    assert find_orphans(restore_size_producers(dropped, forward)) == []
    assert not _uses_incoming_gradient(forward, dropped)


def test_without_rebindings_returns_a_new_trace_with_its_provenance(joint):
    trace, _ = joint
    before = [str(b) for b in trace.bound_symbols]
    dropped = without_rebindings(trace)
    assert dropped is not trace and [str(b) for b in trace.bound_symbols] == before
    assert "metatrace: dropped" in dropped.get_provenance().pss
    assert without_rebindings(dropped) is dropped
