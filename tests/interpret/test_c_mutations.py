"""C code that changes a container it is given (metatrace.interpret.calls.c_code.container_writes), and stores of
iterators the trace made (metatrace.mutations.record): eager's results and state on every call,
or a clear error naming the C function."""

from __future__ import annotations

import bisect
import collections
import copy
import heapq
import operator

import pytest
import torch
import thunder

import metatrace
from metatrace.interpret.calls.c_code.container_writes import PYTHON_VERSIONS, CMutationError

pytestmark = pytest.mark.metatrace_sentinel

SIZES = (3, 7, 1, 4)

LIST_FUNCTIONS = {
    "heappush": lambda h, n: heapq.heappush(h, n),
    "heappop": lambda h, n: heapq.heappop(h) if h else None,
    "heappushpop": lambda h, n: heapq.heappushpop(h, n),
    "heapreplace": lambda h, n: heapq.heapreplace(h, n) if h else None,
    "heapify": lambda h, n: (h.append(n), heapq.heapify(h)),
    "insort": lambda h, n: bisect.insort(h, n),
    "insort_left with key": lambda h, n: bisect.insort_left(h, n, key=lambda v: v),
    "bisect": lambda h, n: h.insert(bisect.bisect(h, n), n),
}


def _body(op):
    def body(x, h):
        op(h, x.shape[0])
        return x * (h[0] if h else 1)

    return body


@pytest.mark.parametrize("name", LIST_FUNCTIONS)
def test_heapq_and_bisect_on_a_list_argument_follow_eager(enabled, name):
    body = _body(LIST_FUNCTIONS[name])
    jf = thunder.jit(body, cache="symbolic values")
    mine, theirs = [5, 9], [5, 9]
    for n in SIZES:
        x = torch.ones(n)
        torch.testing.assert_close(jf(x, mine), body(x, theirs))
        assert mine == theirs


def test_heapq_on_a_list_the_trace_made_follows_eager(enabled):
    def fn(x):
        h = []
        for d in x.shape:
            heapq.heappush(h, -d)
        return x * -heapq.heappop(h)

    jf = thunder.jit(fn, cache="symbolic values")
    for shape in ((2, 5), (4, 3)):
        x = torch.ones(shape)
        torch.testing.assert_close(jf(x), fn(x))


def test_every_accelerated_heapq_and_bisect_function_has_its_python_version():
    accelerated = {f for m in (heapq, bisect) for f in vars(m).values() if callable(f) and type(f).__name__ ==
                   "builtin_function_or_method"}
    assert accelerated <= set(PYTHON_VERSIONS)


def test_c_code_changing_a_dict_argument_raises_naming_it(enabled):
    def fn(x, counts):
        operator.methodcaller("setdefault", "a", 1)(counts)
        return x * 2

    with pytest.raises(CMutationError, match="methodcaller"):
        thunder.jit(fn, cache="symbolic values")(torch.ones(2), {})


def test_a_counter_of_a_list_argument_follows_eager(enabled):
    # collections' C tally filled the Counter unseen (thunder's KeyError); its Python version runs
    def fn(x, l):
        counts = collections.Counter(l)
        return x.new_zeros(len(counts)), counts[1]

    jf = thunder.jit(fn, cache="symbolic values")
    x = torch.ones(2)
    for l in ([1, 2, 3], [1, 1, 3]):
        expected, got = fn(x, l), jf(x, l)
        torch.testing.assert_close(got[0], expected[0])
        assert got[1] == expected[1]


def test_counters_tally_runs_as_python():
    from _collections import _count_elements

    assert _count_elements in PYTHON_VERSIONS


def test_the_error_is_a_metatrace_error():
    assert issubclass(CMutationError, metatrace.MetatraceError)


ITERATOR_STORES = {
    "dict.update(zip)": ({}, lambda d, n: d.update(zip(["rows", "half"], [n, n // 2]))),
    "list.extend(generator)": ([0], lambda l, n: l.extend(i * n for i in range(2))),
    "list += map": ([0], lambda l, n: l.__iadd__(map(lambda v: v + n, [1, 2]))),
    "set.update(map)": (set(), lambda s, n: s.update(map(str, [n, 1]))),
}


@pytest.mark.parametrize("name", ITERATOR_STORES)
def test_a_store_of_an_iterator_the_trace_made_is_replayed(enabled, name):
    initial, op = ITERATOR_STORES[name]

    def fn(x, target):
        op(target, x.shape[0])
        return x + 1

    jf = thunder.jit(fn, cache="symbolic values")
    mine, theirs = copy.deepcopy(initial), copy.deepcopy(initial)
    for n in SIZES:
        x = torch.ones(n)
        torch.testing.assert_close(jf(x, mine), fn(x, theirs))
        assert mine == theirs


def test_building_a_container_from_a_list_argument_follows_eager(enabled):
    def fn(x, names):
        return x * len(set(names)) + len(list(names)) + len(dict(zip(names, names)))

    jf = thunder.jit(fn, cache="symbolic values")
    for names in (["a", "b", "a"], ["a", "b", "c", "d"]):
        torch.testing.assert_close(jf(torch.ones(2), names), fn(torch.ones(2), names))
