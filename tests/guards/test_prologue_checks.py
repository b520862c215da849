"""thunder's prologue tensor check under metatrace: the same decisions as thunder's, cheaper.

metatrace swaps the python executor's ``check_tensor_metadata`` for one that compares the shape as
a tuple and caches the device's string (``metatrace.guards.prologue_op``). It must accept and
reject exactly what thunder's accepts and rejects, with thunder's message, and a prologue must use it.
"""

from __future__ import annotations

import pytest
import torch

import thunder
from thunder.executors.pythonex import _check_tensor_shape_and_metadata_impl as thunders_check

from metatrace.guards.prologue_op import TENSOR_CHECK_NAME, _cheaper_tensor_check

cheaper_check = _cheaper_tensor_check(thunders_check)

_T = torch.zeros(2, 3)
_CASES = {
    "matches": (_T, (2, 3), "cpu", torch.float32, False),
    "another size": (_T, (2, 4), "cpu", torch.float32, False),
    "another rank": (_T, (2, 3, 1), "cpu", torch.float32, False),
    "fewer dims": (_T, (2,), "cpu", torch.float32, False),
    "another dtype": (_T, (2, 3), "cpu", torch.float64, False),
    "requires grad expected": (_T, (2, 3), "cpu", torch.float32, True),
    "requires grad given": (torch.zeros(2, 3, requires_grad=True), (2, 3), "cpu", torch.float32, False),
    "another device": (_T, (2, 3), "cuda:0", torch.float32, False),
    "device without index": (_T, (2, 3), "cpu:0", torch.float32, False),
    "a parameter": (torch.nn.Parameter(torch.zeros(2, 3)), (2, 3), "cpu", torch.float32, True),
    "zero-size": (torch.zeros(0, 3), (0, 3), "cpu", torch.float32, False),
    "zero-size mismatch": (torch.zeros(0, 3), (1, 3), "cpu", torch.float32, False),
    "a scalar tensor": (torch.tensor(1.0), (), "cpu", torch.float32, False),
    "shape as a list": (_T, [2, 3], "cpu", torch.float32, False),
    "shape as a torch.Size": (_T, torch.Size([2, 3]), "cpu", torch.float32, False),
    "a float size": (_T, (2.0, 3), "cpu", torch.float32, False),
    "not a tensor": ([[0.0] * 3] * 2, (2, 3), "cpu", torch.float32, False),
}


def _outcome(check, args):
    try:
        check(*args)
    except AssertionError as e:
        return "rejected", str(e)
    return "accepted", None


@pytest.mark.parametrize("case", sorted(_CASES))
def test_the_cheaper_check_decides_as_thunders(case):
    args = _CASES[case]
    assert _outcome(cheaper_check, args) == _outcome(thunders_check, args)


def test_the_cases_include_both_outcomes():
    outcomes = {_outcome(thunders_check, args)[0] for args in _CASES.values()}
    assert outcomes == {"accepted", "rejected"}


def _prologue_check_fn(jf):
    prologue = thunder.last_prologue_traces(jf)[-1]
    checks = [b for b in prologue.bound_symbols if b.sym.name == TENSOR_CHECK_NAME]
    assert checks, "the prologue has no tensor check"
    return checks[0]._call_ctx[TENSOR_CHECK_NAME]


def test_prologues_use_the_cheaper_check(enabled):
    jf = thunder.jit(lambda a: a * 2, cache="symbolic values")
    jf(torch.randn(3, 4))
    assert _prologue_check_fn(jf).__qualname__ == cheaper_check.__qualname__


def test_a_prologue_without_metatrace_uses_thunders_check():
    jf = thunder.jit(lambda a: a * 2, cache="symbolic values")
    jf(torch.randn(3, 4))
    assert _prologue_check_fn(jf) is thunders_check


@pytest.mark.parametrize("cache", ["symbolic values", "constant values"])
def test_a_changed_tensor_misses_the_entry(enabled, cache):
    fn = lambda a: a * 2  # noqa: E731
    jf = thunder.jit(fn, cache=cache)
    calls = [torch.randn(3, 4), torch.randn(3, 4, dtype=torch.float64), torch.randn(3, 4, requires_grad=True),
             torch.randn(3, 4, 1), torch.randn(3, 4)]
    for a in calls:
        torch.testing.assert_close(jf(a), fn(a))
    assert thunder.cache_misses(jf) == 4

