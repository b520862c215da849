"""metatrace.guards.simplify keeps -0.0 apart from 0.0 where Python does: ``str``, ``copysign`` and
the exact guard of a baked-in zero tell them apart, so ``x + 0.0`` is not ``x`` (``-0.0 + 0.0`` is
``0.0``) and ``float(a) * float(b)`` is not ``float(a * b)`` (``0.0 * -3.0`` is ``-0.0``). The
simplified guard of ``f"{r + n}"`` read ``r == 0.0`` and failed for ``r = -0.0`` (found by
tools/fuzz.py). Generated: + - * x each zero (int, 0.0, -0.0) on each side x orders of values."""

from __future__ import annotations

import pytest
import torch

import thunder

SYMBOLIC = "symbolic values"
ZEROS = (0, 0.0, -0.0)
ORDERS = ((0.0, -0.0, 1.5, 0, -0.0), (-0.0, 0.0, 0, 1.5, 0.0))


def _cases():
    for op in ("+", "-", "*"):
        for z in ZEROS:
            yield f"r {op} {z!r}"
            yield f"{z!r} {op} r"


@pytest.mark.parametrize("expr", list(_cases()))
def test_a_signed_zero_renders_as_in_eager(enabled, expr):
    fn = eval(f"lambda x, r: (str({expr}), x * 1)")  # noqa: S307  (the generated expression)
    jf = thunder.jit(fn, cache=SYMBOLIC)
    calls = [r for order in ORDERS for r in order]
    assert [jf(torch.ones(1), r)[0] for r in calls] == [fn(torch.ones(1), r)[0] for r in calls]


def test_a_product_of_ints_as_floats_keeps_the_sign_of_zero(enabled):
    fn = lambda x, a, b: (str(float(a) * float(b)), x * 1)  # noqa: E731
    jf = thunder.jit(fn, cache=SYMBOLIC)
    calls = [(0, 3), (0, -3), (2, 3), (0, -3), (-2, 0), (0, 3)]
    assert [jf(torch.ones(1), a, b)[0] for a, b in calls] == [fn(torch.ones(1), a, b)[0] for a, b in calls]
