"""The differential fuzzer in the suite: a fixed-seed slice of generated programs (about a minute).

Each example is one generated program (``tests/fuzz_programs.py``), jitted once and fed a
sequence of calls with state changes between them; every output, shape, dtype and gradient must
equal eager PyTorch's, and where eager raises the jitted function must raise. A longer run with
fresh seeds: ``.venv/bin/python tools/fuzz.py --minutes 10``.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

import metatrace
from fuzz_programs import REGRESSIONS, Call, Program, calls, check_program, programs

# Derandomized: the same programs on every run (a failure here is reproducible as is).
FIXED_SLICE = settings(
    max_examples=15, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
)


@pytest.fixture(scope="module")
def enabled_module():
    with metatrace.enable():
        yield


@FIXED_SLICE
@given(program=programs(), sequence=calls())
def test_generated_programs_match_eager(enabled_module, program, sequence):
    outcome = check_program(program, sequence)
    assert outcome.differences == [], program.source() + "\n" + "\n".join(outcome.differences)


def _check(terms: list[str], sequence: list[Call], requires_grad: bool = False):
    return check_program(Program(terms, requires_grad), sequence)


def test_fuzzer_reports_a_wrong_result_as_a_difference(enabled_module):
    """The comparison itself can fail: a program whose jitted result differs from eager (here
    made so by changing a global the trace baked in while metatrace is *not* checking it: the
    eager side and the jitted side get different state) is reported."""
    import fuzz_programs

    original = fuzz_programs._mutate

    def one_sided(ns, module, mutation):
        if mutation == "G.append" and ns.get("_jit_side"):
            return  # the jitted side never sees the mutation: results must differ
        original(ns, module, mutation)

    fresh = fuzz_programs._fresh_namespace
    count = iter(range(2))

    def marked():
        ns = fresh()
        if next(count, 1) == 1:
            ns["_jit_side"] = True
        return ns

    fuzz_programs._mutate, fuzz_programs._fresh_namespace = one_sided, marked
    try:
        outcome = _check(["x[:len(G)] * 1"], [Call(4, 1, 0.5, True, [1]), Call(4, 1, 0.5, True, [1], mutation="G.append")])
    finally:
        fuzz_programs._mutate, fuzz_programs._fresh_namespace = original, fresh
    assert len(outcome.differences) == 1


# Each way of changing a function the trace calls, a module's hooks or the tensors it holds
# (fuzz_programs.MUTATIONS), on the term that uses it: a stale entry returned the old result.
CALLABLE_MUTATIONS = [("ACT(x - 2)", "ACT"), ("H.scale(x)", "H.scale"), ("self.helper(x)", "method"),
                      ("self.helper(x)", "self.helper"),
                      ("self.act(x - 2)", "self.act"), ("help2(x)", "defaults"), ("help2(x)", "code"),
                      ("x * self.half", "property"), ("x * 1", "hook"),
                      ("x * self.w", "self.w")]


@pytest.mark.parametrize("term, mutation", CALLABLE_MUTATIONS, ids=[m for _, m in CALLABLE_MUTATIONS])
def test_a_changed_callable_gives_eagers_result(enabled_module, term, mutation):
    sequence = [Call(4, 1, 0.5, True, [1]), Call(4, 1, 0.5, True, [1], mutation=mutation),
                Call(4, 1, 0.5, True, [1], mutation=mutation)]
    outcome = _check([term], sequence, requires_grad=True)
    assert outcome.differences == []


@pytest.mark.parametrize("term, mutation", CALLABLE_MUTATIONS, ids=[m for _, m in CALLABLE_MUTATIONS])
def test_the_callable_terms_differ_after_their_mutation(term, mutation):
    """The mutations change results (else the test above could not fail): eager before and after."""
    import fuzz_programs

    ns = fuzz_programs._fresh_namespace()
    exec(compile(Program([term], False).source(), "<fuzzed program>", "exec"), ns)
    module = ns["Fuzzed"]()
    args, kw = fuzz_programs._inputs(Call(4, 1, 0.5, True, [1]), False)
    before = module(*args, **kw)
    fuzz_programs._mutate(ns, module, mutation)
    assert not fuzz_programs._same(before, module(*args, **kw))


# Wrong results stock thunder returns too (issue 30), one program per class
# (fuzz_programs.REGRESSIONS); tests/sweeps/test_fuzz_stock.py shows each wrong in stock thunder.
@pytest.mark.parametrize("name", REGRESSIONS)
def test_a_regression_gives_eagers_result(enabled_module, name):
    terms, sequence, requires_grad = REGRESSIONS[name]
    outcome = check_program(Program(terms, requires_grad), sequence)
    assert outcome.differences == []
