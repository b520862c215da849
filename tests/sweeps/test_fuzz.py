"""The differential fuzzer in the suite: a fixed-seed slice of generated programs (about two minutes).

Each example is one generated program (``tests/fuzz_programs.py``), jitted once and fed a
sequence of calls with state changes between them; every output, shape, dtype and gradient must
equal eager PyTorch's, and where eager raises the jitted function must raise. Ten programs of
each family of issue 36 (``tests/fuzz_families.py``: argument kinds, text through C code,
mutations, value-dependent result types) are checked the same way, with the mutated state and
the exception type compared after every call and no proxy left behind. A longer run with
fresh seeds: ``.venv/bin/python tools/fuzz.py --minutes 10``.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings

import metatrace
from fuzz_families import FAMILY_NAMES, FamilyCall, FamilyProgram, family_calls, family_programs
from fuzz_family_runner import check_family_program
from fuzz_programs import REGRESSIONS, Call, Program, calls, check_program, programs

# Derandomized: the same programs on every run (a failure here is reproducible as is).
FIXED_SLICE = settings(
    max_examples=15, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
)


@FIXED_SLICE
@given(program=programs(), sequence=calls())
def test_generated_programs_match_eager(module_enabled, program, sequence):
    outcome = check_program(program, sequence)
    assert outcome.differences == [], program.source() + "\n" + "\n".join(outcome.differences)


def _check(terms: list[str], sequence: list[Call], requires_grad: bool = False):
    return check_program(Program(terms, requires_grad), sequence)


def test_fuzzer_reports_a_wrong_result_as_a_difference(module_enabled):
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
def test_a_changed_callable_gives_eagers_result(module_enabled, term, mutation):
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
def test_a_regression_gives_eagers_result(module_enabled, name):
    terms, sequence, requires_grad = REGRESSIONS[name]
    outcome = check_program(Program(terms, requires_grad), sequence)
    assert outcome.differences == []


# ---------------------------------------------------------------------------------------------
# The families of issue 36 (tests/fuzz_families.py): argument kinds, text through C code,
# mutations of arguments and modules, value-dependent result types; outputs, the mutated state
# and the exception type compared with eager after every call, and no proxy left behind
# ---------------------------------------------------------------------------------------------

FAMILY_SLICE = settings(
    max_examples=10, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
)


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_generated_family_programs_match_eager(module_enabled, family):
    @FAMILY_SLICE
    @given(program=family_programs(family), sequence=family_calls())
    def check(program, sequence):
        outcome = check_family_program(program, sequence)
        assert outcome.differences == [], program.source() + "\n" + "\n".join(outcome.differences)

    check()


def _family_calls(*changes) -> list[FamilyCall]:
    first = FamilyCall(size=3, a=("int", 2, False), a_how="build", n=2, m=3, r=1.0, fresh_state=True,
                       cfg_kind="namespace")
    return [dataclasses.replace(first, **change) for change in changes]


def test_the_family_checker_reports_a_leaked_proxy():
    """The checker can fail: stock thunder (metatrace off) leaves its proxy for ``n`` in the
    caller's list."""
    was_enabled = metatrace.is_enabled()
    metatrace.disable()
    try:
        program = FamilyProgram("mutations", ["acc.append(n * 2)"], ["x * 2"])
        outcome = check_family_program(program, _family_calls({}, {"n": 3, "fresh_state": False}))
    finally:
        if was_enabled:
            metatrace.enable()
    assert any("proxies left in args[5]" in d for d in outcome.differences)  # acc


