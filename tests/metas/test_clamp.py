"""``clamp`` with number bounds, NaN included, as eager computes it (``metatrace.metas.
torch_decompositions``): one NaN bound keeps the tensor, two bounds propagate a NaN bound. The
bound is a float argument (symbolic under metatrace), changed between calls, with and without grad;
values and gradients against eager."""

from __future__ import annotations

import itertools
import math

import pytest
import thunder
import torch

import metatrace

FORMS = {
    "min": lambda x, r: x.clamp(min=r),
    "max": lambda x, r: torch.clamp(x, max=r),
    "min in place": lambda x, r: x.clone().clamp_(min=max(r, 0.5)),
    "clip max": lambda x, r: x.clip(max=r),
    "both, r low": lambda x, r: x.clamp(r, 2.0),
    "both, r high": lambda x, r: x.clamp(-1.0, r),
}
BOUNDS = (math.nan, 0.5, -math.inf, 2.5, math.nan)


@pytest.mark.parametrize("name, grad", list(itertools.product(sorted(FORMS), (False, True))))
def test_clamp_with_number_bounds_equals_eager(name, grad):
    form = FORMS[name]
    with metatrace.enable():
        jitted = thunder.jit(form, cache="symbolic values")
        for r in BOUNDS:
            x = torch.tensor([1.0, float("nan"), 3.0, -2.0])
            got_x, want_x = x.clone().requires_grad_(grad), x.clone().requires_grad_(grad)
            got, want = jitted(got_x, r), form(want_x, r)
            torch.testing.assert_close(got, want, equal_nan=True)
            if grad:
                got.nansum().backward()
                want.nansum().backward()
                torch.testing.assert_close(got_x.grad, want_x.grad, equal_nan=True)
