"""Every mutating operation on objects that existed before the call, over three calls (compile,
a hit with a fresh but equal state, a new shape): the result and the mutated state equal eager's
after each call, and no thunder proxy is left behind (issue 36 b).

The matrix is generated: every list, dict and set method that mutates, the attribute stores,
crossed with where the object lives (an argument, inside an argument, a global, a closure cell,
a module attribute) and with what is stored (a size, a tensor, a container built in the call).
"""

from __future__ import annotations

import copy
import dataclasses
import operator
import types

import pytest
import torch
import thunder

import metatrace
from metatrace.testing import assert_no_proxies_after

# besides the explicit checks below: the plugin's sentinel after every jitted call (tests/conftest.py loads it)
pytestmark = pytest.mark.metatrace_sentinel

X_SHAPES = ((2, 3), (2, 3), (4, 3))  # compile, hit, new shape


# ---------------------------------------------------------------------------------------------
# What is mutated: bodies (target, n, t) -> a value the function returns; n is a size, t a tensor
# ---------------------------------------------------------------------------------------------

LIST_OPS = {
    "append size": lambda l, n, t: l.append(n),
    "append tensor": lambda l, n, t: l.append(t.sum(0)),
    "append new list": lambda l, n, t: l.append([n, "k", (n, None)]),
    "extend": lambda l, n, t: l.extend([n, n + 1]),
    "insert": lambda l, n, t: l.insert(1, n),
    "insert past the end": lambda l, n, t: l.insert(99, n),
    "pop": lambda l, n, t: l.pop(),
    "pop 0": lambda l, n, t: l.pop(0),
    "remove": lambda l, n, t: l.remove(l[-1]),
    "clear": lambda l, n, t: l.clear(),
    "sort": lambda l, n, t: l.sort(),
    "sort key reverse": lambda l, n, t: l.sort(key=lambda v: -v, reverse=True),
    "reverse": lambda l, n, t: l.reverse(),
    "store item": lambda l, n, t: operator.setitem(l, 0, n),
    "store slice": lambda l, n, t: operator.setitem(l, slice(1, None), [n, n]),
    "delete item": lambda l, n, t: operator.delitem(l, 0),
    "+=": lambda l, n, t: operator.iadd(l, [n]),
    "*=": lambda l, n, t: operator.imul(l, 2),
}
DICT_OPS = {
    "store new key": lambda d, n, t: operator.setitem(d, "n", n),
    "store existing key": lambda d, n, t: operator.setitem(d, "a", n),
    "store tensor": lambda d, n, t: operator.setitem(d, "t", t * 2),
    "store new dict": lambda d, n, t: operator.setitem(d, "sub", {"n": n, "l": [n]}),
    "delete key": lambda d, n, t: operator.delitem(d, "a"),
    "pop": lambda d, n, t: d.pop("a"),
    "pop default": lambda d, n, t: d.pop("zz", n),
    "popitem": lambda d, n, t: d.popitem(),
    "setdefault new": lambda d, n, t: d.setdefault("z", n),
    "setdefault existing": lambda d, n, t: d.setdefault("a", n),
    "update": lambda d, n, t: d.update(z=n, a=n + 1),
    "clear": lambda d, n, t: d.clear(),
    "|=": lambda d, n, t: operator.ior(d, {"q": n}),
}
SET_OPS = {
    "add": lambda s, n, t: s.add(n),
    "discard": lambda s, n, t: s.discard(1),
    "remove": lambda s, n, t: s.remove(1),
    "update": lambda s, n, t: s.update([n, 7]),
    "clear": lambda s, n, t: s.clear(),
    "-=": lambda s, n, t: operator.isub(s, {1}),
}
ATTRIBUTE_OPS = {
    "store size": lambda o, n, t: setattr(o, "last", n),
    "add to counter": lambda o, n, t: setattr(o, "count", o.count + n),
    "store tensor": lambda o, n, t: setattr(o, "t", t.detach() * 2),
    "store new tuple": lambda o, n, t: setattr(o, "pair", (n, "s")),
    "delete": lambda o, n, t: delattr(o, "count"),
    "object.__setattr__": lambda o, n, t: object.__setattr__(o, "last", n),
    "append to an attribute": lambda o, n, t: o.items.append(n),
    # a list made by ``list + list``: thunder leaves its items unwrapped (a replayed None before)
    "store a concatenated list": lambda o, n, t: setattr(o, "items", o.items[-2:] + [n, n + 1]),
}


class Plain:
    def __init__(self):
        self.count, self.items = 1, [2]


@dataclasses.dataclass
class Data:
    count: int = 1
    items: list = dataclasses.field(default_factory=lambda: [2])


class Slotted:
    __slots__ = ("count", "items", "last", "t", "pair")

    def __init__(self):
        self.count, self.items = 1, [2]


