"""Guard simplification (metatrace.guards.simplify): never weaker, never stronger, and readable.

(a) For real traced functions the simplified guards of each entry accept exactly the leaf values
    the recorded guards accept (both compiled by GuardProgram, a raising guard counting as failed),
    over random values around and away from the traced ones.
(b) Each rule on hand-built guards, checked against the original over a grid of values too.
(c) ``explain()`` shows no tautologies.
"""

from __future__ import annotations

import re

import itertools
import math
import random
from types import SimpleNamespace

import pytest
import torch

import thunder
import thunder.core.prims as prims
from thunder.core.proxies import CONSTRAINT, FloatProxy, IntegerProxy
from thunder.core.trace import TraceCtx, tracectx
from thunder.tests import nanogpt_model

import metatrace
import metatrace.guards.simplify as simplify_module
import metatrace.guards.simplify.reduction as reduction_module
from metatrace.guards.collect import GuardFailure
from metatrace.guards.compiled_program import GuardProgram
from metatrace.guards.projection import project
from metatrace.guards.guard_record import Guard
from metatrace.metas.concretizations import BRANCH
from metatrace.guards.simplify import simplify
from workloads import causal_attention, causal_mask

SYMBOLIC = "symbolic values"
P = prims.PrimIDs


def _accepts(program: GuardProgram, values: list) -> bool:
    try:
        program.fn(*values)
        return True
    except GuardFailure:
        return False
    except Exception:  # a guard that raises (a division by zero) is a miss as well
        return False


# --- (b) hand-built guards ------------------------------------------------------------------


class Builder:
    """Leaves and number ops with producers, as the recorder leaves them for the guards."""

    def __init__(self):
        self.trace = TraceCtx()
        self.producers: dict = {}
        self.leaves: list = []
        self.names: dict = {}
        self.sizes: set = set()
        self.guards: list[Guard] = []

    def leaf(self, name: str, value=3, size: bool = False, kind=int):
        with tracectx(self.trace):
            cls = FloatProxy if kind is float else IntegerProxy
            p = cls(name=f"l{len(self.leaves)}", value=value, constraint=CONSTRAINT.DYNAMIC)
        self.leaves.append(p)
        self.names[p.name] = name
        if size:
            self.sizes.add(p.name)
        return p

    def op(self, pid, *args, kind=int):
        with tracectx(self.trace):
            cls = FloatProxy if kind is float else IntegerProxy
            out = cls(name=f"t{len(self.producers)}", value=None, constraint=CONSTRAINT.DYNAMIC)
        self.producers[out.name] = SimpleNamespace(
            sym=SimpleNamespace(id=pid, name=str(pid)), flat_args=list(args), flat_proxy_outs=[out]
        )
        return out

    def guard(self, op, lhs, rhs):
        self.guards.append(Guard(op, lhs, rhs, BRANCH))

    def simplified(self):
        leaf_names = {p.name for p in self.leaves}
        return simplify(self.guards, self.producers, self.leaves, self.names, self.sizes,
                        is_leaf=lambda p: p.name in leaf_names)

    def texts(self) -> list[str]:
        return [g.text for g in self.simplified()]

    def check_equivalent(self, domain=range(-4, 9), floats=(0.5, 2.0, -1.5, math.inf, math.nan)) -> None:
        """Original and simplified accept the same values over the whole grid (sizes >= 0)."""
        simple = self.simplified()
        original = GuardProgram("t", self.guards, [str(g) for g in self.guards], self.leaves, self.producers)
        simplified = GuardProgram("t", simple, [g.text for g in simple], self.leaves, self.producers)
        axes = [floats if isinstance(p, FloatProxy) else [v for v in domain if v >= 0 or p.name not in self.sizes]
                for p in self.leaves]
        for values in itertools.product(*axes):
            want, got = _accepts(original, list(values)), _accepts(simplified, list(values))
            assert want == got, (dict(zip(self.names.values(), values)), want, [g.text for g in simple])