# Differences the families found, fixed in metatrace: one program each
FAMILY_REGRESSIONS = {
    # a list made by ``list + list`` stored on the module: the replay stored None for its items
    "a concatenated list on the module": (
        FamilyProgram("mutations", ["self.steps = self.steps[-2:] + [x.shape[0]]"], ["len(self.steps)"]),
        _family_calls({}, {"fresh_state": False}, {"size": 5}),
    ),
    # a class such as str, and an Enum member, are true: thunder's bool asked the class for an
    # (unbound) __len__, and the member's class for its metaclass's __bool__
    "a class's truth": (
        FamilyProgram("argument kinds", [], ["(x * 2 if a else x)"]),
        _family_calls({"a": ("class", 2, False)}, {"a": ("class", 0, False)}, {"a": ("bool", 1, False)}),
    ),
    # a list item returned beside a device argument: the epilogue named its proxy for the item as
    # the computation had named the device's, and the prologue checked the device against the item
    "a returned list item and a device argument": (
        FamilyProgram("mutations", [], ["list(acc)", "x * 1"]),
        _family_calls({"a": ("device", 0, False)}, {"a": ("str", 1, False)}),
    ),
    # an IntEnum argument was proxied as a plain int: ``type(a)`` was int (found by tools/fuzz.py)
    "an IntEnum member's type": (
        FamilyProgram("argument kinds", [], ["(math.isfinite(a) if type(a) in (int, float) else None)"]),
        _family_calls({"a": ("enum", 3, False)}, {"a": ("enum", 2, False)}),
    ),
    # ``cfg.hist`` and ``cfg`` both replayed: thunder unpacked ``cfg.hist`` first and failed on
    # ``cfg``'s record (found by tools/fuzz.py)
    "a store after appending to an attribute": (
        FamilyProgram("mutations", ["cfg.hist.append(x.shape[0])", "object.__setattr__(cfg, 'z', n)"],
                      ["cfg.count"]),
        _family_calls({"cfg_kind": "dataclass"}, {"fresh_state": False, "size": 4}),
    ),
    # a closure variable rebound (``nonlocal``): thunder stored its proxy in the cell
    "closure variables rebound": (
        FamilyProgram("mutations", ["BUMP(x.shape[0])", "REMEMBER(x.detach() * 2)"], ["x * CELLS()[0]", "CELLS()[1]"]),
        _family_calls({}, {"fresh_state": False}, {"size": 5}),
    ),
    # ``str`` of a slice argument holding a size rendered its proxy: ``slice(i2=-2, None, None)``
    # (found by tools/fuzz.py)
    "a slice argument as text": (
        FamilyProgram("argument kinds", [], ["str(a)"]),
        _family_calls({"a": ("slice", 3, False)}, {"a": ("slice", 3, False), "size": 4}),
    ),
    # a C method bound to its class (``int.from_bytes``, the argument ``a`` being ``int``) is a new
    # object on every read: its identity check failed on the call that compiled (found by tools/fuzz.py)
    "a class's C method": (
        FamilyProgram("text", [], ["int.from_bytes(bytes([x.shape[0]]), 'little')"]),
        _family_calls({"a": ("class", 0, False), "size": 0}, {"a": ("class", 0, False), "size": 0}),
    ),
    "an Enum member's truth": (
        FamilyProgram("argument kinds", [], ["(x * 2 if a else x)"]),
        _family_calls({"a": ("enum", 0, False)}, {"a": ("enum", 3, False)}, {"a": ("class", 3, False)}),
    ),
    # C code given a list argument (``set(a)``, ``f"{a}"``) read the compiling call's plain numbers:
    # [2, 1] reused the entry of [2, 2] (issue 51)
    "a list argument's numbers hashed and printed": (
        FamilyProgram("argument kinds", [], ["(len(set(a)) if isinstance(a, (list, tuple)) else -1)",
                                             "(f'{a}' if isinstance(a, (list, tuple, dict)) else '')"]),
        _family_calls({"a": ("list", 4, False)}, {"a": ("list", 5, False)}, {"a": ("tuple", 5, False)},
                      {"a": ("tuple", 6, False)}),
    ),
    # a shape rendered was a tuple's text, ``(3,)`` for eager's ``torch.Size([3])`` (issue 51)
    "a shape as text": (
        FamilyProgram("text", [], ["str(x.shape)", "'%s' % (x.shape[1:],)"]),
        _family_calls({}, {"size": 4}),
    ),
}


@pytest.mark.parametrize("name", FAMILY_REGRESSIONS)
def test_a_family_regression_gives_eagers_result(module_enabled, name):
    program, sequence = FAMILY_REGRESSIONS[name]
    assert check_family_program(program, sequence).differences == []
