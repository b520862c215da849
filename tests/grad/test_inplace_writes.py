"""Autograd metadata after in-place writes follows eager (issue 51): a write of a tensor that
requires grad into a fresh buffer makes the buffer require grad, with its base and every view of
the base, and backward reaches the written tensor.

The generated matrix of every destination kind x every write x source requires grad or not x
grad mode is ``tests/sweeps/test_inplace_matrix.py``; these are the named shapes a user writes
(collate, padding, a view written and its base returned, a flag read after a write) and the
rules' edges (``out=``, ``fill_``, integer destinations, leaves), each over several sizes.
"""

from __future__ import annotations

import copy

import pytest
import torch

import thunder

import metatrace
from metatrace.checker import check_trace
from metatrace.grad.written_inputs import WrittenInputError


def _collate(seqs, pad):
    out = seqs[0].new_full((len(seqs), max(t.shape[0] for t in seqs), seqs[0].shape[-1]), pad)
    for i, t in enumerate(seqs):
        out[i, : t.shape[0]] = t
    return out


def _leaves(lengths, requires_grad=True, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(n, 3, generator=g).requires_grad_(requires_grad) for n in lengths]


def _backward(out):
    (out * torch.linspace(-1, 1, out.numel()).reshape(out.shape)).sum().backward()


@pytest.mark.parametrize("lengths", [(3, 5), (4, 2), (6, 1), (2, 2)])
def test_collate_returns_a_tensor_that_requires_grad(enabled, lengths):
    jf = thunder.jit(_collate, cache="symbolic values")
    out = jf(_leaves(lengths), 0.0)
    assert out.requires_grad


def test_collate_gradients_equal_eager_over_lengths(enabled):
    jf = thunder.jit(_collate, cache="symbolic values")
    for lengths in [(3, 5), (4, 2), (6, 7), (2, 2)]:
        got, want = _leaves(lengths), _leaves(lengths)
        _backward(jf(got, 0.0))
        _backward(_collate(want, 0.0))
        for a, b in zip(got, want):
            torch.testing.assert_close(a.grad, b.grad)
    # which sequence is longest (max's decision) and equal lengths (the grad transform's slice
    # rule) are guards: (3, 5) and (6, 7) share an entry, (4, 2) and (2, 2) take one each
    assert thunder.cache_misses(jf) == 3


def test_collate_without_grad_returns_no_grad(enabled):
    out = thunder.jit(_collate, cache="symbolic values")(_leaves((3, 5), requires_grad=False), 0.0)
    assert not out.requires_grad and out.grad_fn is None


def test_collate_under_no_grad_returns_no_grad(enabled):
    jf = thunder.jit(_collate, cache="symbolic values")
    with torch.no_grad():
        out = jf(_leaves((3, 5)), 0.0)
    assert not out.requires_grad


def _flag_after_write(x, s):
    buf = torch.zeros_like(x)
    before = buf.requires_grad
    buf.add_(s)
    return buf * 2 if buf.requires_grad and not before else buf * 3


@pytest.mark.parametrize("requires_grad", [True, False])
def test_requires_grad_read_after_a_write_follows_eager(enabled, requires_grad):
    x, s = torch.randn(3), torch.randn(3, requires_grad=requires_grad)
    got = thunder.jit(_flag_after_write, cache="symbolic values")(x, s)
    torch.testing.assert_close(got.detach(), _flag_after_write(x, s).detach())


def _base_and_view(s, view):
    b = torch.zeros(s.shape)
    d = view(b)
    d.copy_(s.reshape(-1)[: d.numel()].reshape(d.shape))
    w = b[0]  # a view of the base made after the write
    return b, d, w * 2


VIEW_KINDS = {
    "view": lambda b: b.view(b.shape[1], b.shape[0]),
    "t": lambda b: b.t(),
    "slice": lambda b: b[1:],
    "row": lambda b: b[-1],
    "unsqueeze": lambda b: b.unsqueeze(0),
    "narrow": lambda b: b.narrow(1, 0, 2),
}


@pytest.mark.parametrize("kind", VIEW_KINDS)
def test_a_write_into_a_view_reaches_its_base_and_siblings(enabled, kind):
    def fn(s):
        return _base_and_view(s, VIEW_KINDS[kind])

    jf = thunder.jit(fn, cache="symbolic values")
    for n in (4, 5, 3):
        got = torch.randn(n, 3, requires_grad=True)
        want = got.detach().clone().requires_grad_(True)
        outs, expected = jf(got), fn(want)
        for a, b in zip(outs, expected):
            torch.testing.assert_close(a, b)
        sum(o.sum() * (i + 1) for i, o in enumerate(outs)).backward()
        sum(o.sum() * (i + 1) for i, o in enumerate(expected)).backward()
        torch.testing.assert_close(got.grad, want.grad)
    assert thunder.cache_misses(jf) == 1


