"""Result dtypes of elementwise operations between a tensor and a Python number, as eager's.

Generated: every binary elementwise operation below x every tensor dtype x a Python int, float
and bool, jitted under ``cache="symbolic values"``; the result's dtype and values equal eager's
(where eager raises, the jitted call raises too). thunder's JAX-like lattice made a bool tensor
with a Python int an int8 tensor (``metatrace.metas.torch_ops.type_promotion``).
"""

from __future__ import annotations

import operator

import pytest
import thunder
import torch

DTYPES = (torch.bool, torch.uint8, torch.int8, torch.int32, torch.int64, torch.float16, torch.float32)
SCALARS = (3, 2.5, True)
OPS = {
    "add": operator.add, "mul": operator.mul, "sub": operator.sub, "radd": lambda t, s: s + t,
    "rmul": lambda t, s: s * t, "truediv": operator.truediv, "floordiv": operator.floordiv,
    "pow": operator.pow, "where": lambda t, s: torch.where(t > 0, t, s), "maximum scalar": lambda t, s: torch.clamp(t, min=s),
}


def _tensor(dtype) -> torch.Tensor:
    return torch.tensor([0, 1, 2, 5], dtype=torch.int64).to(dtype)


def _with_dtype(fn):
    """``fn``'s result and its dtype as the trace sees it (the torch executor computes the
    tensor itself with torch's dtype; what the trace believes shows where code reads it)."""
    def with_dtype(t, s):
        r = fn(t, s)
        return r, r.dtype

    return with_dtype


def _outcome(fn, *args):
    try:
        return fn(*args)
    except Exception as e:  # eager's error is part of its behaviour
        return type(e)


def _cases():
    for op in OPS:
        for dtype in DTYPES:
            for scalar in SCALARS:
                marks = ()
                if op == "pow" and dtype is torch.bool and scalar is True:
                    # thunder's pow promotes bool ** bool with BOOL_TO_LONG (stock too); eager keeps bool
                    marks = pytest.mark.xfail(strict=True, reason="thunder's pow: bool ** bool is int64")
                yield pytest.param(op, dtype, scalar, id=f"{op}-{dtype}-{scalar!r}", marks=marks)


@pytest.mark.parametrize("op, dtype, scalar", list(_cases()))
def test_a_tensor_and_a_python_number_have_eagers_dtype(enabled, op, dtype, scalar):
    fn = _with_dtype(OPS[op])
    want = _outcome(fn, _tensor(dtype), scalar)
    got = _outcome(thunder.jit(fn, cache="symbolic values"), _tensor(dtype), scalar)
    if isinstance(want, type):
        assert isinstance(got, type), f"eager raised {want.__name__}, jitted gave {got}"
        return
    assert not isinstance(got, type), f"raised {got.__name__}"
    assert got[1] == want[1], f"the trace's dtype {got[1]}, eager {want[1]}"
    torch.testing.assert_close(got[0], want[0], equal_nan=True)
