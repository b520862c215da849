"""thunder's torch.compile fusion executors under symbolic values (metatrace.passes.fusion_regions).

- litgpt ``llama2-like`` training under ``torch_compile_ex``: one compile over lengths, outputs and
  grads equal eager, as many fusion regions in the forward and the backward as stock thunder
  makes under constant values, every size defined (the strict checker). ``torch.compile`` itself
  is replaced by the identity there (its regions' Python callables run as they are): inductor
  costs a minute per region on CPU; the next test runs it for real on a small function;
- inductor gets the regions' sizes as arguments: after the second size no graph is compiled;
- ``torch_compile_cat_ex`` (claims cat on CUDA only) runs;
- Hugging Face models as users build them (``AutoConfig``), training: regions equal stock's;
- the pass itself on a trace: number ops and shape reads right after what they read.
"""

from __future__ import annotations

import pytest
import torch

import thunder
from thunder.executors.torch_compile import torch_compile_cat_ex, torch_compile_ex

import metatrace
from litgpt_workloads import build, training_input, training_step


def executors(fusion):
    return [fusion, *thunder.get_default_executors()]


def regions(trace) -> int:
    return sum(b.sym.is_fusion for b in trace.bound_symbols)


@pytest.fixture
def inductor_skipped(monkeypatch):
    """``torch.compile`` as the identity: make_compiled's region callables run as they are."""
    compiled = []

    def identity(fn, **kwargs):
        compiled.append(fn)
        return fn

    monkeypatch.setattr(torch, "compile", identity)
    return compiled


def _litgpt_regions(T: int) -> tuple[int, int]:
    """Stock thunder under constant values: regions of the forward and the backward."""
    model = build("llama2-like")
    jm = thunder.jit(model, cache="constant values", executors=executors(torch_compile_ex))
    training_step(jm, model, training_input(model, T))
    return regions(thunder.last_traces(jm)[-1]), regions(thunder.last_backward_traces(jm)[-1])


@pytest.mark.slow
def test_litgpt_training_under_torch_compile_ex(inductor_skipped):
    stock_regions = _litgpt_regions(8)
    with metatrace.enable():
        model = build("llama2-like")
        jm = thunder.jit(model, cache="symbolic values", executors=executors(torch_compile_ex))
        for T in (8, 16, 24):
            idx = training_input(model, T)
            expected_out, expected_grads = training_step(model, model, idx)
            out, grads = training_step(jm, model, idx)
            torch.testing.assert_close(out, expected_out, atol=1e-5, rtol=1e-5, msg=lambda m: f"T={T}: {m}")
            for name, grad in grads.items():
                torch.testing.assert_close(grad, expected_grads[name], atol=1e-4, rtol=1e-4,
                                           msg=lambda m: f"T={T} grad of {name}: {m}")
        forward, backward = thunder.last_traces(jm)[-1], thunder.last_backward_traces(jm)[-1]
        assert thunder.cache_misses(jm) == 1
        assert (regions(forward), regions(backward)) == stock_regions
        # (thunder's check_trace re-runs metas, and a fusion symbol has none: stock's the same)
        for trace in (forward, backward):
            metatrace.check_trace(trace, thunder_checks=False)
        metatrace.check_trace(thunder.last_prologue_traces(jm)[-1])


def _hf_training(family: str, cache: str, lengths) -> object:
    from hf_workloads import build, ids, plain_output_collector

    model = build(family, "user")
    model.train()
    with plain_output_collector():
        jm = thunder.jit(model, cache=cache, executors=executors(torch_compile_ex))
        for T in lengths:
            x = ids(T, T, 256)
            model.zero_grad(set_to_none=True)
            out = jm(input_ids=x).logits
            out.sum().backward()
            grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
            model.zero_grad(set_to_none=True)
            expected = model(input_ids=x).logits
            expected.sum().backward()
            torch.testing.assert_close(out, expected, msg=lambda m: f"T={T}: {m}")
            for name, p in model.named_parameters():
                if p.grad is not None:
                    torch.testing.assert_close(grads[name], p.grad, atol=1e-4, rtol=1e-4,
                                               msg=lambda m: f"T={T} grad of {name}: {m}")
    return jm


