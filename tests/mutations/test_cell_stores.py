"""Rebinding a closure variable that existed before the call (``nonlocal v; v = ...``), over
four calls (compile, a hit, new shapes): the result and the variable equal eager's after each
call, no proxy is left in the cell, and the entry is reused where only sizes changed.

The matrix is generated: what is stored (a constant step, a size, a running sum of sizes, a
float, a tensor, a string built from a size, a new container, a deletion) crossed with whose
cell it is (the jitted function's own, a helper function's the jitted function calls, the cell
of a function held by the jitted module).
"""

from __future__ import annotations

import pytest
import torch
import thunder

from metatrace.testing import assert_no_proxies_after

pytestmark = pytest.mark.metatrace_sentinel

SHAPES = ((2, 3), (2, 3), (4, 3), (5, 3))  # compile, hit, new shapes
START = {"int": 0, "float": 1.0, "tensor": None, "str": "", "list": None, "absent": 7}

# name -> (the kind of the starting value, the statement's right-hand side as a function of
# (the old value, a size n, a tensor x); DELETE for ``del v``)
DELETE = object()
STORES = {
    "constant step": ("int", lambda v, n, x: v + 1),
    "size": ("int", lambda v, n, x: n),
    "running sum of sizes": ("int", lambda v, n, x: v + n),
    "float decay": ("float", lambda v, n, x: v * 0.5),
    "tensor": ("tensor", lambda v, n, x: x.sum(0) * 2),
    "string of a size": ("str", lambda v, n, x: v + str(n)),
    "new list": ("list", lambda v, n, x: [n, "k"]),
    "delete": ("absent", DELETE),
}
# compiles for the four calls: the value a later call's trace reads decides whether it can be shared
COMPILES = {"tensor": 2, "str": 4, "list": 2}


def _cell_function(store):
    """A function with one free variable ``v``, which it rebinds with ``store``."""
    v = None

    def step(x):
        nonlocal v
        if store is DELETE:
            del v
            return x * 2
        v = store(v, x.shape[0], x)
        return x * 2

    return step


def _own(store):
    fn = _cell_function(store)  # (the jitted function is the one whose cell it rebinds)
    return fn, fn


def _helper(store):
    step = _cell_function(store)

    def fn(x):
        return step(x) + 1

    return fn, step


class Holder(torch.nn.Module):
    def __init__(self, step):
        super().__init__()
        self.step = step

    def forward(self, x):
        return self.step(x) - 1


def _module(store):
    step = _cell_function(store)
    return Holder(step), step


OWNERS = {"own": _own, "helper": _helper, "module": _module}


def _cell(owner_fn):
    return owner_fn.__closure__[owner_fn.__code__.co_freevars.index("v")]


def _contents(cell):
    try:
        value = cell.cell_contents
    except ValueError:
        return ("empty",)
    return value.clone() if isinstance(value, torch.Tensor) else list(value) if isinstance(value, list) else value


def _run(name, owner, *, jit: bool):
    kind, store = STORES[name]
    fn, holder = OWNERS[owner](store)
    cell = _cell(holder)
    cell.cell_contents = START[kind]
    call = thunder.jit(fn, cache="symbolic values") if jit else fn
    outcomes = []
    for shape in SHAPES:
        x = torch.arange(shape[0] * shape[1], dtype=torch.float32).reshape(shape)
        try:
            result = call(x)
        except Exception as e:  # eager's error (``del v`` of an empty cell) is part of its behaviour
            result = ("raised", type(e).__name__)
        if jit:
            assert_no_proxies_after(fn, (x,))
        outcomes.append((result, _contents(cell)))
    return outcomes, call


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(p, q) for p, q in zip(a, b))
    return type(a) is type(b) and a == b


CASES = [pytest.param(name, owner, id=f"{name}-{owner}") for name in STORES for owner in OWNERS]


@pytest.mark.parametrize("name, owner", CASES)
def test_cell_store_matches_eager(enabled, name, owner):
    eager, _ = _run(name, owner, jit=False)
    jitted, _ = _run(name, owner, jit=True)
    for call, ((want, want_cell), (got, got_cell)) in enumerate(zip(eager, jitted)):
        assert _same(got, want), f"call {call}: returned {got!r}, eager {want!r}"
        assert _same(got_cell, want_cell), f"call {call}: v is {got_cell!r}, eager {want_cell!r}"


@pytest.mark.parametrize("name", [n for n, (kind, store) in STORES.items() if store is not DELETE])
def test_cell_store_compiles_once_where_only_sizes_change(enabled, name):
    kind = STORES[name][0]
    _, jitted = _run(name, "own", jit=True)
    assert thunder.cache_misses(jitted) == COMPILES.get(kind, 1)


def test_a_cell_the_call_creates_is_left_to_the_trace(enabled):
    def fn(x):
        total = 0

        def add(n):
            nonlocal total
            total += n

        for n in x.shape:
            add(n)
        return x * total

    jf = thunder.jit(fn, cache="symbolic values")
    for shape in ((2, 3), (4, 5)):
        x = torch.ones(shape)
        torch.testing.assert_close(jf(x), fn(x))
    assert thunder.cache_misses(jf) == 1


# ---------------------------------------------------------------------------------------------
# Mutable defaults (``def f(x, seen=[])``): thunder binds defaults as constants, so a mutation
# of one was neither undone nor replayed (its proxy stayed in the list)
# ---------------------------------------------------------------------------------------------

DEFAULT_MUTATIONS = {
    "list append": (list, lambda d, n: d.append(n)),
    "dict store": (dict, lambda d, n: d.__setitem__(n, n * 2)),
    "set add": (set, lambda d, n: d.add(n)),
    "object attribute": (lambda: __import__("types").SimpleNamespace(total=0),
                         lambda d, n: setattr(d, "total", d.total + n)),
}


def _with_default(make, mutate, where):
    """A function whose default (positional, or keyword-only) ``make()`` it mutates; ``where``:
    the jitted function's own default, or a helper's it calls."""
    if where == "keyword-only":
        def helper(n, *, seen=make()):
            mutate(seen, n)
            return seen

        def fn(x):
            return x * len(str(helper(x.shape[0])))
        return fn, lambda: helper.__kwdefaults__["seen"]

    def own(x, seen=make()):
        mutate(seen, x.shape[0])
        return x * len(str(seen))

    if where == "own":
        return own, lambda: own.__defaults__[0]

    def helper(n, seen=make()):
        mutate(seen, n)
        return seen

    def fn(x):
        return x * len(str(helper(x.shape[0])))
    return fn, lambda: helper.__defaults__[0]


def _state(v):
    return vars(v).copy() if hasattr(v, "__dict__") else type(v)(v)


@pytest.mark.parametrize("where", ["own", "helper", "keyword-only"])
@pytest.mark.parametrize("name", DEFAULT_MUTATIONS)
def test_a_mutated_default_matches_eager(enabled, name, where):
    make, mutate = DEFAULT_MUTATIONS[name]
    eager_fn, eager_default = _with_default(make, mutate, where)
    fn, default = _with_default(make, mutate, where)
    jf = thunder.jit(fn, cache="symbolic values")
    for rows in (2, 3, 2):
        x = torch.ones(rows, 2)
        torch.testing.assert_close(jf(x), eager_fn(x))
        assert_no_proxies_after(fn, (x,))
        assert _state(default()) == _state(eager_default())
