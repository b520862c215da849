"""metatrace.interpret.calls.c_code.concrete_values: C code that renders or reads a container holding a size
gets the number, not its proxy, in every container kind C code walks itself, at any depth
(``str(slice(-n, None))`` was ``'slice(i2=-2, None, None)'``, found by tools/fuzz.py).
Generated: every container kind x every way C code renders one, against eager's text."""

from __future__ import annotations

import collections
import json
import types

import pytest
import torch

import thunder

SYMBOLIC = "symbolic values"
Pair = collections.namedtuple("Pair", "a b")

CONTAINERS = {  # n (a size) in a container of each kind
    "list": lambda n: [n, 1],
    "tuple": lambda n: (n, 1),
    "set": lambda n: {n},
    "frozenset": lambda n: frozenset({n}),
    "a dict's key": lambda n: {n: 1},
    "a dict's value": lambda n: {"k": n},
    "a slice": lambda n: slice(-n, None),
    "a namedtuple": lambda n: Pair(n, 2),
    "an OrderedDict": lambda n: collections.OrderedDict(k=n),
    "a defaultdict": lambda n: collections.defaultdict(int, {n: 1}),
    "a Counter": lambda n: collections.Counter({"k": n}),
    "a deque": lambda n: collections.deque([n], maxlen=3),
    "a SimpleNamespace": lambda n: types.SimpleNamespace(k=n),
    "three deep": lambda n: [{"k": (n,)}],
}
RENDERINGS = {
    "str": str,
    "repr": repr,
    "an f-string": lambda c: f"<{c}>",
    "format": lambda c: format(c, ""),
    "%": lambda c: "%s" % (c,),
}


@pytest.mark.parametrize("rendering", RENDERINGS)
@pytest.mark.parametrize("container", CONTAINERS)
def test_a_rendered_container_holding_a_size_is_eagers_text(enabled, container, rendering):
    make, render = CONTAINERS[container], RENDERINGS[rendering]
    fn = lambda x: render(make(x.shape[0]))  # noqa: E731
    jf = thunder.jit(fn, cache=SYMBOLIC)
    assert [jf(torch.ones(n)) for n in (2, 3, 2)] == [fn(torch.ones(n)) for n in (2, 3, 2)]


JSONABLE = ("list", "tuple", "a dict's value", "an OrderedDict", "a Counter", "three deep")


@pytest.mark.parametrize("container", JSONABLE)
def test_json_of_a_container_holding_a_size_is_eagers_text(enabled, container):
    make = CONTAINERS[container]
    fn = lambda x: json.dumps(make(x.shape[0]))  # noqa: E731
    jf = thunder.jit(fn, cache=SYMBOLIC)
    assert [jf(torch.ones(n)) for n in (2, 3)] == [fn(torch.ones(n)) for n in (2, 3)]


def test_a_rendered_size_is_checked_by_the_prologue(enabled):
    fn = lambda x: str(slice(-x.shape[0], None))  # noqa: E731
    jf = thunder.jit(fn, cache=SYMBOLIC)
    for n in (2, 3, 2):
        jf(torch.ones(n))
    assert thunder.cache_misses(jf) == 2