@pytest.mark.slow
@pytest.mark.parametrize("family", ["llama"])  # (the other families too, outside CI: the closing note of issue 27)
def test_hf_training_under_torch_compile_ex(inductor_skipped, family):
    stock = _hf_training(family, "constant values", (8,))
    stock_regions = regions(thunder.last_traces(stock)[-1]), regions(thunder.last_backward_traces(stock)[-1])
    with metatrace.enable():
        jm = _hf_training(family, "symbolic values", (8, 16))
        assert thunder.cache_misses(jm) == 1
        assert (regions(thunder.last_traces(jm)[-1]), regions(thunder.last_backward_traces(jm)[-1])) == stock_regions


def sizes_and_split(x, w):
    """Size arithmetic between tensor ops: split by sizes, reshape by a product, divide by a count."""
    y = torch.nn.functional.gelu(x @ w)
    half = y.shape[-1] // 2
    a, b = y.split([half, y.shape[-1] - half], dim=-1)
    flat = (a * b).reshape(x.shape[0] * x.shape[1], half)
    return torch.cat([flat / flat.shape[0], b.reshape(-1, half).sin()], 0)


@pytest.mark.slow
def test_inductor_compiles_no_graph_after_the_second_size(enabled):
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    w = torch.randn(8, 6, requires_grad=True)
    jf = thunder.jit(sizes_and_split, cache="symbolic values", executors=executors(torch_compile_ex))
    graphs = []
    for n in (3, 5, 7, 11):
        x = torch.randn(2, n, 8, requires_grad=True)
        out = jf(x, w)
        out.sum().backward()
        gx, gw = x.grad, w.grad
        x.grad = w.grad = None
        expected = sizes_and_split(x, w)
        expected.sum().backward()
        torch.testing.assert_close(out, expected, msg=lambda m: f"n={n}: {m}")
        torch.testing.assert_close(gx, x.grad, msg=lambda m: f"n={n} grad of x: {m}")
        torch.testing.assert_close(gw, w.grad, msg=lambda m: f"n={n} grad of w: {m}")
        w.grad = None
        graphs.append(torch._dynamo.utils.counters["stats"]["unique_graphs"])
    assert thunder.cache_misses(jf) == 1
    assert regions(thunder.last_traces(jf)[-1]) >= 1, "something was fused"
    assert graphs[1] == graphs[-1], f"dynamo graphs compiled after each size: {graphs}"


def cat_of_halves(x):
    n = x.shape[0] // 2
    return torch.cat([x[:n] * 2, x[n:].sin()], 0).cumsum(0)


def test_torch_compile_cat_ex_runs(enabled):
    jf = thunder.jit(cat_of_halves, cache="symbolic values", executors=executors(torch_compile_cat_ex))
    for n in (4, 6, 10):  # (an odd length is another entry, as under the default executors: x[n:] is longer)
        x = torch.randn(n, 3)
        torch.testing.assert_close(jf(x), cat_of_halves(x), msg=lambda m: f"n={n}: {m}")
    assert thunder.cache_misses(jf) == 1


def test_number_ops_move_right_after_what_they_read(enabled, inductor_skipped, monkeypatch):
    from thunder.executors.torch_compile import TorchCompileExecutor

    from metatrace.passes.fusion_regions import sizes_before_regions
    from metatrace.passes.hoist_producers import is_number_op

    given = []  # the traces the fusion pass gets (metatrace's wrapper moves sizes inside it)
    fusion_pass = TorchCompileExecutor.fusion_pass
    monkeypatch.setattr(TorchCompileExecutor, "fusion_pass", lambda self, t: given.append(t) or fusion_pass(self, t))
    jf = thunder.jit(sizes_and_split, cache="symbolic values", executors=executors(torch_compile_ex))
    jf(torch.randn(2, 5, 8), torch.randn(8, 6))
    before = given[0]
    assert any(is_number_op(b) for b in before.bound_symbols), "the function computes sizes"
    after = sizes_before_regions(before)
    bsyms = after.bound_symbols
    def moves(b):
        return is_number_op(b) or b.sym.name == "shape"

    defined_at = {}
    for i, b in enumerate(bsyms):
        if moves(b):
            last = max((defined_at.get(a.name, -1) for a in b.flat_proxy_args), default=-1)
            assert all(moves(x) for x in bsyms[last + 1:i]), f"{b.sym.name} could go earlier: {b}"
        for o in b.flat_proxy_outs:
            defined_at.setdefault(o.name, i)
    metatrace.check_trace(after)