def test_constant_arithmetic_and_identities_fold_to_tautologies():
    b = Builder()
    x = b.leaf("x", size=True)
    # ((x * 4) * 2) * 2 == x * 16
    b.guard("eq", b.op(P.MUL, b.op(P.MUL, b.op(P.MUL, x, 4), 2), 2), b.op(P.MUL, x, 16))
    # x + max(0, x - 1) * 0 >= 0
    b.guard("ge", b.op(P.ADD, x, b.op(P.MUL, b.op(P.MAXIMUM, 0, b.op(P.SUB, x, 1)), 0)), 0)
    # x - x == 0, x // 1 == x
    b.guard("eq", b.op(P.SUB, x, x), 0)
    b.guard("eq", b.op(P.PY_FLOORDIV, x, 1), x)
    assert b.texts() == []
    b.check_equivalent()


def test_a_number_is_not_a_size():
    b = Builder()
    n = b.leaf("n")
    b.guard("ge", b.op(P.ADD, n, b.op(P.MUL, b.op(P.MAXIMUM, 0, b.op(P.SUB, n, 1)), 0)), 0)
    assert b.texts() == ["n >= 0"]
    b.check_equivalent()


def test_conversions_of_integral_values_are_dropped():
    b = Builder()
    T = b.leaf("T")
    as_float = b.op(P.CONVERT_ELEMENT_TYPE, b.op(P.SUB, T, 0), float, kind=float)
    back = b.op(P.CONVERT_ELEMENT_TYPE, b.op(P.DIV, as_float, 1.0, kind=float), int)
    b.guard("eq", back, T)  # int(float(T - 0) / 1.0) == T
    b.guard("lt", b.op(P.CEIL, b.op(P.DIV, as_float, 1.0, kind=float)), 128)  # ceil(float(T) / 1.0) < 128
    b.guard("ge", b.op(P.CONVERT_ELEMENT_TYPE, T, int), -5)  # int(T) >= -5
    assert b.texts() == ["-5 <= T <= 127"]
    b.check_equivalent(domain=[-6, -5, 0, 127, 128])


def test_one_range_per_symbol():
    b = Builder()
    T = b.leaf("T")
    for op, rhs in (("gt", 1), ("lt", 128), ("ne", 0), ("ge", 0)):
        b.guard(op, T, rhs)
    assert b.texts() == ["2 <= T <= 127"]
    b.guard("ne", T, 5)
    b.guard("ne", T, 2)  # at the end of the range: tightens it
    b.guard("ne", 200, T)  # outside: decided by the range
    assert b.texts() == ["3 <= T <= 127", "T != 5"]
    b.check_equivalent(domain=[-1, 0, 1, 2, 3, 4, 5, 6, 127, 128, 200])


def test_sizes_are_known_non_negative():
    b = Builder()
    s = b.leaf("a.shape[0]", size=True)
    b.guard("ne", s, -1)
    b.guard("ge", s, 0)
    b.guard("gt", s, 0)
    assert b.texts() == ["a.shape[0] > 0"]  # as written
    b.check_equivalent()


def test_equalities_substitute_and_stay_once():
    b = Builder()
    a1 = b.leaf("a.shape[1]", size=True)
    w1 = b.leaf("w.shape[1]", size=True)
    b.guard("eq", w1, a1)
    b.guard("ge", w1, 2)
    b.guard("lt", b.op(P.MUL, w1, 2), 64)
    b.guard("eq", b.op(P.MUL, a1, 3), b.op(P.MUL, w1, 3))
    assert b.texts() == ["a.shape[1] == w.shape[1]", "2 <= a.shape[1] <= 31"]
    b.check_equivalent(domain=[0, 1, 2, 3, 31, 32])


def test_a_range_of_one_value_is_an_equality_that_substitutes():
    b = Builder()
    D, k = b.leaf("D", size=True), b.leaf("k.shape[3]", size=True)
    b.guard("le", D, 16)
    b.guard("ge", D, 16)
    b.guard("eq", D, k)
    b.guard("gt", b.op(P.ADD, k, 1), D)  # 17 > 16 once D and k are 16
    assert b.texts() == ["D == 16", "k.shape[3] == 16"]
    b.check_equivalent(domain=[0, 15, 16, 17])


