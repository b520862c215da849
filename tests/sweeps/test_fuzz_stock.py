"""The named regressions of the fuzzer (``fuzz_programs.REGRESSIONS``) are wrong in stock thunder:
without metatrace each program differs from eager, so tests/sweeps/test_fuzz.py's check that metatrace
gives eager's result on them can fail. The in-place write matrix differs in stock thunder too."""

from __future__ import annotations

import pytest

import thunder

import inplace_matrix
import metatrace
from fuzz_programs import REGRESSIONS, Program, check_program


@pytest.mark.parametrize("name", REGRESSIONS)
def test_a_regression_differs_in_stock_thunder(name):
    assert not metatrace.is_enabled()
    terms, sequence, requires_grad = REGRESSIONS[name]
    outcome = check_program(Program(terms, requires_grad), sequence)
    assert outcome.differences != []


# the destinations where stock thunder's gradients go wrong: written views of a base (slice, row),
# and for index_put_ any destination (zeros); the other kinds only make each compile longer
STOCK_DESTINATIONS = ("zeros", "slice", "row")
# writes whose gradients stock thunder loses or gets wrong in the cells where the source requires
# grad: through a written view to its base (slice, row), and index_put_'s values (issue 51)
STOCK_WRONG_GRADIENTS = {"item", "slice_assign", "index_assign", "copy_", "index_put_", "index_put_accumulate"}


def test_stock_thunder_gets_gradients_wrong_in_the_inplace_matrix():
    """The in-place write matrix (tests/inplace_matrix.py) under stock thunder and ``cache="constant
    values"``, its cells with grad mode on and a source that requires grad (stock thunder's
    no_grad cells equal eager's; with a source that does not require grad it returns every
    destination requiring grad, 27 of 27 writes): the sources' gradients differ from eager's for
    the writes above (metatrace: tests/sweeps/test_inplace_matrix.py). Only their rows and the
    destinations where they go wrong run here (the suite's time); over all 27 writes both grad-mode
    columns differ, 54 of 54."""
    assert not metatrace.is_enabled()
    wrong = set()
    for write in sorted(STOCK_WRONG_GRADIENTS):
        found = inplace_matrix.cells(write, lambda fn: thunder.jit(fn, cache="constant values"), modes=("grad",),
                                     destinations=STOCK_DESTINATIONS, sources_require_grad=(True,))
        if any("gradient of source" in d for d in found[(True, "grad")]):
            wrong.add(write)
    assert STOCK_WRONG_GRADIENTS <= wrong
