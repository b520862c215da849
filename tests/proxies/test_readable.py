"""Size symbols print as ``name=value`` in traces and errors while metatrace is enabled."""

from __future__ import annotations

import pytest
import torch

import thunder
from thunder.core.proxies import IntegerProxy, NumberProxy

import metatrace


def _sliced(a, i):
    return a[:, :, 1:i:2]


def test_trace_comments_name_sizes(enabled):
    jf = thunder.jit(_sliced, cache="symbolic values")
    jf(torch.randn(8, 16, 4), 3)
    trace = thunder.last_traces(jf)[0]
    (a,) = [p for p in trace.args if p.name == "a"]
    sizes = ", ".join(f"{s.name}={s.value}" for s in a._shape)
    assert f'a: "cpu f32[{sizes}]"' in str(trace)


def test_trace_has_no_proxy_reprs(enabled):
    jf = thunder.jit(_sliced, cache="symbolic values")
    jf(torch.randn(8, 16, 4), 3)
    assert "IntegerProxy" not in str(thunder.last_traces(jf)[0])


def test_errors_name_the_size(enabled):
    jf = thunder.jit(lambda a, b: a + b, cache="symbolic values")
    with pytest.raises(RuntimeError) as info:
        jf(torch.randn(3), torch.randn(4))
    assert "IntegerProxy" not in str(info.value)


def test_disable_restores_thunders_repr():
    with metatrace.enable():
        pass
    with thunder.core.trace.tracectx(thunder.core.trace.TraceCtx()):
        proxy = IntegerProxy(name="n0", value=3)
    assert repr(proxy).startswith("[IntegerProxy")


def _proxy_names(trace) -> set[str]:
    names = set()
    for bsym in trace.bound_symbols:
        for p in (*bsym.flat_proxy_args, *bsym.flat_proxy_outs):
            names.add(p.name)
            names.update(s.name for s in getattr(p, "_shape", ()) if isinstance(s, NumberProxy))
    return names


def test_no_proxy_is_named_after_a_users_underscore(enabled):
    # thunder prints unused outputs as ``_``; a size renamed after ``_, n = x.shape`` was
    # overwritten by such a line before its use (Hugging Face Llama: view(t, (_, q, -1, d)) read
    # another tensor's size)
    def f(x, y):
        _, n = x.shape
        m = y.shape[1]
        return x.view(_, n, 1) * m

    jf = thunder.jit(f, cache="symbolic values")
    x, y = torch.randn(2, 3), torch.randn(5, 4)
    torch.testing.assert_close(jf(x, y), f(x, y))
    assert "_" not in set().union(*(_proxy_names(t) for t in thunder.last_traces(jf)))
