"""Every kind of value an argument can be, or hold, follows eager PyTorch (issue 36).

One jitted function per kind (``metatrace.guards.classify``'s table), called at least twice:

- with another value (``changed``): every result equals eager's; the entry may be recompiled;
- with a fresh object equal to the first (``fresh``): equal results, and where the kind is
  checked by value or by type (strings, tuples, data objects) the entry is reused;
- with the first object changed in place (``mutate``): equal results.

A case is built anew for every test (its objects are mutated).
"""

from __future__ import annotations

import dataclasses
import enum
import fractions
import gc
import types
import weakref
from typing import Any, Callable

import numpy as np
import pytest
import thunder
import torch

import metatrace
from metatrace.guards import classify
from fuzz_programs import _same

SYMBOLIC = "symbolic values"
X = torch.arange(1.0, 5.0)


class Mode(enum.Enum):
    A = 2
    B = 3


class Level(enum.IntEnum):  # thunder proxied these as plain ints: type(a) was int, a.name failed
    LOW = 2
    HIGH = 3


class Tag(enum.StrEnum):
    A = "ab"
    B = "ba"


class Count(int):
    pass


def _by_subclass(x, a):
    """What only the subclass tells: its type, its members' names, ``isinstance`` of it."""
    label = type(a).__name__ + getattr(a, "name", "")
    return x * (int(a) if isinstance(a, int) else len(a)) * len(label) * (2 if isinstance(a, (Level, Tag)) else 1)


@dataclasses.dataclass
class Config:
    mode: Any
    n: int = 2


class Scaler:
    def __init__(self, k):
        self.k = k

    def scale(self, x):
        return x * self.k

    @property
    def twice(self):
        return self.k * 2


class Slotted:  # no __dict__: the table's default (type and identity)
    __slots__ = ("k", "__weakref__")

    def __init__(self, k):
        self.k = k


def _double(t):
    return t * 2


def _copy_of(f):
    """A new function object with ``f``'s code: equal behaviour, another identity."""
    return types.FunctionType(f.__code__, f.__globals__, f.__name__, f.__defaults__, f.__closure__)


G1, G2 = torch.Generator(), torch.Generator()


def _by_mode(x, m):
    return x * m.value if m is Mode.A else x - m.value


def _from_attribute(x, o):
    """Reads ``o.mode`` and decides by its kind, as user code would."""
    a = o.mode
    if a is None:
        return x + 7
    if a is True or a is False:
        return x * (5 if a else 6)
    if isinstance(a, str):
        return x * ord(a[0])
    if isinstance(a, Mode):
        return x * a.value if a is Mode.A else x - a.value
    if callable(a):
        return a(x)
    return x * a


@dataclasses.dataclass
class Case:
    fn: Callable
    first: Callable[[], Any]  # makes the first argument
    changed: Callable[[], Any] | None = None  # another value
    fresh: Callable[[], Any] | None = None  # a new object equal to the first
    mutate: Callable[[Any], None] | None = None  # changes the first in place
    reuse_fresh: bool = True  # a fresh equal object reuses the entry


def _ns(mode):
    return lambda: types.SimpleNamespace(mode=mode, n=2)


def _set_mode(mode):
    def mutate(o):
        o.mode = mode

    return mutate


