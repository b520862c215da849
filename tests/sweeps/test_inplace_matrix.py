"""The in-place write matrix (issue 51, ``tests/inplace_matrix.py``) under metatrace: every
destination kind x every in-place write x source requiring grad or not x grad mode, each cell
equal to eager (``requires_grad``, ``is_leaf``, ``grad_fn``, values, every input's gradient), or
raising where eager raises. Stock thunder's differences on the same matrix are in
``test_fuzz_stock.py``.
"""

from __future__ import annotations

import pytest

import thunder

import inplace_matrix


@pytest.mark.parametrize("write", inplace_matrix.WRITES)
def test_every_destination_and_mode_follows_eager(enabled, write):
    found = inplace_matrix.cells(write, lambda fn: thunder.jit(fn, cache="symbolic values"))
    assert {cell: d for cell, d in found.items() if d} == {}
