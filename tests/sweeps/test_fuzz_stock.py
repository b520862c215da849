"""The named regressions of the fuzzer (``fuzz_programs.REGRESSIONS``) are wrong in stock thunder:
without metatrace each program differs from eager, so tests/sweeps/test_fuzz.py's check that metatrace
gives eager's result on them can fail."""

from __future__ import annotations

import pytest

import metatrace
from fuzz_programs import REGRESSIONS, Program, check_program


@pytest.mark.parametrize("name", REGRESSIONS)
def test_a_regression_differs_in_stock_thunder(name):
    assert not metatrace.is_enabled()
    terms, sequence, requires_grad = REGRESSIONS[name]
    outcome = check_program(Program(terms, requires_grad), sequence)
    assert outcome.differences != []
