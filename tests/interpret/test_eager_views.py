"""metatrace.interpret.calls.c_code.eager_views: C code given an argument's numbers (a set of a list argument,
the list printed, hashed or compared) decides by their values, guarded.

thunder proxies a number of a list argument only where the function reads it (``l[0]``); C code
given the list itself (``set(l)``, ``str(l)``, ``{*l}``) read the compiling call's plain numbers,
and the entry served calls with other numbers: ``x.new_zeros(len(set(l)))`` had 3 elements for
``[1, 1, 3]`` after ``[1, 2, 3]``, stock thunder too (issue 51). Generated: every builtin that
hashes, prints or compares the numbers x every way the numbers reach it, over calls where the
values change (each result eager's) and where only the argument's identity changes (one compile).
"""

from __future__ import annotations

import collections
import json

import pytest
import thunder
import torch

from fuzz_programs import _same

SYMBOLIC = "symbolic values"


def _updated(v):
    s = set()
    s.update(v)
    return sorted(s)


BUILTINS = {  # what the function computes from the numbers ``v``
    "len(set(v))": lambda x, v: x.new_zeros(len(set(v))),
    "sorted(set(v))": lambda x, v: sorted(set(v)),
    "list(set(v))": lambda x, v: list(set(v)),
    "len(frozenset(v))": lambda x, v: len(frozenset(v)),
    "dict.fromkeys(v)": lambda x, v: list(dict.fromkeys(v)),
    "{*v}": lambda x, v: sorted({*v}),
    "a set comprehension": lambda x, v: len({e for e in v}),
    "in a set": lambda x, v: 2 in set(v),
    "Counter(v)": lambda x, v: sorted(collections.Counter(v).items()),
    "a dict keyed by v": lambda x, v: sorted({e: i for i, e in enumerate(v)}.items()),
    "set(v) with a size": lambda x, v: sorted(set(v) | {x.shape[0]}),
    "s.update(v)": lambda x, v: _updated(v),
    "set().union(v)": lambda x, v: sorted(set().union(v)),
    "str(v)": lambda x, v: str(v),
    "an f-string": lambda x, v: f"<{v}>",
    "json.dumps(v)": lambda x, v: json.dumps(v),
    "% formatting": lambda x, v: "%s" % (v,),
    "hash(tuple(v))": lambda x, v: hash(tuple(v)),
    "v compared": lambda x, v: (v == [1, 2, 3], v == (1, 2, 3), v <= type(v)((1, 2, 3))),
}
KINDS = {  # how the numbers reach the function: (the argument made of them, ``v`` read from it)
    "a list": (list, lambda x, a: a),
    "a tuple": (lambda vals: tuple(list(vals)), lambda x, a: a),  # (a new object: not the constant)
    "a list in a list": (lambda vals: [list(vals)], lambda x, a: a[0]),
    "a list and a size": (list, lambda x, a: a + [x.shape[0]]),
}
VALUES = [(1, 2, 3), (1, 1, 3), (3, 2, 1), (1, 2, 3)]  # dedup and order change, then the first again


def _program(builtin: str, kind: str):
    compute, (_, read) = BUILTINS[builtin], KINDS[kind]
    return lambda x, a: compute(x, read(x, a))


def _misses(fn, x, args) -> int:
    """How many times ``fn``, jitted, compiles over the calls ``fn(x, a)``, for each ``a`` of ``args`` in turn."""
    jf = thunder.jit(fn, cache=SYMBOLIC)
    for a in args:
        jf(x, a)
    return thunder.cache_misses(jf)


def _after(fn, x, first, then):
    """``fn``, jitted, called on ``(x, first)`` and then on ``(x, then)``: that call's result, and eager's."""
    jf = thunder.jit(fn, cache=SYMBOLIC)
    jf(x, first)
    return jf(x, then), fn(x, then)


def _doubled_for_123(x, l):
    return x * 2 if l == [1, 2, 3] else x


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("builtin", BUILTINS)
def test_a_builtin_over_an_arguments_numbers_is_eagers_as_they_change(enabled, builtin, kind):
    fn, make = _program(builtin, kind), KINDS[kind][0]
    jf = thunder.jit(fn, cache=SYMBOLIC)
    x = torch.ones(3)
    wrong = [vals for vals in VALUES if not _same(fn(x, make(vals)), jf(x, make(vals)))]
    assert wrong == []


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("builtin", BUILTINS)
def test_a_fresh_equal_argument_reuses_the_entry(enabled, builtin, kind):
    fn, make = _program(builtin, kind), KINDS[kind][0]
    assert _misses(fn, torch.ones(3), (make((1, 2, 3)) for _ in range(2))) == 1


def test_the_set_of_a_list_argument_misses_where_its_duplicates_change(enabled):
    # the program: the entry made for [1, 2, 3] served [1, 1, 3]
    fn = lambda x, l: (x.new_zeros(len(set(l))), sorted(set(l)))  # noqa: E731
    assert _same(*_after(fn, torch.ones(2), [1, 2, 3], [1, 1, 3]))


def test_the_set_of_a_list_argument_is_checked_by_the_prologue(enabled):
    fn = lambda x, l: x.new_zeros(len(set(l)))  # noqa: E731
    assert _misses(fn, torch.ones(2), ([1, 2, 3], [1, 1, 3], [1, 2, 3])) == 2


def test_a_list_compared_is_guarded_by_relations(enabled):
    # [1, 2, 4] and [1, 2, 5] differ from [1, 2, 3] at the same element: one entry serves both
    assert _misses(_doubled_for_123, torch.ones(2), ([1, 2, 4], [1, 2, 5])) == 1


def test_a_list_compared_misses_where_the_comparison_changes(enabled):
    assert _same(*_after(_doubled_for_123, torch.ones(2), [1, 2, 4], [1, 2, 3]))


def test_a_list_whose_numbers_c_code_does_not_read_keeps_one_entry(enabled):
    # len, isinstance and id read no number: nothing is pinned
    fn = lambda x, l: x[: len(l)] * (2 if isinstance(l, list) else 3) + (id(l) > 0)  # noqa: E731
    assert _misses(fn, torch.ones(4), ([1, 2, 3], [4, 5, 6], [7, 7, 7])) == 1


def test_the_set_of_a_dicts_keys_does_not_pin_its_values(enabled):
    fn = lambda x, d: x * len(set(d)) + d["a"]  # noqa: E731
    assert _misses(fn, torch.ones(2), ({"a": v, "b": 0} for v in (1, 2, 3))) == 1


def test_a_list_of_tensors_and_numbers_gives_c_code_the_tensors(enabled):
    fn = lambda x, l: len(set(l)) + len(str(l[1:]))  # noqa: E731
    jf = thunder.jit(fn, cache=SYMBOLIC)
    x = torch.ones(2)
    assert jf(x, [x, 1, 1]) == fn(x, [x, 1, 1])