CASES: dict[str, Case] = {
    # checked by value
    "str": Case(lambda x, s: x * ord(s[0]) * len(s), lambda: "ab", lambda: "ba", lambda: "".join(["a", "b"])),
    "bytes": Case(lambda x, b: x * len(b) * b[0], lambda: b"ab", lambda: b"ba", lambda: bytes(bytearray(b"ab"))),
    "bool": Case(lambda x, b: x * 5 if b is True else x * 6, lambda: True, lambda: False),
    "none": Case(lambda x, n: x + 1 if n is None else x * n, lambda: None, lambda: 3),
    "ellipsis": Case(lambda x, e: x[e] * 2, lambda: ..., lambda: 0),
    "dtype": Case(lambda x, d: x.to(d), lambda: torch.float64, lambda: torch.float16),
    "device": Case(lambda x, d: x.to(d) * 2, lambda: torch.device("cpu"), fresh=lambda: torch.device("cpu")),
    "range": Case(lambda x, r: x * len(r) * r.step, lambda: range(0, 4), lambda: range(0, 4, 2),
                  lambda: range(0, 4)),
    "range stop": Case(lambda x, r: x * r.stop, lambda: range(0, 4, 2), lambda: range(0, 3, 2),
                       lambda: range(0, 4, 2)),
    "fraction": Case(lambda x, fr: x * float(fr), lambda: fractions.Fraction(1, 2), lambda: fractions.Fraction(1, 3),
                     lambda: fractions.Fraction(2, 4)),
    "complex": Case(lambda x, c: x * c.real + c.imag, lambda: 1 + 2j, lambda: 3 + 1j, lambda: complex(1, 2)),
    "slice": Case(lambda x, s: x[s] * 2, lambda: slice(0, 2), lambda: slice(1, None), lambda: slice(0, 2)),
    # symbolic: another value reuses the entry too
    "int": Case(lambda x, n: x * n, lambda: 2, lambda: 3, lambda: 2),
    "float": Case(lambda x, n: x * n, lambda: 2.5, lambda: 3.5, lambda: 2.5),
    # containers: elements classified again
    "list": Case(lambda x, l: x * l[0] * len(l), lambda: [2, 3], lambda: [2, 3, 4], lambda: [2, 3],
                 lambda l: l.append(4)),
    "tuple of enums": Case(lambda x, t: _by_mode(x, t[0]), lambda: (Mode.A,), lambda: (Mode.B,), lambda: (Mode.A,)),
    "dict": Case(lambda x, d: _by_mode(x, d["m"]) * len(d), lambda: {"m": Mode.A}, lambda: {"m": Mode.B},
                 lambda: {"m": Mode.A}, lambda d: d.update(m=Mode.B)),
    "function in dict": Case(lambda x, d: d["f"](x), lambda: {"f": torch.relu}, lambda: {"f": torch.tanh},
                             lambda: {"f": torch.relu}, lambda d: d.update(f=torch.tanh)),
    "class in list": Case(lambda x, l: x * (2 if l[0] is int else 3), lambda: [int], lambda: [float], lambda: [int],
                          lambda l: l.__setitem__(0, float)),
    "data object in list": Case(lambda x, l: _from_attribute(x, l[0]), lambda: [Config(Mode.A)],
                                lambda: [Config(Mode.B)], lambda: [Config(Mode.A)],
                                lambda l: _set_mode(Mode.B)(l[0])),
    # identity
    "enum": Case(_by_mode, lambda: Mode.A, lambda: Mode.B),
    "int enum": Case(_by_subclass, lambda: Level.LOW, lambda: Level.HIGH),
    "str enum": Case(_by_subclass, lambda: Tag.A, lambda: Tag.B),
    "int subclass": Case(_by_subclass, lambda: COUNT, lambda: Count(3), lambda: Count(2), reuse_fresh=False),
    "namespace int enum": Case(lambda x, o: _by_subclass(x, o.mode), _ns(Level.LOW), _ns(Level.HIGH), _ns(Level.LOW),
                               _set_mode(Level.HIGH)),
    "builtin": Case(lambda x, act: act(x), lambda: torch.relu, lambda: torch.tanh),
    "function": Case(lambda x, f: f(x), lambda: _double, lambda: torch.neg, lambda: _copy_of(_double),
                     reuse_fresh=False),
    "class": Case(lambda x, c: x * (2 if c is int else 3), lambda: int, lambda: float),
    "generator": Case(lambda x, g: x * (2 if g is G1 else 3), lambda: G1, lambda: G2),
    "bound method": Case(lambda x, m: m(x), lambda: SCALER.scale, lambda: Scaler(5).scale, lambda: SCALER.scale),
    # data objects: type, and each attribute read
    **{f"namespace {name}": Case(_from_attribute, _ns(a), _ns(b), _ns(a), _set_mode(b)) for name, a, b in (
        ("str", "ab", "ba"), ("enum", Mode.A, Mode.B), ("bool", True, False), ("none", None, 2),
        ("callable", torch.relu, torch.tanh), ("int", 2, 3), ("float", 2.5, 0.5))},
    "dataclass": Case(_from_attribute, lambda: Config("ab"), lambda: Config("ba"), lambda: Config("ab"),
                      _set_mode("ba")),
    "user object method": Case(lambda x, o: o.scale(x), lambda: Scaler(3), lambda: Scaler(4), lambda: Scaler(3),
                               lambda o: setattr(o, "k", 5)),
    "user object property": Case(lambda x, o: x * o.twice, lambda: Scaler(3), lambda: Scaler(4.5), lambda: Scaler(3),
                                 lambda o: setattr(o, "k", 5)),
    "nested data object": Case(lambda x, o: _from_attribute(x, o.mode), _ns(Config(Mode.A)), _ns(Config(Mode.B)),
                               _ns(Config(Mode.A)), lambda o: _set_mode(Mode.B)(o.mode)),
    "data object read whole": Case(lambda x, o: _from_attribute(x, types.SimpleNamespace(**vars(o))),
                                   lambda: Config(Mode.A, 2), lambda: Config(Mode.B), lambda: Config(Mode.A, 2),
                                   _set_mode(Mode.B)),
    "number of a data object read whole": Case(lambda x, o: x * vars(o)["n"], lambda: Config(Mode.A, 2),
                                               lambda: Config(Mode.A, 3), lambda: Config(Mode.A, 2),
                                               lambda o: setattr(o, "n", 4)),
    "numpy float": Case(lambda x, n: x * n, lambda: np.float64(2.5), lambda: np.float64(3.5),
                        lambda: np.float64(2.5)),
    "numpy int": Case(lambda x, n: x * int(n), lambda: np.int64(2), lambda: np.int64(3), lambda: np.int64(2)),
    # the default: type and identity
    "slotted object": Case(lambda x, o: x * o.k, lambda: SLOTTED, lambda: Slotted(4), lambda: Slotted(3),
                           lambda o: setattr(o, "k", 5), reuse_fresh=False),
}
SCALER = Scaler(3)
COUNT = Count(2)
SLOTTED = Slotted(3)