def _states(kind: str) -> list:
    """The target's state before each of the three calls: equal for the first two (a hit)."""
    if kind == "list":
        return [[3, 1, 2], [3, 1, 2], [5, 1, 4, 1]]
    if kind == "dict":
        return [{"a": 1, "b": 2}, {"a": 1, "b": 2}, {"a": 5, "c": 6}]
    if kind == "set":
        return [{1, 2}, {1, 2}, {1, 3}]
    factory = {"namespace": lambda: types.SimpleNamespace(count=1, items=[2]), "plain": Plain, "dataclass": Data,
               "slotted": Slotted}[kind]
    return [factory(), factory(), factory()]


def _body(op):
    def body(x, target):
        r = op(target, x.shape[0], x)
        return x * 2, r

    return body


# ---------------------------------------------------------------------------------------------
# Where the object lives: each place gives a function and a way to put the call's state there
# ---------------------------------------------------------------------------------------------

GLOBAL_TARGET = None


def _as_argument(body):
    return (lambda x, target: body(x, target)), lambda fn, state: (state,), lambda fn, args: args[0]


def _inside_an_argument(body):
    return ((lambda x, box: body(x, box["inner"])), lambda fn, state: ({"inner": state},),
            lambda fn, args: args[0]["inner"])


def _as_global(body):
    def fn(x):
        return body(x, GLOBAL_TARGET)

    def put(fn, state):
        global GLOBAL_TARGET
        GLOBAL_TARGET = state
        return ()

    return fn, put, lambda fn, args: GLOBAL_TARGET


def _in_a_closure(body):
    target = None

    def fn(x):
        return body(x, target)

    cell = fn.__closure__[fn.__code__.co_freevars.index("target")]

    def put(fn, state):
        cell.cell_contents = state
        return ()

    return fn, put, lambda fn, args: cell.cell_contents


class Holder(torch.nn.Module):
    def __init__(self, body):
        super().__init__()
        self.body, self.state = body, None

    def forward(self, x):
        return self.body(x, self.state)


def _module_attribute(body):
    module = Holder(body)

    def put(fn, state):
        module.state = state
        return ()

    return module, put, lambda fn, args: module.state


PLACES = {"argument": _as_argument, "inside an argument": _inside_an_argument, "global": _as_global,
          "closure": _in_a_closure, "module attribute": _module_attribute}


def _cases():
    kinds = (("list", LIST_OPS), ("dict", DICT_OPS), ("set", SET_OPS))
    for kind, ops in kinds:
        for name, op in ops.items():
            yield pytest.param(kind, op, "argument", id=f"{kind}.{name}-argument")
    for kind in ("namespace", "plain", "dataclass", "slotted"):
        for name, op in ATTRIBUTE_OPS.items():
            if kind == "slotted" and name == "object.__setattr__":
                continue  # (a slot: the same store as setattr)
            yield pytest.param(kind, op, "argument", id=f"{kind}.{name}-argument")
    # every place, for a sample of each kind's operations
    sample = (("list", "append size"), ("list", "pop"), ("list", "sort"), ("dict", "store tensor"),
              ("dict", "pop default"), ("namespace", "add to counter"), ("plain", "store tensor"))
    for place in PLACES:
        if place == "argument":
            continue
        for kind, name in sample:
            op = {"list": LIST_OPS, "dict": DICT_OPS}.get(kind, ATTRIBUTE_OPS)[name]
            yield pytest.param(kind, op, place, id=f"{kind}.{name}-{place}")


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
                and torch.allclose(a, b))
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (set, frozenset)):
        return a == b
    if hasattr(a, "__dict__") or hasattr(type(a), "__slots__"):
        return _same(_attributes(a), _attributes(b))
    return a == b


def _attributes(o) -> dict:
    names = list(getattr(o, "__dict__", {})) + [s for s in getattr(type(o), "__slots__", ()) if hasattr(o, s)]
    return {n: getattr(o, n) for n in sorted(set(names)) if n not in ("body", "training") and not n.startswith("_")}


def _run(kind, op, place, *, jit: bool, calls: int = 3):
    """The first ``calls`` calls; per call: the result (or the error's type) and the state after it."""
    fn, put, state_of = PLACES[place](_body(op))
    call = thunder.jit(fn, cache="symbolic values") if jit else fn
    outcomes = []
    for shape, state in list(zip(X_SHAPES, _states(kind)))[:calls]:
        args = put(fn, copy.deepcopy(state))
        x = torch.arange(shape[0] * shape[1], dtype=torch.float32).reshape(shape)
        try:
            result = call(x, *args)
        except Exception as e:  # eager's error is part of its behaviour
            result = ("raised", type(e).__name__)
        if jit:
            assert_no_proxies_after(fn, (x, *args))
        outcomes.append((result, copy.copy(state_of(fn, args))))
    return outcomes, call