def test_floor_division_and_remainder_by_constants_normalize():
    b = Builder()
    x, y = b.leaf("x", size=True), b.leaf("y", size=True)
    out = b.op(P.ADD, b.op(P.PY_FLOORDIV, b.op(P.SUB, x, 2), 2), 1)  # (x - 2) // 2 + 1
    b.guard("eq", y, out)
    b.guard("ge", out, 0)  # implied by x >= 0
    b.guard("eq", b.op(P.REMAINDER, b.op(P.ADD, b.op(P.MUL, x, 4), 6), 4), 2)  # (4x + 6) % 4 == 2
    assert b.texts() == ["y == x // 2"]
    b.check_equivalent()


def test_thunder_int_floor_division_is_recognized():
    b = Builder()
    a, n = b.leaf("a.shape[0]", size=True), b.leaf("n")
    trunc = b.op(P.DIV, a, n)
    fix = b.op(
        P.CONVERT_ELEMENT_TYPE,
        b.op(P.BITWISE_AND, b.op(P.NE, b.op(P.SIGNBIT, a), b.op(P.SIGNBIT, n)),
             b.op(P.NE, b.op(P.CONVERT_ELEMENT_TYPE, b.op(P.FMOD, a, n, kind=float), int), 0)),
        int,
    )
    floor = b.op(P.SUB, trunc, fix)
    b.guard("eq", b.op(P.MUL, n, floor), a)  # n * (a // n) == a
    b.guard("eq", b.op(P.REMAINDER, a, n), 0)  # a % n == 0
    assert b.texts() == ["a.shape[0] % n == 0"]
    b.check_equivalent(domain=range(-7, 13))


def test_a_folded_division_keeps_its_divisor_check():
    b = Builder()
    n = b.leaf("n")
    b.guard("eq", b.op(P.REMAINDER, b.op(P.MUL, n, 4), n), 0)  # (n * 4) % n == 0 raises for n == 0
    assert b.texts() == ["n != 0"]
    b.check_equivalent()
    b.guard("gt", n, 0)
    assert b.texts() == ["n > 0"]
    b.check_equivalent()


def test_a_kept_division_checks_its_divisor_itself():
    b = Builder()
    x, n = b.leaf("x", size=True), b.leaf("n")
    b.guard("ge", b.op(P.PY_FLOORDIV, x, n), 2)
    b.guard("eq", b.op(P.REMAINDER, b.op(P.MUL, n, 3), n), 0)
    assert b.texts() == ["x // n >= 2"]
    b.check_equivalent()


def test_duplicates_and_decided_inequalities_go(monkeypatch):
    monkeypatch.setattr(reduction_module, "MERGE_RELATIONS", False)
    b = Builder()
    i, j = b.leaf("i"), b.leaf("j")
    b.guard("lt", i, j)
    b.guard("gt", j, i)
    b.guard("ne", j, i)  # decided by i < j
    b.guard("le", b.op(P.ADD, i, 1), j)  # the same relation
    b.guard("le", i, j)  # weaker: kept unless MERGE_RELATIONS
    assert b.texts() == ["i < j", "i <= j"]
    b.check_equivalent()


def test_merged_relations_keep_the_tightest(monkeypatch):
    monkeypatch.setattr(reduction_module, "MERGE_RELATIONS", True)
    b = Builder()
    i, j = b.leaf("i"), b.leaf("j")
    b.guard("le", i, j)
    b.guard("lt", i, j)
    b.guard("le", j, b.op(P.ADD, i, 10))
    b.guard("le", j, b.op(P.ADD, i, 12))
    assert b.texts() == ["i < j", "j <= i + 10"]
    b.check_equivalent()


