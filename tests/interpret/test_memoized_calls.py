"""metatrace.interpret.calls.c_code.opaque_calls: a function memoized with ``functools.lru_cache`` or
``functools.cache`` and called with a size is interpreted in place of its C cache wrapper. The
wrapper called the function outside the interpreter: a mask built there came back as a real tensor
that thunder's prologue failed to unpack (NotImplementedError, stock thunder too). Now the trace
computes it for every size: one compile, eager's values."""

from __future__ import annotations

import functools

import pytest
import torch

import thunder

SYMBOLIC = "symbolic values"


@functools.lru_cache(maxsize=None)
def causal_mask(n):
    return torch.tril(torch.ones(n, n))


@functools.lru_cache(maxsize=2)
def bounded_mask(n):
    return torch.ones(n, n).triu(1)


@functools.cache
def inverse(n):
    return 1.0 / n


class Attention(torch.nn.Module):
    @functools.lru_cache(maxsize=None)  # noqa: B019  (a method memoized on its instance, as users write)
    def positions(self, n):
        return torch.arange(n).float()

    def forward(self, x):
        return x + self.positions(x.shape[0])[:, None]


CASES = {
    "an lru_cache mask": lambda x: causal_mask(x.shape[0]) @ x,
    "a bounded lru_cache": lambda x: bounded_mask(x.shape[0]) @ x,
    "a functools.cache number": lambda x: x * inverse(x.shape[1]),
    "a memoized method": Attention(),
}


@pytest.mark.parametrize("case", CASES)
def test_a_memoized_helper_gives_eagers_values_over_sizes(enabled, case):
    fn = CASES[case]
    jf = thunder.jit(fn, cache=SYMBOLIC)
    xs = [torch.randn(n, k) for n, k in ((2, 3), (5, 3), (3, 4), (5, 3))]
    assert [torch.allclose(jf(x), fn(x)) for x in xs] == [True] * 4


@pytest.mark.parametrize("case", ["an lru_cache mask", "a bounded lru_cache", "a memoized method"])
def test_a_memoized_helper_of_a_size_compiles_once(enabled, case):
    jf = thunder.jit(CASES[case], cache=SYMBOLIC)
    for n in (2, 3, 5):
        jf(torch.randn(n, 3))
    assert thunder.cache_misses(jf) == 1
