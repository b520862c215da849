"""ThunderFX under metatrace: Dynamo's dynamic subgraphs compile once in thunder (issue 9)."""

from __future__ import annotations

import torch

import thunder
from thunder.dynamo import ThunderCompiler

from workloads import causal_attention, causal_mask

LENGTHS = (8, 12, 16, 20, 24, 32, 40)


def _thunder_compiles(backend: ThunderCompiler) -> int:
    return sum(thunder.cache_misses(fn) for info in backend.subgraph_infos for fn in info.thunder_compiled_fns)


def _attention_over_lengths(backend: ThunderCompiler) -> None:
    torch._dynamo.reset()
    compiled = torch.compile(causal_attention, backend=backend)
    mask = causal_mask()
    for T in LENGTHS:
        q, k, v = (torch.randn(2, 4, T, 16) for _ in range(3))
        torch.testing.assert_close(compiled(q, k, v, mask), causal_attention(q, k, v, mask))


def test_attention_over_lengths_compiles_twice(enabled):
    backend = ThunderCompiler()
    _attention_over_lengths(backend)
    assert _thunder_compiles(backend) <= 2  # Dynamo's static first graph, then its dynamic one


def test_explicit_cache_option_is_respected(enabled):
    backend = ThunderCompiler(cache="constant values")
    _attention_over_lengths(backend)
    assert _thunder_compiles(backend) > 2


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
