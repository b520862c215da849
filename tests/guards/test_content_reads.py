"""State a training loop keeps across calls (metatrace.guards.content_reads, interpret.module_state).

A list, dict or set the trace only writes to (``log.append(n)``, ``self.seen.append(n)``,
``cache["k"] = v``) is checked by its type: the same growing object serves every call from one
entry, its stores replayed with each call's values. A container the trace reads in any way keeps
its contents check, so the matrix of reads below must follow eager on every call whatever the
compile count. A number kept on the jitted module (``self.count += n``, ``self.steps += 1``) is
static until a compile sees it changed, then symbolic: two compiles for any number of calls.
"""

from __future__ import annotations

import copy
import types

import pytest
import torch
import thunder

import metatrace

pytestmark = pytest.mark.metatrace_sentinel

SHAPES = ((2, 3), (3, 3), (4, 2), (1, 5))


# ---------------------------------------------------------------------------------------------
# Where the container lives: (make a jitted-or-eager callable for a body, the container)
# ---------------------------------------------------------------------------------------------


def _make_argument(body, state):
    fn = lambda x, target: body(x, target)  # noqa: E731
    return fn, (lambda call: (lambda x: call(x, state)))


def _make_namespace(body, state):
    ns = types.SimpleNamespace(items=state)
    fn = lambda x, cfg: body(x, cfg.items)  # noqa: E731
    return fn, (lambda call: (lambda x: call(x, ns)))


GLOBAL_STATE = None


def _make_global(body, state):
    global GLOBAL_STATE
    GLOBAL_STATE = state

    def fn(x):
        return body(x, GLOBAL_STATE)

    return fn, (lambda call: call)


def _make_closure(body, state):
    def fn(x):
        return body(x, state)

    return fn, (lambda call: call)


class Holder(torch.nn.Module):
    def __init__(self, body, state):
        super().__init__()
        self.body, self.state = body, state

    def forward(self, x):
        return self.body(x, self.state)


def _make_module(body, state):
    return Holder(body, state), (lambda call: call)


PLACES = {"argument": _make_argument, "namespace argument": _make_namespace, "global": _make_global,
          "closure": _make_closure, "module attribute": _make_module}


def _run(place, body, initial, jit: bool):
    """Four calls on one container that lives across them: (results, the container after each)."""
    state = copy.deepcopy(initial)
    fn, bind = PLACES[place](body, state)
    jitted = thunder.jit(fn, cache="symbolic values") if jit else fn
    call = bind(jitted)
    results, states = [], []
    for shape in SHAPES:
        x = torch.arange(shape[0] * shape[1], dtype=torch.float32).reshape(shape)
        results.append(copy.deepcopy(call(x)))  # (as returned: eager returns the container itself)
        states.append(copy.deepcopy(state))
    return results, states, jitted


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and torch.allclose(a, b)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return type(b) is dict and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


# ---------------------------------------------------------------------------------------------
# Writes only: one compile for every call
# ---------------------------------------------------------------------------------------------

WRITES = {
    "list.append size": ([], lambda x, l: l.append(x.shape[0])),
    "list.append tensor": ([], lambda x, l: l.append(x.sum())),
    "list.extend": ([0], lambda x, l: l.extend([x.shape[0], x.shape[1]])),
    "list +=": ([], lambda x, l: l.__iadd__([x.shape[1]])),
    "dict store": ({}, lambda x, d: d.__setitem__("last", x.shape[0])),
    "dict.update": ({"a": 1}, lambda x, d: d.update(rows=x.shape[0], t=x.mean())),
    "set.add": (set(), lambda x, s: s.add("seen")),
}


def _writing(op):
    def body(x, target):
        op(x, target)
        return x * 2

    return body


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("write", WRITES)
def test_a_container_only_written_serves_every_call_from_one_entry(enabled, write, place):
    initial, op = WRITES[write]
    want, want_states, _ = _run(place, _writing(op), initial, jit=False)
    got, got_states, jitted = _run(place, _writing(op), initial, jit=True)
    assert _same(got, want)
    assert _same(got_states, want_states)
    assert thunder.cache_misses(jitted) == 1


def test_explain_says_the_container_is_checked_by_type(enabled):
    log = []
    jf = thunder.jit(lambda x, log: log.append(x.shape[0]) or x + 1, cache="symbolic values")
    jf(torch.ones(2), log)
    (entry,) = metatrace.explain(jf)
    assert "type(log) is list (the trace only writes to it)" in entry.guards


# ---------------------------------------------------------------------------------------------
# Reads (with a write, so the contents change on every call): eager's result on every call
# ---------------------------------------------------------------------------------------------


def _helper(*items):
    return len(items)