def test_view_writes_leave_every_trace_defined(enabled):
    jf = thunder.jit(lambda s: _base_and_view(s, VIEW_KINDS["t"]), cache="symbolic values")
    sum(o.sum() for o in jf(torch.randn(4, 3, requires_grad=True))).backward()
    for trace in [*thunder.last_traces(jf), *thunder.last_backward_traces(jf)]:
        check_trace(trace)


def _write_through_a_view_of_an_input(buf, s):
    buf[0] = s[0] * 2
    return buf[:2].sum()


def _collate_into(buf, seqs):
    for i, t in enumerate(seqs):
        buf[i, : t.shape[0]] = t


# An argument written with a tensor that requires grad: eager gives the caller's tensor a grad_fn,
# thunder cannot (metatrace.grad.written_inputs), so each raises the clear error.
WRITTEN_ARGUMENTS = {
    "through a view, a sum returned": lambda: (_write_through_a_view_of_an_input, (torch.zeros(3, 2), torch.ones(3, 2, requires_grad=True))),
    "collate into the caller's buffer, nothing returned": lambda: (_collate_into, (torch.zeros(2, 4, 3), _leaves((3, 4)))),
    "add_ into the argument, returned": lambda: (lambda x, s: x.add_(s), (torch.zeros(3), torch.ones(3, requires_grad=True))),
    "copy_ into a transposed view": lambda: (lambda x, s: x.t().copy_(s).sum(), (torch.zeros(2, 3), torch.ones(3, 2, requires_grad=True))),
}


@pytest.mark.parametrize("case", WRITTEN_ARGUMENTS)
def test_an_argument_written_with_a_tensor_that_requires_grad_raises_the_clear_error(enabled, case):
    fn, args = WRITTEN_ARGUMENTS[case]()
    with pytest.raises(WrittenInputError, match="is written in place at .*thunder cannot give the caller's tensor a grad_fn"):
        thunder.jit(fn, cache="symbolic values")(*args)


def test_an_argument_written_under_no_grad_mutates_it_as_eager(enabled):
    jf = thunder.jit(_write_through_a_view_of_an_input, cache="symbolic values")
    got_buf, want_buf = torch.zeros(3, 2), torch.zeros(3, 2)
    got, want = torch.ones(3, 2, requires_grad=True), torch.ones(3, 2, requires_grad=True)
    with torch.no_grad():
        torch.testing.assert_close(jf(got_buf, got), _write_through_a_view_of_an_input(want_buf, want))
    torch.testing.assert_close(got_buf, want_buf)


def test_batch_norm_running_statistics_are_written_without_the_error(enabled):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    eager = copy.deepcopy(model)
    x = torch.randn(5, 3)
    thunder.jit(model, cache="symbolic values")(x).sum().backward()
    eager(x).sum().backward()
    torch.testing.assert_close(model[1].running_mean, eager[1].running_mean)


def test_an_integer_destination_does_not_require_grad(enabled):
    def fn(s):
        out = torch.zeros(s.shape, dtype=torch.int64)
        out.copy_(s)
        return out

    out = thunder.jit(fn, cache="symbolic values")(torch.randn(3, requires_grad=True) * 4)
    assert not out.requires_grad


def test_a_detached_tensor_written_leaves_its_source_without_grad(enabled):
    def fn(x, s):
        d = x.detach().clone()
        d.mul_(s)
        return d

    x, s = torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)
    fn_x, fn_s = x.detach().clone().requires_grad_(True), s.detach().clone().requires_grad_(True)
    thunder.jit(fn, cache="symbolic values")(x, s).sum().backward()
    fn(fn_x, fn_s).sum().backward()
    assert x.grad is None and fn_x.grad is None
    torch.testing.assert_close(s.grad, fn_s.grad)


def test_fill_with_a_tensor_carries_its_gradient(enabled):
    def fn(s):
        out = torch.empty(2, 3)
        out.fill_(s.sum())
        return out

    got, want = torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True)
    thunder.jit(fn, cache="symbolic values")(got).sum().backward()
    fn(want).sum().backward()
    torch.testing.assert_close(got.grad, want.grad)