def _calls(jf, fn, args: list) -> tuple[list, list]:
    """(eager results, jitted results), calling each on every argument in turn."""
    eager, got = [], []
    for a in args:
        eager.append(fn(X, a))
        got.append(jf(X, a))
    return eager, got


def _all_same(eager, got) -> bool:
    return all(_same(e, g) for e, g in zip(eager, got))


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if c.changed is not None])
def test_another_value_follows_eager(enabled, name):
    case = CASES[name]
    jf = thunder.jit(case.fn, cache=SYMBOLIC)
    eager, got = _calls(jf, case.fn, [case.first(), case.changed(), case.first(), case.changed()])
    assert _all_same(eager, got)


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if c.fresh is not None])
def test_an_equal_fresh_object_follows_eager(enabled, name):
    case = CASES[name]
    jf = thunder.jit(case.fn, cache=SYMBOLIC)
    eager, got = _calls(jf, case.fn, [case.first(), case.fresh(), case.fresh()])
    assert _all_same(eager, got)


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if c.fresh is not None and c.reuse_fresh])
def test_an_equal_fresh_object_reuses_the_entry(enabled, name):
    case = CASES[name]
    jf = thunder.jit(case.fn, cache=SYMBOLIC)
    _calls(jf, case.fn, [case.first(), case.fresh(), case.fresh()])
    assert thunder.cache_misses(jf) == 1


@pytest.mark.parametrize("name", ["int", "float", "numpy float", "namespace int", "namespace float"])
def test_another_number_reuses_the_entry(enabled, name):
    case = CASES[name]
    jf = thunder.jit(case.fn, cache=SYMBOLIC)
    _calls(jf, case.fn, [case.first(), case.changed()])
    assert thunder.cache_misses(jf) == 1


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if c.mutate is not None])
def test_the_same_object_changed_in_place_follows_eager(enabled, name):
    case = CASES[name]
    jf = thunder.jit(case.fn, cache=SYMBOLIC)
    arg = case.first()
    eager, got = _calls(jf, case.fn, [arg])
    case.mutate(arg)
    eager2, got2 = _calls(jf, case.fn, [arg, arg])
    assert _all_same(eager + eager2, got + got2)


def test_the_same_value_again_reuses_the_entry_for_every_kind(enabled):
    missed = []
    for name, case in CASES.items():
        jf = thunder.jit(case.fn, cache=SYMBOLIC)
        arg = case.first()
        _calls(jf, case.fn, [arg, arg])
        if thunder.cache_misses(jf) != 1:
            missed.append(name)
    assert missed == []


def _counting():
    yield from (1, 2, 3)


