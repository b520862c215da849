"""Decisions that split the cache for nothing: batch 1 against batch n in clang's reshape and
expand shortcuts, and hashes of sizes nobody hashed (calling ``t.numel()``, printing a trace)."""

from __future__ import annotations

import pytest
import torch

import thunder

import metatrace
from metatrace.testing import compiles_over

SYMBOLIC = "symbolic values"


def test_a_reshape_to_an_equal_shape_shares_batch_ones_entry(enabled):
    def fn(x):
        b, t, d = x.shape
        return x.reshape(b, 1, t, d).sum(1) * 2

    assert compiles_over(fn, [(torch.randn(1, 1, 4),), (torch.randn(2, 3, 4),), (torch.randn(1, 5, 4),)]) == 1


def test_a_split_and_merged_last_dim_shares_one_entry(enabled):
    def fn(x):
        b, t, d = x.shape
        return x.view(b, t, 2, d // 2).reshape(b, t, d) + 1

    assert compiles_over(fn, [(torch.randn(1, 1, 8),), (torch.randn(3, 2, 8),)]) == 1


def test_unflatten_by_a_number_argument_shares_one_entry_and_checks_divisibility(enabled):
    def fn(a, n):
        return a.unflatten(2, (n, -1)) * 2

    a = torch.randn(2, 3, 4)
    jf = thunder.jit(fn, cache=SYMBOLIC)
    for n in (2, 4, 1):
        torch.testing.assert_close(jf(a, n), fn(a, n))
    assert thunder.cache_misses(jf) == 1
    with pytest.raises(RuntimeError):
        fn(a, 3)
    with pytest.raises(Exception):
        jf(a, 3)


def test_expanding_a_literal_one_to_the_batch_size_shares_one_entry(enabled):
    inv = torch.randn(4)

    def fn(pos):
        return inv[None, :, None].expand(pos.shape[0], -1, 1) * pos[:, None, :1]

    assert compiles_over(fn, [(torch.randn(1, 3),), (torch.randn(2, 3),), (torch.randn(5, 3),)]) == 1


def test_expanding_with_minus_one_keeps_a_symbolic_size_without_pinning_it(enabled):
    """``-1`` keeps the length, whatever it is: thunder compared it with the request and with 1
    first, guarding ``n != 1`` (MoE routing's ``arange(n).unsqueeze(1).expand(-1, k)``), so one
    token took an entry of its own."""

    def fn(x):
        return torch.arange(x.shape[0]).unsqueeze(1).expand(-1, 2).reshape(-1) * x.sum()

    assert compiles_over(fn, [(torch.randn(1),), (torch.randn(3),), (torch.randn(1),), (torch.randn(6),)]) == 1


def test_expanding_with_minus_one_beside_no_literal_one_shares_one_entry(enabled):
    def fn(x, y):
        return x.expand(-1, y.shape[1]) + y

    calls = [(torch.randn(n, 1), torch.randn(n, m)) for n, m in ((1, 3), (4, 2), (2, 5))]
    assert compiles_over(fn, calls) == 1


def test_expanding_a_symbolic_size_one_is_still_checked(enabled):
    def fn(x, n):
        return x.expand(n, 3) * 1

    jf = thunder.jit(fn, cache=SYMBOLIC)
    torch.testing.assert_close(jf(torch.ones(1, 3), 4), torch.ones(4, 3))
    with pytest.raises(RuntimeError):
        fn(torch.ones(2, 3), 4)
    with pytest.raises(Exception):
        jf(torch.ones(2, 3), 4)


def test_calling_numel_does_not_pin_the_sizes(enabled):
    class Layer:
        def __init__(self, n):
            self.keys = torch.randn(1, 2, n, 8)

        def seq_length(self):
            if self.keys.numel() == 0:
                return 0
            return self.keys.shape[-2]

    def fn(layer, x):
        return x * layer.seq_length()

    jf = thunder.jit(fn, cache=SYMBOLIC)
    for n in (5, 6, 9):
        torch.testing.assert_close(jf(Layer(n), torch.ones(2)), torch.full((2,), float(n)))
    assert thunder.cache_misses(jf) == 1


def test_hashing_a_size_in_user_code_still_pins_it(enabled):
    def fn(x):
        return x * len({x.shape[0], 3})

    jf = thunder.jit(fn, cache=SYMBOLIC)
    for n in (2, 3, 4):
        torch.testing.assert_close(jf(torch.ones(n)), fn(torch.ones(n)))
    assert thunder.cache_misses(jf) >= 2


def test_two_inputs_of_one_batch_size_share_an_entry_for_batch_one(enabled):
    def fn(x, y):
        return (x[:, None, :] + y[:, :, None]).sum(-1)

    calls = [(torch.randn(1, 4), torch.randn(1, 3)), (torch.randn(3, 4), torch.randn(3, 5))]
    assert compiles_over(fn, calls) == 1


def test_a_batch_of_one_against_a_batch_of_n_still_broadcasts(enabled):
    def fn(x, y):
        return x * y

    jf = thunder.jit(fn, cache=SYMBOLIC)
    for args in [(torch.randn(2, 4), torch.randn(2, 4)), (torch.randn(1, 4), torch.randn(3, 4)),
                 (torch.randn(3, 4), torch.randn(1, 4)), (torch.randn(5, 4), torch.randn(5, 4))]:
        torch.testing.assert_close(jf(*args), fn(*args))
    with pytest.raises(RuntimeError):
        fn(torch.randn(2, 4), torch.randn(3, 4))
    with pytest.raises(Exception):
        jf(torch.randn(2, 4), torch.randn(3, 4))


def test_a_cache_grown_by_one_token_shares_one_entry_whatever_its_length(enabled):
    # cat's meta checks ``sd == sad or d == dim`` for every dimension: on the cat dimension the
    # two lengths were compared first and guarded different (past length != 1 for a decode step)
    def fn(past, new):
        return torch.cat([past, new], dim=2) * 2

    new = torch.randn(2, 3, 1, 4)
    assert compiles_over(fn, [(torch.randn(2, 3, n, 4), new) for n in (4, 1, 6)]) == 1


def test_keeping_the_last_k_positions_shares_one_entry_when_k_is_all_of_them(enabled):
    # thunder's no-op shortcut compared the start T - k with 0: guarded k != T (a 1-token prompt,
    # where generate keeps k == 1 of T == 1 positions, compiled its own prefill)
    def fn(hidden, k):
        return hidden[:, -k:, :] * 2

    calls = [(torch.randn(2, t, 4), k) for t, k in ((4, 1), (1, 1), (5, 5), (6, 2))]
    assert compiles_over(fn, calls) == 1


def test_a_symbolic_slice_still_clamps_squeezes_and_steps_as_eager(enabled):
    def fn(x, i, j, s):
        return x[i, j:, ::s], x[None, :j], x[..., -j:]

    jf = thunder.jit(fn, cache=SYMBOLIC)
    for args in ((1, 0, 1), (0, 2, 2), (2, 9, 3), (-1, -2, 1)):
        x = torch.randn(3, 4, 5)
        for got, want in zip(jf(x, *args), fn(x, *args)):
            torch.testing.assert_close(got, want)


def _subsymbol_names(bsyms) -> list[str]:
    names = []
    for b in bsyms:
        names.append(b.sym.name)
        names.extend(_subsymbol_names(b.subsymbols))
    return names


def test_a_reshape_without_minus_one_multiplies_no_lengths(enabled):
    """clang.reshape needs the product of the known lengths only to infer a -1: thunder computed it
    on every call, a recorded ``prims.mul`` per length on symbols that nothing read and every pass
    re-traced. With a -1 the length is inferred from the product as before."""

    def fn(x):
        b, t, d = x.shape
        return x.reshape(b, t, 2, d // 2) * 2, x.reshape(-1, d) + 1

    jf = thunder.jit(fn, cache=SYMBOLIC)
    for shape in ((2, 3, 8), (4, 5, 8)):
        x = torch.randn(shape)
        for got, want in zip(jf(x), fn(x)):
            torch.testing.assert_close(got, want)
    assert thunder.cache_misses(jf) == 1
    reshapes = [b for b in thunder.last_traces(jf)[0].bound_symbols if b.sym.name == "reshape"]
    assert len(reshapes) == 2
    assert "mul" not in _subsymbol_names([reshapes[0]])  # (b, t, 2, d // 2): no -1
    assert _subsymbol_names([reshapes[1]]).count("py_floordiv") == 1  # (-1, d): the inferred length
