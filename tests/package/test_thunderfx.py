"""ThunderFX under metatrace: Dynamo's dynamic subgraphs compile once in thunder (issue 9)."""

from __future__ import annotations

import torch

import thunder
from thunder.dynamo import ThunderCompiler

from workloads import causal_attention, causal_mask

LENGTHS = (8, 12, 16, 20, 24, 32, 40)


def _thunder_compiles(backend: ThunderCompiler) -> int:
    return sum(thunder.cache_misses(fn) for info in backend.subgraph_infos for fn in info.thunder_compiled_fns)


def _attention_over_lengths(backend: ThunderCompiler, **options) -> None:
    torch._dynamo.reset()
    compiled = torch.compile(causal_attention, backend=backend, **options)
    mask = causal_mask()
    for T in LENGTHS:
        q, k, v = (torch.randn(2, 4, T, 16) for _ in range(3))
        torch.testing.assert_close(compiled(q, k, v, mask), causal_attention(q, k, v, mask))


def test_attention_over_lengths_is_one_dynamo_graph(enabled):
    backend = ThunderCompiler()
    _attention_over_lengths(backend)
    assert len(backend.subgraph_infos) == 1  # dynamic from the first call: no static first graph


def test_attention_over_lengths_compiles_each_thunder_subgraph_once(enabled):
    backend = ThunderCompiler()
    _attention_over_lengths(backend)
    compiled = [thunder.cache_misses(fn) for info in backend.subgraph_infos for fn in info.thunder_compiled_fns]
    assert compiled == [1] * len(compiled)


def test_thunderfx_is_dynamic_from_the_first_call(enabled):
    from thunder.dynamo import thunderfx

    torch._dynamo.reset()
    compiled = thunderfx(causal_attention)
    mask = causal_mask()
    for T in LENGTHS[:3]:
        q, k, v = (torch.randn(2, 4, T, 16) for _ in range(3))
        torch.testing.assert_close(compiled(q, k, v, mask), causal_attention(q, k, v, mask))
    assert len(compiled._backend.subgraph_infos) == 1


def test_explicit_static_capture_is_respected(enabled):
    backend = ThunderCompiler()
    _attention_over_lengths(backend, dynamic=False)
    assert len(backend.subgraph_infos) == len(LENGTHS)  # one static graph per length, as asked


def test_explicit_cache_option_is_respected(enabled):
    from thunder.core.options import CACHE_OPTIONS

    backend = ThunderCompiler(cache="constant values")
    _attention_over_lengths(backend)
    options = {thunder.compile_data(fn).cache_option for info in backend.subgraph_infos for fn in info.thunder_compiled_fns}
    assert options == {CACHE_OPTIONS.CONSTANT_VALUES}


def test_training_step_through_torch_compile(enabled):
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    reference = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    reference.load_state_dict(model.state_dict())
    backend = ThunderCompiler()
    compiled = torch.compile(model, backend=backend)
    for batch in (3, 5, 7, 9):
        x = torch.randn(batch, 8)
        model.zero_grad()
        reference.zero_grad()
        compiled(x).sum().backward()
        reference(x).sum().backward()
        for p, r in zip(model.parameters(), reference.parameters()):
            torch.testing.assert_close(p.grad, r.grad)
    assert _thunder_compiles(backend) <= 2