@pytest.mark.parametrize("make", [lambda: iter([1, 2, 3]), _counting], ids=["list iterator", "generator"])
def test_an_iterator_read_by_the_trace_follows_eager(enabled, make):
    """``next(it)`` gives another value on every call from the same object: no entry is reused."""
    fn = lambda x, it: x * next(it)  # noqa: E731
    jf = thunder.jit(fn, cache=SYMBOLIC)
    mine, theirs = make(), make()
    eager = [fn(X, theirs) for _ in range(3)]
    got = [jf(X, mine) for _ in range(3)]
    assert _all_same(eager, got)


# ---------------------------------------------------------------------------------------------
# explain() names the checks; an identity check does not keep its object alive
# ---------------------------------------------------------------------------------------------


def _guards(jf) -> list[str]:
    return metatrace.explain(jf)[0].guards


def test_an_enum_argument_is_explained_as_an_identity(enabled):
    jf = thunder.jit(_by_mode, cache=SYMBOLIC)
    jf(X, Mode.A)
    assert "m is Mode.A" in _guards(jf)


def test_a_data_object_argument_is_explained_by_its_type(enabled):
    jf = thunder.jit(_from_attribute, cache=SYMBOLIC)
    jf(X, Config(Mode.A))
    assert "type(o) is Config" in _guards(jf)


def test_an_attribute_of_an_argument_is_explained_by_its_path(enabled):
    jf = thunder.jit(_from_attribute, cache=SYMBOLIC)
    jf(X, Config(Mode.A))
    assert "o.mode is Mode.A (read from an argument)" in _guards(jf)


def test_a_container_argument_is_explained_by_its_elements(enabled):
    jf = thunder.jit(CASES["tuple of enums"].fn, cache=SYMBOLIC)
    jf(X, (Mode.A, 2, "s"))
    assert "t: tuple[is Mode.A, int, 's']" in _guards(jf)


def test_a_cycle_of_objects_read_whole_follows_eager(enabled):
    fn = lambda x, o: x * vars(o)["n"]  # noqa: E731
    jf = thunder.jit(fn, cache=SYMBOLIC)
    objects = [types.SimpleNamespace(n=n) for n in (2, 3)]
    for o in objects:
        o.me = o  # (the check of the whole object gives up: an entry for one call)
    eager, got = _calls(jf, fn, objects + objects)
    assert _all_same(eager, got)


@pytest.mark.parametrize("name", ["a", "".join(["re", "al"])], ids=["data object", "number"])
def test_an_attribute_read_with_a_name_that_is_not_a_constant_follows_eager(enabled, name):
    # (``name`` is a closure's string: thunder records the read with the name's record as its
    # key; the prologue printed ``obj.<Proxy(name="obj6")>``)
    fn = lambda x, o: (x, getattr(o, name))  # noqa: E731
    jf = thunder.jit(fn, cache=SYMBOLIC)
    if name == "a":
        objects = [types.SimpleNamespace(a=2), types.SimpleNamespace(a=5)]
    else:
        objects = [True, 3, 2.5, False]
    eager, got = _calls(jf, fn, objects + objects)
    assert _all_same(eager, got)


def test_an_identity_check_does_not_keep_its_object_alive(enabled):
    jf = thunder.jit(lambda x, o: x * 2 if o is not None else x, cache=SYMBOLIC)
    o = Slotted(3)
    jf(X, o)
    ref = weakref.ref(o)
    del o
    gc.collect()
    assert ref() is None


def test_a_dead_identity_matches_nothing(enabled):
    from metatrace.guards.matchers import Same

    o = Slotted(3)
    check = Same(o)
    del o
    gc.collect()
    assert not check.matches(None)


# A C method bound to its object is a new object on every read: checked by name and object ----

_C_METHODS = {  # (object, name, another object with that method): read twice, it is two objects
    "a class's classmethod": (int, "from_bytes", bool),
    "a dict's method": ({"a": 1}, "get", {"a": 1}),
    "a list's method": ([1], "index", [1]),
    "a str's method": ("ab", "upper", "cd"),
}


@pytest.mark.parametrize("case", _C_METHODS)
def test_a_c_method_read_again_matches(case):
    obj, name, _ = _C_METHODS[case]
    assert classify.expect(getattr(obj, name)).matches(getattr(obj, name))


@pytest.mark.parametrize("case", _C_METHODS)
def test_a_c_method_of_another_object_does_not_match(case):
    obj, name, other = _C_METHODS[case]
    assert not classify.expect(getattr(obj, name)).matches(getattr(other, name))