READS = {
    "len": lambda x, l: x * len(l),
    "bool": lambda x, l: x * 2 if l else x,
    "iterate": lambda x, l: x * sum(1 for _ in l),
    "last item": lambda x, l: x * l[-1],
    "in": lambda x, l: x * 3 if 2 in l else x,
    "unpacked into a call": lambda x, l: x * _helper(*l),
    "str": lambda x, l: x * len(str(l)),
    "sorted": lambda x, l: x * sorted(l)[0],
    "copied": lambda x, l: x * len(list(l)),
    "compared": lambda x, l: x * 5 if l == [1, 2] else x,
    "max": lambda x, l: x * max(l),
    "returned in a new dict": lambda x, l: (x, {"l": l}),
    "returned in a new list": lambda x, l: (x, [l, 1]),
    "passed to torch.tensor": lambda x, l: x.sum() * torch.tensor(l, dtype=torch.float32).sum(),
    "read by a helper function": lambda x, l: x * _last(l),
    "read through an alias": lambda x, l: x * len(_alias(l)),
}


def _last(items):
    return items[len(items) - 1]


def _alias(items):
    alias = items
    return alias


def _appending_then(read):
    def body(x, l):
        l.append(len(l) + 1)
        return read(x, l)

    return body


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("read", READS)
def test_a_container_the_trace_reads_follows_eager(enabled, read, place):
    body = _appending_then(READS[read])
    want, want_states, _ = _run(place, body, [1], jit=False)
    got, got_states, _ = _run(place, body, [1], jit=True)
    assert _same(got_states, want_states)
    for call, (g, w) in enumerate(zip(got, want)):
        assert _same(g, w), f"call {call}: {g!r}, eager {w!r}"


@pytest.mark.parametrize("read", ["len", "last item", "iterate"])
def test_a_container_changed_between_calls_by_the_caller_follows_eager(enabled, read):
    items = [1]
    jf = thunder.jit(lambda x, l: READS[read](x, l), cache="symbolic values")
    for n in (2, 3, 4):
        items.append(n)
        torch.testing.assert_close(jf(torch.ones(2), items), READS[read](torch.ones(2), items))


def test_a_dict_read_after_it_was_written_follows_eager(enabled):
    def fn(x, d):
        d[x.shape[0] % 2] = x.shape[0]
        return x * len(d)

    eager_d, jit_d = {}, {}
    jf = thunder.jit(fn, cache="symbolic values")
    for rows in (2, 3, 4, 5):
        x = torch.ones(rows)
        torch.testing.assert_close(jf(x, jit_d), fn(x, eager_d))
        assert jit_d == eager_d


# ---------------------------------------------------------------------------------------------
# Numbers kept on the jitted module: static until they change, then symbolic
# ---------------------------------------------------------------------------------------------


class Counting(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.count, self.steps, self.temperature, self.seen = 0, 0, 1.0, []

    def forward(self, x):
        self.count += x.shape[0]
        self.steps += 1
        self.temperature = self.temperature * 0.5
        self.seen.append(x.shape[0])
        return self.lin(x) / self.temperature + self.steps


def _state(m: Counting) -> tuple:
    return m.count, m.steps, m.temperature, list(m.seen)


def test_module_counters_match_eager_in_two_compiles(enabled):
    eager = Counting()
    model = copy.deepcopy(eager)
    jm = thunder.jit(model, cache="symbolic values")
    for rows in (2, 3, 4, 1, 5):
        x = torch.randn(rows, 3)
        torch.testing.assert_close(jm(x), eager(x))
        assert _state(model) == _state(eager)
    assert thunder.cache_misses(jm) == 2


def test_module_counter_gradients_match_eager(enabled):
    eager = Counting()
    model = copy.deepcopy(eager)
    jm = thunder.jit(model, cache="symbolic values")
    for rows in (2, 3, 4):
        x = torch.randn(rows, 3)
        jm(x).sum().backward()
        eager(x).sum().backward()
        torch.testing.assert_close(model.lin.weight.grad, eager.lin.weight.grad)


class Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale, self.n_head = 1.0, 2

    def forward(self, x):
        return x.reshape(x.shape[0], self.n_head, -1) * self.scale


def test_a_module_number_the_caller_changes_is_symbolic_after_the_first_change(enabled):
    model = Scaled()
    jm = thunder.jit(model, cache="symbolic values")
    for scale in (1.0, 2.0, 3.0, 0.5):
        model.scale = scale
        x = torch.randn(2, 4)
        torch.testing.assert_close(jm(x), x.reshape(2, 2, -1) * scale)
    assert thunder.cache_misses(jm) == 2


def test_a_module_number_that_never_changes_stays_static(enabled):
    model = Scaled()
    jm = thunder.jit(model, cache="symbolic values")
    for rows in (2, 3):
        jm(torch.randn(rows, 4))
    (entry,) = metatrace.explain(jm)
    assert any(g.startswith("self.n_head == 2") for g in entry.guards)
