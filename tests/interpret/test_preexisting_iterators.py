"""metatrace.interpret.calls.unrepeatable_calls: an iterator that existed before the call, advanced by C
code in traced code, raises PreexistingIteratorError naming the line (thunder ran the C
``__next__`` once while tracing and every later call reused the items it read, while the iterator
stayed where tracing left it: silently wrong, stock thunder too). Generated: every kind of C
iterator x every way of advancing it x every place it can come from (an argument's is checked as an
argument, and follows eager). An iterator created inside
the function, one only passed to ``iter``, and one whose ``__next__`` is Python code (its stores
are replayed) keep eager's results."""

from __future__ import annotations

import itertools

import pytest
import torch

import thunder

from metatrace.interpret.calls.unrepeatable_calls import PreexistingIteratorError

SYMBOLIC = "symbolic values"


def _generator():
    i = 0
    while True:
        yield i
        i += 1


ITERATORS = {  # each makes a fresh iterator with at least 2 items
    "itertools.count": lambda: itertools.count(1),
    "itertools.cycle": lambda: itertools.cycle([1, 2, 3]),
    "a list's iterator": lambda: iter([1, 2, 3]),
    "a range's iterator": lambda: iter(range(1, 9)),
    "map": lambda: map(int, [1, 2, 3]),
    "zip": lambda: zip([1, 2, 3], [4, 5, 6]),
    "enumerate": lambda: enumerate([1, 2, 3]),
    "reversed": lambda: reversed([1, 2, 3]),
    "a generator": _generator,
    "itertools.islice": lambda: itertools.islice(itertools.count(1), 9),
}
ADVANCES = {  # how the traced code reads one item: (it) -> a number
    "next(it)": lambda it: next(it),
    "it.__next__()": lambda it: it.__next__(),
    "next(it, 0)": lambda it: next(it, 0),
    "a for loop": lambda it: [v for v, _ in zip(it, range(1))],
    "list(islice(it, 1))": lambda it: list(itertools.islice(it, 1)),
    "a for statement": lambda it: _first_in_for(it),
}


def _first_in_for(it):
    for v in it:
        return v


def _as_number(item) -> float:
    while isinstance(item, (list, tuple)):
        item = item[0]
    return float(item)


class Holder(torch.nn.Module):
    def __init__(self, it):
        super().__init__()
        self.it = it
        self.advance = None

    def forward(self, x):
        return x * _as_number(self.advance(self.it))


def _jitted(owner: str, it, advance):
    """The function reading one item of ``it``, held by ``owner``, jitted; and its call's arguments."""
    if owner == "a closure":
        return thunder.jit(lambda x: x * _as_number(advance(it)), cache=SYMBOLIC), ()
    if owner == "a global":
        globals()["_GLOBAL_ITERATOR"] = it
        return thunder.jit(lambda x: x * _as_number(advance(_GLOBAL_ITERATOR)), cache=SYMBOLIC), ()
    if owner == "a module attribute":
        module = Holder(it)
        module.advance = advance
        return thunder.jit(module, cache=SYMBOLIC), ()
    return thunder.jit(lambda x, i: x * _as_number(advance(i)), cache=SYMBOLIC), (it,)


OWNERS = ("a closure", "a global", "a module attribute")


def _error_of(fn, *args) -> BaseException | None:
    try:
        fn(*args)
    except Exception as error:  # (thunder's interpreter wraps it: the cause is metatrace's)
        return error if isinstance(error, PreexistingIteratorError) else error.__cause__
    return None


@pytest.mark.parametrize("owner", OWNERS)
@pytest.mark.parametrize("advance", ADVANCES)
@pytest.mark.parametrize("kind", ITERATORS)
def test_advancing_a_preexisting_iterator_raises(enabled, kind, advance, owner):
    jf, extra = _jitted(owner, ITERATORS[kind](), ADVANCES[advance])
    assert isinstance(_error_of(jf, torch.ones(2), *extra), PreexistingIteratorError)


_COUNTER = itertools.count()


def _reads_the_counter(x):
    return x * next(_COUNTER)


@pytest.mark.parametrize("advance", ADVANCES)
@pytest.mark.parametrize("kind", ITERATORS)
def test_an_iterator_argument_follows_eager(enabled, kind, advance):
    """An argument is checked by its kind: the same iterator never matches again, so each call
    compiles anew (tests/guards/test_argument_kinds.py) and reads the next item, as eager."""
    jf, _ = _jitted("an argument", None, ADVANCES[advance])
    fn = lambda x, i: x * _as_number(ADVANCES[advance](i))  # noqa: E731
    mine, theirs = ITERATORS[kind](), ITERATORS[kind]()
    assert [torch.equal(jf(torch.ones(2), mine), fn(torch.ones(2), theirs)) for _ in range(2)] == [True, True]


def test_the_error_names_the_iterator(enabled):
    assert "count iterator count(0)" in str(_error_of(thunder.jit(_reads_the_counter, cache=SYMBOLIC), torch.ones(2)))


def test_the_error_names_the_users_line(enabled):
    line = _reads_the_counter.__code__.co_firstlineno + 1
    text = str(_error_of(thunder.jit(_reads_the_counter, cache=SYMBOLIC), torch.ones(2)))
    assert f"test_preexisting_iterators.py:{line}" in text


@pytest.mark.parametrize("kind", ITERATORS)
def test_an_iterator_created_inside_the_function_keeps_one_entry_over_sizes(enabled, kind):
    make = ITERATORS[kind]
    fn = lambda x: x * _as_number(next(make()))  # noqa: E731
    jf = thunder.jit(fn, cache=SYMBOLIC)
    for n in (2, 3, 5):
        torch.testing.assert_close(jf(torch.ones(n)), fn(torch.ones(n)))
    assert thunder.cache_misses(jf) == 1


def test_an_iterator_only_passed_to_iter_is_allowed(enabled):
    it = itertools.count()
    jf = thunder.jit(lambda x: x * 2 if iter(it) is it else x, cache=SYMBOLIC)
    torch.testing.assert_close(jf(torch.ones(2)), torch.full((2,), 2.0))


class PythonCounter:
    """An iterator whose ``__next__`` is Python code: interpreted, its store replayed."""

    def __init__(self):
        self.i = 0

    def __iter__(self):
        return self

    def __next__(self):
        self.i += 1
        return self.i


def test_a_python_iterator_advances_on_every_call_as_in_eager(enabled):
    eager_it, jitted_it = PythonCounter(), PythonCounter()
    jf = thunder.jit(lambda x: x * next(jitted_it), cache=SYMBOLIC)
    results = [torch.equal(jf(torch.ones(n)), torch.ones(n) * next(eager_it)) for n in (2, 2, 3, 3)]
    assert results == [True] * 4


def test_a_python_iterator_keeps_one_entry(enabled):
    it = PythonCounter()
    jf = thunder.jit(lambda x: x * next(it), cache=SYMBOLIC)
    for n in (2, 2, 3, 3):
        jf(torch.ones(n))
    assert thunder.cache_misses(jf) == 1