def test_float_inputs_keep_their_relations_and_finiteness():
    b = Builder()
    p = b.leaf("p", value=0.7, kind=float)
    b.guard("gt", p, 0.5)
    b.guard("eq", b.op(P.MUL, b.op(P.CONVERT_ELEMENT_TYPE, p, int), 0), 0)  # int(p) * 0 raises for inf, nan
    b.guard("ge", b.op(P.SUB, p, 0), 0.5)  # (p - 0 is p; p + 0 is not: -0.0 + 0 is 0.0, test_signed_zeros.py)
    assert b.texts() == ["p > 0.5", "p >= 0.5", "isfinite(p)"]
    b.check_equivalent()


def test_an_int_compared_with_a_fraction():
    b = Builder()
    T = b.leaf("T")
    b.guard("lt", b.op(P.CONVERT_ELEMENT_TYPE, T, float, kind=float), 2.5)
    b.guard("ge", T, 0.5)
    b.guard("ne", T, 1.5)
    assert b.texts() == ["1 <= T <= 2"]
    b.check_equivalent()


def test_the_simplified_program_is_smaller():
    b = Builder()
    x = b.leaf("x", size=True)
    for k in range(1, 6):
        b.guard("ge", b.op(P.MUL, x, k), k)
    simple = b.simplified()
    program = GuardProgram("t", simple, [g.text for g in simple], b.leaves, b.producers)
    assert [g.text for g in simple] == ["x >= 1"] and program.source.count("if not") == 1


# Random guard sets over every operation the recorder emits, checked on the whole grid.
_BINARY = [P.ADD, P.SUB, P.MUL, P.PY_FLOORDIV, P.REMAINDER, P.MAXIMUM, P.MINIMUM, P.DIV, P.BITWISE_AND,
           P.BITWISE_OR, P.BITWISE_XOR, P.EQ, P.LT, P.NE, P.ADD, P.MUL, P.SUB]


def _random_expr(b: Builder, leaves, rng: random.Random, depth: int):
    if depth == 0 or rng.random() < 0.3:
        return rng.choice(leaves) if rng.random() < 0.7 else rng.choice([0, 1, 2, 3, -1, 4])
    sub = lambda: _random_expr(b, leaves, rng, depth - 1)  # noqa: E731
    k = rng.random()
    if k < 0.1:
        return b.op(P.NEG, sub())
    if k < 0.2:  # int(float(x) / 1.0), ceil(float(x) * 2.0), ...
        f = b.op(P.CONVERT_ELEMENT_TYPE, sub(), float, kind=float)
        g = b.op(rng.choice([P.DIV, P.MUL, P.ADD]), f, rng.choice([1.0, 2.0, 0.0, 1]), kind=float)
        return b.op(rng.choice([P.CEIL, P.FLOOR]), g) if rng.random() < 0.5 else b.op(P.CONVERT_ELEMENT_TYPE, g, int)
    if k < 0.25:
        return b.op(rng.choice([P.PY_ABS, P.SIGNBIT]), sub())
    if k < 0.28:
        return b.op(P.POW, sub(), rng.choice([0, 1, 2, -1]))
    if k < 0.33:  # thunder's int floor division: trunc division minus its sign fix
        a, c = sub(), rng.choice(leaves + [3, -2])
        fix = b.op(P.CONVERT_ELEMENT_TYPE, b.op(P.BITWISE_AND, b.op(P.NE, b.op(P.SIGNBIT, a), b.op(P.SIGNBIT, c)),
                   b.op(P.NE, b.op(P.CONVERT_ELEMENT_TYPE, b.op(P.FMOD, a, c, kind=float), int), 0)), int)
        return b.op(P.SUB, b.op(P.DIV, a, c), fix)
    return b.op(rng.choice(_BINARY), sub(), sub())