@pytest.mark.parametrize("kind, op, place", list(_cases()))
def test_mutation_matches_eager(enabled, kind, op, place):
    eager, _ = _run(kind, op, place, jit=False)
    jitted, _ = _run(kind, op, place, jit=True)
    for call, (want, got) in enumerate(zip(eager, jitted)):
        assert _same(got[0], want[0]), f"call {call}: returned {got[0]!r}, eager {want[0]!r}"
        assert _same(got[1], want[1]), f"call {call}: state {got[1]!r}, eager {want[1]!r}"


@pytest.mark.parametrize("kind, name", [("list", "append size"), ("dict", "store tensor"),
                                        ("namespace", "store size"), ("plain", "append to an attribute")])
def test_a_fresh_equal_state_reuses_the_entry(enabled, kind, name):
    op = {"list": LIST_OPS, "dict": DICT_OPS}.get(kind, ATTRIBUTE_OPS)[name]
    _, jitted = _run(kind, op, "argument", jit=True, calls=2)
    assert thunder.cache_misses(jitted) == 1  # the second call's state is a fresh object, equal to the first


def test_a_module_counter_and_stashed_activation_match_eager(enabled):
    class Counting(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin, self.count = torch.nn.Linear(3, 3), 0

        def forward(self, x):
            self.count += x.shape[0]
            self.last_len = x.shape[0]
            y = self.lin(x)
            self.act = y.detach()
            return y

    eager = Counting()
    jitted = copy.deepcopy(eager)
    jm = thunder.jit(jitted, cache="symbolic values")
    for rows in (2, 3, 2):
        x = torch.randn(rows, 3)
        torch.testing.assert_close(jm(x), eager(x))
        assert (jitted.count, jitted.last_len) == (eager.count, eager.last_len)
        torch.testing.assert_close(jitted.act, eager.act)


def test_a_per_length_cache_on_the_module_matches_eager(enabled):
    class Masks(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.cache = {}

        def forward(self, x):
            T = x.shape[0]
            if T not in self.cache:
                self.cache[T] = torch.tril(torch.ones(T, T))
            return self.cache[T] @ x

    eager = Masks()
    jitted = Masks()
    jm = thunder.jit(jitted, cache="symbolic values")
    for rows in (2, 3, 2, 4):
        x = torch.randn(rows, 3)
        torch.testing.assert_close(jm(x), eager(x))
    assert sorted(jitted.cache) == sorted(eager.cache)


class Created:
    pass


class SlottedChild:
    __slots__ = ("n",)


def test_storing_an_object_created_in_the_call_stores_a_new_one_each_call(enabled):
    def fn(x, cfg):
        cfg.child = Created()
        cfg.child.rows = x.shape[0]
        cfg.child.scaled = x * 2
        return x + 1

    jf = thunder.jit(fn, cache="symbolic values")
    cfg = types.SimpleNamespace()
    children = []
    for rows in (2, 3, 2):
        x = torch.randn(rows, 3)
        jf(x, cfg)
        children.append(cfg.child)
        assert type(cfg.child) is Created
        assert cfg.child.rows == rows
        torch.testing.assert_close(cfg.child.scaled, x * 2)
    assert len({id(c) for c in children}) == 3


def test_storing_an_object_that_cannot_be_rebuilt_raises_naming_it(enabled):
    def fn(x, cfg):
        cfg.child = SlottedChild()
        return x * 2

    with pytest.raises(metatrace.MetatraceError, match=r"SlottedChild .*test_mutations\.py:\d+"):
        thunder.jit(fn, cache="symbolic values")(torch.ones(2), types.SimpleNamespace())


def test_a_failed_trace_leaves_no_proxy_behind(enabled):
    def fn(x, acc):
        acc.append(x.shape[0])
        raise KeyError("after the store")

    acc = []
    with pytest.raises(KeyError, match="after the store"):
        thunder.jit(fn, cache="symbolic values")(torch.ones(2), acc)
    assert acc == [2]  # eager's: the append before the raise (tests/mutations/test_raising_calls.py), no proxy


@pytest.mark.parametrize("kind", ["namespace", "plain", "dataclass", "slotted"])
@pytest.mark.parametrize("store", ["setattr", "object.__setattr__"])
def test_a_store_after_appending_to_an_attribute_matches_eager(enabled, kind, store):
    """Two replayed targets where one is read from the other (``cfg.items`` and ``cfg``): thunder
    unpacked the inner one first and failed on the outer's stale proxy (found by the fuzzer)."""
    set_last = setattr if store == "setattr" else object.__setattr__

    def fn(x, cfg):
        cfg.items.append(x.shape[0])
        set_last(cfg, "last", x.shape[1])
        return x * cfg.count

    jf = thunder.jit(fn, cache="symbolic values")
    for (rows, cols), want_state, got_state in zip(X_SHAPES, _states(kind), _states(kind)):
        x = torch.ones(rows, cols)
        torch.testing.assert_close(jf(x, got_state), fn(x, want_state))
        assert _same(got_state, want_state), f"state {_attributes(got_state)}, eager {_attributes(want_state)}"