def test_fill_with_a_tensor_of_more_dimensions_raises_as_eager(enabled):
    fn = lambda s: torch.zeros(3).fill_(s)  # noqa: E731
    with pytest.raises(RuntimeError, match="fill_ only supports 0-dimension value tensor"):
        thunder.jit(fn, cache="symbolic values")(torch.ones(2))


def _out_add(a, out):
    torch.add(a, 1.0, out=out)
    return out


def test_out_under_grad_mode_raises_as_eager(enabled):
    with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
        thunder.jit(_out_add, cache="symbolic values")(torch.ones(3, requires_grad=True), torch.zeros(3))


def test_out_under_no_grad_writes_and_returns_out(enabled):
    jf = thunder.jit(_out_add, cache="symbolic values")
    for n in (3, 5):
        out = torch.zeros(n)
        with torch.no_grad():
            returned = jf(torch.ones(n, requires_grad=True), out)
        torch.testing.assert_close(out, torch.full((n,), 2.0))
        torch.testing.assert_close(returned, out)


def test_out_of_a_dtype_the_result_cannot_be_cast_to_raises_as_eager(enabled):
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type Long"):
        thunder.jit(_out_add, cache="symbolic values")(torch.ones(3), torch.zeros(3, dtype=torch.int64))


def test_out_of_another_shape_raises_a_clear_error(enabled):
    with pytest.raises(metatrace.MetatraceError, match="eager resizes out"):
        thunder.jit(_out_add, cache="symbolic values")(torch.ones(3), torch.zeros(2))


def _view_write(v):
    b = torch.zeros(2, v.shape[0])
    b[1].copy_(v)
    b.t()[:, 0].add_(v)
    return b, b[0] * 2


def test_a_view_write_into_an_empty_base_follows_eager(enabled):
    # (found by the fuzzer: the positions were arange(numel), a 0-d tensor for numel 0 in thunder)
    jf = thunder.jit(_view_write, cache="symbolic values")
    for n in (3, 0, 1):
        got, want = torch.arange(n, dtype=torch.float32).requires_grad_(), torch.arange(n, dtype=torch.float32).requires_grad_()
        (a, b), (c, d) = jf(got), _view_write(want)
        (a.sum() + 2 * b.sum()).backward()
        (c.sum() + 2 * d.sum()).backward()
        torch.testing.assert_close(got.grad, want.grad)


# An in-place write whose result is returned beside the tensor it wrote (or two names of it):
# after thunder's functionalization the forward returns one tensor at several positions, and
# PyTorch routes that tensor's gradient to its last position only (metatrace.grad.repeated_outputs).
REPEATED = {
    "method_result_and_base": lambda x, s: (lambda b: (b, b.add_(s)))(x * 1),
    "base_and_operator_name": lambda x, s: _iadd_aliases(x * 1, s),
    "fresh_buffer_copy_": lambda x, s: (lambda b: (b, b.copy_(s), (b * x).sum()))(torch.zeros_like(x)),
    "fresh_buffer_three_times": lambda x, s: (lambda b: (b, b.mul_(s), b))(torch.ones_like(x)),
    "index_put_result_and_base": lambda x, s: (lambda b: (b.index_put_((torch.tensor([0]),), s[:1]), b))(x.clone()),
}


def _iadd_aliases(b, s):
    d = b
    d += s  # (rebinds d to the result: b and d are the same tensor, two proxies in the trace)
    return b, d


def _weighted_loss(outputs):
    return sum((t * torch.linspace(-1, 2, t.numel()).reshape(t.shape)).sum() for t in outputs if t.requires_grad)


def _grads(fn, n, grad_x, grad_s):
    g = torch.Generator().manual_seed(n)
    x = torch.randn(n, 3, generator=g).requires_grad_(grad_x)
    s = torch.randn(n, 3, generator=g).requires_grad_(grad_s)
    loss = _weighted_loss(fn(x, s))
    if isinstance(loss, torch.Tensor):  # (0 where no output requires grad, in eager as in thunder)
        loss.backward()
    return [t.grad for t in (x, s)]


@pytest.mark.parametrize("grad_x, grad_s", [(True, True), (True, False), (False, True)], ids=["both", "x", "s"])
@pytest.mark.parametrize("name", REPEATED)
def test_a_written_tensor_returned_twice_gets_the_gradient_of_both_positions(enabled, name, grad_x, grad_s):
    fn = REPEATED[name]
    jfn = thunder.jit(fn, cache="symbolic values")
    for n in (4, 1, 6):
        got, want = _grads(jfn, n, grad_x, grad_s), _grads(fn, n, grad_x, grad_s)
        torch.testing.assert_close(got, want)  # (a list: None where eager's gradient is None)