@pytest.mark.parametrize("merge", [False, True])
def test_random_guard_sets_simplify_exactly(merge, monkeypatch):
    monkeypatch.setattr(reduction_module, "MERGE_RELATIONS", merge)
    rng = random.Random(int(merge))
    for _ in range(60):
        b = Builder()
        leaves = [b.leaf("x", size=True), b.leaf("y"), b.leaf("z", size=rng.random() < 0.5)][: rng.randint(1, 3)]
        if rng.random() < 0.4:
            leaves = leaves[:2] + [b.leaf("p", kind=float)]
        for _ in range(rng.randint(0, 4)):  # linear relations: ranges and substitutions
            l1, l2 = rng.choice(leaves), rng.choice(leaves)
            lhs = b.op(P.ADD, b.op(P.MUL, l1, rng.choice([1, 1, 2, -1])), rng.choice([0, 1, -2]))
            b.guard(rng.choice(["eq", "eq", "ne", "lt", "le", "gt", "ge"]), lhs, rng.choice([l2, 2, 0, 5]))
        for _ in range(rng.randint(1, 4)):
            b.guard(rng.choice(["eq", "ne", "lt", "le", "gt", "ge"]), _random_expr(b, leaves, rng, 3),
                    _random_expr(b, leaves, rng, 2))
        b.check_equivalent(domain=range(-3, 7))


# --- (a) real traces: the simplified guards accept exactly what the recorded ones accept ----


def nanogpt_block() -> torch.nn.Module:
    torch.manual_seed(0)
    config = nanogpt_model.GPTConfig(n_layer=1, n_head=4, n_embd=32, block_size=64, vocab_size=64, dropout=0.0)
    return nanogpt_model.Block(config).eval()


def _mask_attention(T):
    return [tuple(torch.randn(2, 4, T, 16) for _ in range(3)) + (causal_mask(),)]


WORKLOADS = {
    "causal attention": (lambda: causal_attention, [_mask_attention(16)[0], _mask_attention(24)[0]]),
    "max_pool2d": (lambda: (lambda x: torch.nn.functional.max_pool2d(x, 2)), [(torch.randn(1, 3, 8, 8),)]),
    "strided slice": (lambda: (lambda a, i: a[:, :, 1:i:2]), [(torch.randn(8, 16, 4), 3), (torch.randn(8, 16, 9), 9)]),
    "reshape": (lambda: (lambda x, n: x.reshape(n, -1)), [(torch.randn(4, 6), 3)]),
    "view": (lambda: (lambda x, n: x.view(-1, n).sum(0)), [(torch.randn(4, 6), 2)]),
    "interpolate": (lambda: (lambda x: torch.nn.functional.interpolate(x, scale_factor=2.0)), [(torch.randn(1, 3, 8, 8),)]),
    "split": (lambda: (lambda a, n: torch.split(a, n, dim=1)), [(torch.randn(2, 10), 3)]),
    "narrow": (lambda: (lambda a, i, j: a[:, i:j] * 2), [(torch.randn(3, 10), 2, 7)]),
    "nanogpt block": (nanogpt_block, [(torch.randn(2, 16, 32),)]),
}


