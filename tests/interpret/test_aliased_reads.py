"""metatrace.interpret.reads.aliases: one object read through two paths of the user's state.

thunder's interpreter keeps one wrapper per object, carrying its first read's provenance: a global
``G`` that is the same object as the argument ``a`` was read as ``a``, its own path never checked,
and rebinding ``G`` reused the entry (a wrong result; found by tools/fuzz.py's two-process mode).
Generated: every kind of value (a function, an object whose attribute the trace reads, a list,
a string, a number, a dtype, an enum member) x every kind of second path (a global, a closure
cell, a module attribute, a class attribute) x (rebound after the first call: eager's result and
a second compile; left alone: one compile for both calls).
"""

from __future__ import annotations

import enum

import pytest
import torch

import thunder

SYMBOLIC = "symbolic values"


class Cfg:
    def __init__(self, n):
        self.n = n


class Kind(enum.Enum):
    DOUBLE = 2
    TRIPLE = 3


# value kind -> (the value both paths lead to, the value the second path is rebound to, how the
# function uses a value of the kind on x)
VALUES = {
    "function": (torch.relu, torch.neg, "{v}(x)"),
    "object": (Cfg(2), Cfg(5), "x * {v}.n"),
    "list": ([2], [5], "x * {v}[0]"),
    "string": ("a", "b", "x * (2 if {v} == 'a' else 3)"),
    "number": (2, 5, "x * {v}"),
    "dtype": (torch.float32, torch.float64, "x.to({v}) * 1"),
    "enum member": (Kind.DOUBLE, Kind.TRIPLE, "x * {v}.value"),
}

# second path -> (source of a function reading the argument ``a`` and the second path, how to
# make it, how to rebind the second path)
PATHS = ("global", "closure cell", "module attribute", "class attribute")


def _build(path: str, use: str, value):
    """(the function or module to jit, the eager callable, rebind(new value))."""
    first, second = use.format(v="a"), use.format(v="G")
    ns = {"torch": torch, "G": value}
    if path == "global":
        exec(f"def f(x, a):\n    return {first} + {second}\n", ns)
        return ns["f"], ns["f"], lambda new: ns.__setitem__("G", new)
    if path == "closure cell":
        exec(f"def make(G):\n    def f(x, a):\n        return {first} + {second}\n    return f\n", ns)
        f = ns["make"](value)
        cell = f.__closure__[0]
        return f, f, lambda new: setattr(cell, "cell_contents", new)
    second = use.format(v="self.G")
    exec(f"class M(torch.nn.Module):\n    def forward(self, x, a):\n        return {first} + {second}\n", ns)
    m = ns["M"]()
    if path == "module attribute":
        object.__setattr__(m, "G", value)
        return m, m, lambda new: object.__setattr__(m, "G", new)
    ns["M"].G = value
    return m, m, lambda new: setattr(ns["M"], "G", new)


CELLS = [(kind, path) for kind in VALUES for path in PATHS]


def _run(kind: str, path: str, rebind: bool):
    value, other, use = VALUES[kind]
    fn, eager, rebind_to = _build(path, use, value)
    jitted = thunder.jit(fn, cache=SYMBOLIC)
    x = torch.arange(3.0) - 1
    first = jitted(x, value)
    if rebind:
        rebind_to(other)
    return first, jitted(x, value), eager(x, value), thunder.cache_misses(jitted)


@pytest.mark.parametrize("kind,path", CELLS, ids=[f"{k}-{p}" for k, p in CELLS])
def test_rebinding_the_second_path_gives_eagers_result(enabled, kind, path):
    _, got, want, _ = _run(kind, path, rebind=True)
    torch.testing.assert_close(got, want)


# (a number is a symbolic input of the entry: another value reuses it, correctly)
PINNED = [(kind, path) for kind, path in CELLS if kind != "number"]


@pytest.mark.parametrize("kind,path", PINNED, ids=[f"{k}-{p}" for k, p in PINNED])
def test_rebinding_the_second_path_compiles_again(enabled, kind, path):
    *_, compiles = _run(kind, path, rebind=True)
    assert compiles == 2


@pytest.mark.parametrize("kind,path", CELLS, ids=[f"{k}-{p}" for k, p in CELLS])
def test_the_same_object_through_both_paths_compiles_once(enabled, kind, path):
    *_, compiles = _run(kind, path, rebind=False)
    assert compiles == 1