def _draws(leaves, sizes: set, rng: random.Random, count: int):
    """Leaf values: the traced ones, a few changed, equal ones moved together, all random."""
    base = [p.value for p in leaves]
    pool = [0, 1, 2, 3, 4, 7, 8, 9, 15, 16, 17, 31, 32, 63, 64, 65, 127, 128, 1000, 4096, 123457]

    def pick(i):
        v = rng.choice([rng.choice(pool), base[i] + rng.choice((-1, 1)), base[i] * rng.choice((2, 3)),
                        rng.randint(0, 200), -rng.choice(pool[1:8])])
        return max(v, 0) if leaves[i].name in sizes else v

    groups: dict = {}
    for i, v in enumerate(base):
        groups.setdefault(v, []).append(i)
    yield list(base)
    for k in range(count):
        values = list(base)
        mode = k % 4
        if mode == 0:
            for i in rng.sample(range(len(base)), min(len(base), rng.randint(1, 2))):
                values[i] = pick(i)
        elif mode in (1, 3):
            for members in groups.values():
                if rng.random() < 0.5:
                    v = pick(members[0])
                    for i in members:
                        values[i] = max(v, 0) if leaves[i].name in sizes else v
            if mode == 3:
                i = rng.randrange(len(base))
                values[i] = values[i] + rng.choice((-1, 1))
                values[i] = max(values[i], 0) if leaves[i].name in sizes else values[i]
        else:
            values = [pick(i) for i in range(len(base))]
        # thunder's own prologue checks a static input's value: only that value reaches the guards
        yield [p.value if p.is_static_constrained() else v for p, v in zip(leaves, values)]


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_simplified_guards_accept_exactly_what_the_recorded_ones_accept(name, enabled, monkeypatch):
    make, calls = WORKLOADS[name]
    records = []
    real = simplify_module.simplify

    def spy(guards, producers, leaves=(), names=None, sizes=(), **kwargs):
        out = real(guards, producers, leaves, names, sizes, **kwargs)
        records.append((list(guards), producers, set(sizes), out))
        return out

    monkeypatch.setattr(simplify_module, "simplify", spy)
    fn = make()
    jf = thunder.jit(fn, cache=SYMBOLIC)
    with torch.no_grad():
        for args in calls:
            jf(*args)
    assert records
    rng = random.Random(0)
    for guards, producers, sizes, simple in records:
        leaves: dict = {}
        for g in guards:
            for p in project([g.lhs, g.rhs], producers)[1]:
                leaves.setdefault(p.name, p)
        leaves = list(leaves.values())
        original = GuardProgram("o", guards, [str(g) for g in guards], leaves, producers)
        simplified = GuardProgram("s", simple, [g.text for g in simple], leaves, producers)
        assert len(simple) <= len(guards)
        accepted = rejected = 0
        for values in _draws(leaves, sizes, rng, 3000):
            want = _accepts(original, values)
            assert _accepts(simplified, values) == want, (
                dict(zip([p.name for p in leaves], values)), want, [g.text for g in simple])
            accepted += want
            rejected += not want
        assert accepted and (rejected or not guards)


# --- (c) explain ----------------------------------------------------------------------------


def _metatrace_lines(entry) -> list[str]:
    return [g for g in entry.guards if not g.startswith("len(") and ": rank" not in g]


def test_explain_of_max_pool2d_has_no_tautologies(enabled):
    jf = thunder.jit(lambda x: torch.nn.functional.max_pool2d(x, 2), cache=SYMBOLIC)
    jf(torch.randn(1, 3, 8, 8))
    (entry,) = metatrace.explain(jf)
    lines = _metatrace_lines(entry)
    # (channels: no channel count of 1 is told from others, metatrace.proxies.size_oblivious)
    assert lines == ["x.shape[1] > 0", "x.shape[2] >= 2", "x.shape[3] >= 2"]
    for line in lines:
        assert "* 0" not in line and " + 0" not in line
        lhs, _, rhs = line.partition(" == ")
        assert lhs != rhs


def test_explain_of_causal_attention_names_the_inputs(enabled):
    jf = thunder.jit(causal_attention, cache=SYMBOLIC)
    jf(*_mask_attention(16)[0])
    (entry,) = metatrace.explain(jf)
    lines = _metatrace_lines(entry)
    for expected in ("T == k.shape[2]", "T == v.shape[2]", "T < mask.shape[2]", "D == k.shape[3]"):
        assert expected in lines
    assert "T >= 2" not in lines  # T == 1 shares the entry (metatrace.proxies.size_oblivious)
    assert "D == 16" not in lines  # 1.0 / math.sqrt(D) is a number op, not a pinned size (issue 17)
    assert not any(re.search(r"\bi\d+\b", line) for line in lines), lines  # no intermediate names (i17)
    assert "mask.shape[2] != T" not in lines and "T != 0" not in lines


def test_exact_division_by_a_symbol_folds_and_keeps_the_divisor_nonzero():
    """``(x * w) % w == 0`` and ``x == (x * w) // w`` (the linear rule's reshape) hold for every
    w != 0: what remains is w != 0 (kept, as the original raises at w == 0)."""
    b = Builder()
    x, w = b.leaf("x"), b.leaf("w")
    b.guard("eq", b.op(P.REMAINDER, b.op(P.MUL, x, w), w), 0)
    b.guard("eq", x, b.op(P.PY_FLOORDIV, b.op(P.MUL, x, w), w))
    assert b.texts() == ["w != 0"]
    b.check_equivalent()
