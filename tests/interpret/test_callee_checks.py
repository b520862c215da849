"""metatrace.interpret.calls.python.callee_checks: a function the trace calls, read from the user's state (a
global, a closure cell, an attribute of the user's module, class or object), is checked by
identity, code and defaults; every call equals eager. Functions of installed packages are code and
get no check (metatrace.interpret.reads.library_code)."""

from __future__ import annotations

import os
import types

import torch

import thunder

import metatrace

SYMBOLIC = "symbolic values"


def scale_by_two(x, factor=2):
    return x * factor


def scale_by_five(x, factor=5):
    return x * factor


helper = scale_by_two


def calls_helper(x):
    return helper(x)


def _results_and_misses(fn, changes):
    """Calls the jitted ``fn`` before and after each change; (equal to eager each time, misses)."""
    jf = thunder.jit(fn, cache=SYMBOLIC)
    x = torch.ones(3)
    equal = [torch.equal(jf(x), fn(x))]
    for change in changes:
        change()
        equal.append(torch.equal(jf(x), fn(x)))
    return equal, thunder.cache_misses(jf)


def test_a_rebound_global_function_misses_the_entry(enabled):
    global helper
    try:
        def rebind():
            global helper
            helper = scale_by_five

        assert _results_and_misses(calls_helper, [rebind]) == ([True, True], 2)
    finally:
        helper = scale_by_two


def test_changed_defaults_miss_the_entry(enabled):
    saved = scale_by_two.__defaults__
    try:
        def change():
            scale_by_two.__defaults__ = (3,)

        assert _results_and_misses(calls_helper, [change]) == ([True, True], 2)
    finally:
        scale_by_two.__defaults__ = saved


def test_a_mutated_mutable_default_misses_the_entry(enabled):
    def scaled(x, config={"factor": 2}):  # noqa: B006 (the pattern under test)
        return x * config["factor"]

    def fn(x):
        return scaled(x)

    def mutate():
        scaled.__defaults__[0]["factor"] = 4

    assert _results_and_misses(fn, [mutate]) == ([True, True], 2)


def test_a_rebound_closure_function_misses_the_entry(enabled):
    inner = scale_by_two

    def fn(x):
        return inner(x)

    def rebind():
        nonlocal inner
        inner = scale_by_five

    assert _results_and_misses(fn, [rebind]) == ([True, True], 2)


def test_an_unchanged_helper_keeps_one_entry_over_sizes(enabled):
    jf = thunder.jit(calls_helper, cache=SYMBOLIC)
    for n in (3, 5, 8, 13):
        x = torch.randn(n)
        torch.testing.assert_close(jf(x), calls_helper(x))
    assert thunder.cache_misses(jf) == 1


def test_a_helper_called_twice_is_checked_once(enabled):
    def fn(x):
        return helper(x) + helper(x * 2)

    jf = thunder.jit(fn, cache=SYMBOLIC)
    jf(torch.ones(3))
    (entry,) = metatrace.explain(jf)
    assert [g.split(" == ")[0] for g in entry.guards if "calls" in g] == ["helper"]


def test_a_function_from_an_installed_package_is_not_checked(enabled):
    def fn(x):
        return torch.nn.functional.gelu(x) + torch.relu(x)

    jf = thunder.jit(fn, cache=SYMBOLIC)
    torch.testing.assert_close(jf(torch.ones(3)), fn(torch.ones(3)))
    (entry,) = metatrace.explain(jf)
    assert [g for g in entry.guards if "calls" in g or "defaults" in g] == []


def test_a_rebound_function_of_a_users_module_misses_the_entry(enabled):
    helpers = types.ModuleType("my_helpers")  # (a module of the user's: no installed file)
    helpers.scale = scale_by_two

    def fn(x):
        return helpers.scale(x)

    def rebind():
        helpers.scale = scale_by_five

    assert _results_and_misses(fn, [rebind]) == ([True, True], 2)


def test_changed_defaults_of_a_users_module_function_miss_the_entry(enabled):
    helpers = types.ModuleType("my_helpers")
    helpers.scale = lambda x, factor=2: x * factor

    def fn(x):
        return helpers.scale(x)

    def change():
        helpers.scale.__defaults__ = (7,)

    assert _results_and_misses(fn, [change]) == ([True, True], 2)


def test_a_function_edited_in_place_misses_the_entry(enabled):
    # IPython's autoreload edits a function in place: the same object gets the new code
    def scale(x):
        return x * 2

    def fn(x):
        return scale(x)

    def edit():
        scale.__code__ = (lambda x: x * 9).__code__

    assert _results_and_misses(fn, [edit]) == ([True, True], 2)


def test_a_rebound_global_builtin_misses_the_entry(enabled):
    namespace = {"torch": torch}
    exec("act = torch.relu\ndef fn(x):\n    return act(x - 2)\n", namespace)

    def rebind():
        namespace["act"] = torch.neg

    assert _results_and_misses(namespace["fn"], [rebind]) == ([True, True], 2)


def test_a_builtin_stored_on_an_object_misses_the_entry_when_replaced(enabled):
    config = types.SimpleNamespace(act=torch.relu)

    def fn(x):
        return config.act(x - 2)

    def replace():
        config.act = torch.neg

    assert _results_and_misses(fn, [replace]) == ([True, True], 2)


class Shift:
    def apply(self, x):
        return x + 1


def test_a_method_replaced_on_its_class_misses_the_entry(enabled):
    shift = Shift()

    def fn(x):
        return shift.apply(x)

    def replace():
        Shift.apply = lambda self, x: x + 7

    saved = Shift.apply
    try:
        assert _results_and_misses(fn, [replace]) == ([True, True], 2)
    finally:
        Shift.apply = saved


def test_a_method_replaced_on_its_object_misses_the_entry(enabled):
    shift = Shift()
    replace = lambda: setattr(shift, "apply", lambda x: x + 7)  # noqa: E731
    assert _results_and_misses(lambda x: shift.apply(x), [replace]) == ([True, True], 2)


def test_a_bound_method_set_on_its_object_misses_the_entry(enabled):
    shift = Shift()
    replace = lambda: setattr(shift, "apply", types.MethodType(lambda self, x: x + 7, shift))  # noqa: E731
    assert _results_and_misses(lambda x: shift.apply(x), [replace]) == ([True, True], 2)


def test_an_unchanged_object_keeps_its_entry(enabled):
    shift = Shift()
    assert _results_and_misses(lambda x: shift.apply(x), [lambda: None]) == ([True, True], 1)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def activation(self, x):
        return torch.relu(x)

    def forward(self, x):
        return self.activation(self.linear(x))


def _stack():
    torch.manual_seed(0)
    return torch.nn.Sequential(Block(), Block(), Block())


def _module_misses(model, x, change, undo) -> int:
    """The jitted ``model`` called before and after ``change`` (undone afterwards), each call
    equal to eager; its cache misses."""
    jm = thunder.jit(model, cache=SYMBOLIC)
    torch.testing.assert_close(jm(x), model(x))
    try:
        change()
        torch.testing.assert_close(jm(x), model(x))
    finally:
        undo()
    return thunder.cache_misses(jm)


def test_a_module_method_replaced_on_its_class_misses_the_entry(enabled):
    saved = Block.activation
    change = lambda: setattr(Block, "activation", lambda self, x: torch.tanh(x))  # noqa: E731
    assert _module_misses(_stack(), torch.randn(2, 4), change, lambda: setattr(Block, "activation", saved)) == 2


def test_a_module_forward_replaced_on_one_block_misses_the_entry(enabled):
    model = _stack()
    change = lambda: setattr(model[1], "forward", lambda x: x * 0)  # noqa: E731
    assert _module_misses(model, torch.randn(2, 4), change, lambda: delattr(model[1], "forward")) == 2


def test_a_module_method_replaced_on_one_block_misses_the_entry(enabled):
    model = _stack()
    change = lambda: setattr(model[2], "activation", torch.tanh)  # noqa: E731
    assert _module_misses(model, torch.randn(2, 4), change, lambda: delattr(model[2], "activation")) == 2


def test_a_method_shared_by_many_modules_is_checked_once_per_class(enabled):
    model = _stack()
    jm = thunder.jit(model, cache=SYMBOLIC)
    jm(torch.randn(2, 4))
    (entry,) = metatrace.explain(jm)
    checked = [g.split(" == ")[0].rsplit(".", 1)[-1] for g in entry.guards if g.endswith("(a function the trace calls)")]
    assert sorted(checked) == ["activation", "forward"]


def test_method_checks_keep_one_entry_over_sizes(enabled):
    model = _stack()
    jm = thunder.jit(model, cache=SYMBOLIC)
    for n in (1, 2, 5, 9):
        x = torch.randn(n, 4)
        torch.testing.assert_close(jm(x), model(x))
    assert thunder.cache_misses(jm) == 1  # (n = 1 too: metatrace.proxies.size_oblivious)


class Heads(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.dim, self.heads = 8, 2

    @property
    def head_dim(self):
        return self.dim // self.heads

    def forward(self, x):
        return x.reshape(x.shape[0], -1, self.head_dim).sum(-1)


def test_a_property_keeps_one_entry_over_sizes(enabled):
    model = Heads()
    jm = thunder.jit(model, cache=SYMBOLIC)
    for n in (2, 3, 7):
        x = torch.randn(n, 8)
        torch.testing.assert_close(jm(x), model(x))
    assert thunder.cache_misses(jm) == 1


def test_a_property_replaced_on_its_class_misses_the_entry(enabled):
    # the getter's result was symbolic (self.dim // self.heads): the prologue read self.dim and
    # self.heads, which did not change, and the old entry was reused with the old getter's formula
    saved = Heads.head_dim
    change = lambda: setattr(Heads, "head_dim", property(lambda self: self.dim // 2 // self.heads))  # noqa: E731
    assert _module_misses(Heads(), torch.randn(2, 8), change, lambda: setattr(Heads, "head_dim", saved)) == 2


def test_a_property_getter_edited_in_place_misses_the_entry(enabled):
    getter = Heads.head_dim.fget
    saved = getter.__code__
    change = lambda: setattr(getter, "__code__", (lambda self: self.dim // 4).__code__)  # noqa: E731
    assert _module_misses(Heads(), torch.randn(2, 8), change, lambda: setattr(getter, "__code__", saved)) == 2


def _reads_a_flag(x):
    return x + 1 if os.environ.get("METATRACE_TEST_FLAG") == "1" else x - 1


def test_a_changed_environment_variable_misses_the_entry(enabled, monkeypatch):
    monkeypatch.setenv("METATRACE_TEST_FLAG", "1")
    assert _results_and_misses(_reads_a_flag, [lambda: monkeypatch.setenv("METATRACE_TEST_FLAG", "0")]) == ([True, True], 2)


def test_an_environment_variable_set_after_the_compile_misses_the_entry(enabled, monkeypatch):
    monkeypatch.delenv("METATRACE_TEST_FLAG", raising=False)

    def fn(x):
        return x * 2 if "METATRACE_TEST_FLAG" in os.environ else x * 3

    assert _results_and_misses(fn, [lambda: monkeypatch.setenv("METATRACE_TEST_FLAG", "")]) == ([True, True], 2)


def test_an_unchanged_environment_keeps_one_entry_over_sizes(enabled, monkeypatch):
    monkeypatch.setenv("METATRACE_TEST_FLAG", "1")
    jf = thunder.jit(_reads_a_flag, cache=SYMBOLIC)
    for n in (2, 3, 7):
        x = torch.randn(n)
        torch.testing.assert_close(jf(x), _reads_a_flag(x))
    assert thunder.cache_misses(jf) == 1


class Factory:
    factor = 2

    @classmethod
    def make(cls, x):
        return x * cls.factor


def test_a_classmethod_replaced_on_its_class_misses_the_entry(enabled):
    def fn(x):
        return Factory.make(x)

    saved = Factory.__dict__["make"]
    try:
        assert _results_and_misses(fn, [lambda: setattr(Factory, "make", classmethod(lambda cls, x: x + 9))]) \
            == ([True, True], 2)
    finally:
        Factory.make = saved


def test_a_classmethod_read_through_an_object_misses_the_entry_when_replaced(enabled):
    factory = Factory()
    saved = Factory.__dict__["make"]
    try:
        assert _results_and_misses(lambda x: factory.make(x),
                                   [lambda: setattr(Factory, "make", classmethod(lambda cls, x: x + 9))]) \
            == ([True, True], 2)
    finally:
        Factory.make = saved


def test_a_classmethod_read_through_an_object_keeps_its_entry(enabled):
    factory = Factory()
    assert _results_and_misses(lambda x: factory.make(x), [lambda: None]) == ([True, True], 1)


class ScaleBy:
    def __init__(self, k):
        self.k = k

    def __call__(self, x):
        return x * self.k


class AddBy(ScaleBy):
    def __call__(self, x):
        return x + self.k


def test_a_called_object_rebound_to_another_class_misses_the_entry(enabled):
    # the state the trace reads (norm.k == 2) is the same on both objects: only the class differs
    holder = types.SimpleNamespace(norm=ScaleBy(2))

    def fn(x):
        return holder.norm(x)

    assert _results_and_misses(fn, [lambda: setattr(holder, "norm", AddBy(2))]) == ([True, True], 2)


def test_a_called_objects_call_replaced_on_its_class_misses_the_entry(enabled):
    norm = ScaleBy(2)

    def fn(x):
        return norm(x)

    saved = ScaleBy.__call__
    try:
        assert _results_and_misses(fn, [lambda: setattr(ScaleBy, "__call__", lambda self, x: x - self.k)]) \
            == ([True, True], 2)
    finally:
        ScaleBy.__call__ = saved


def test_a_called_object_keeps_one_entry_over_sizes(enabled):
    norm = ScaleBy(2)

    def fn(x):
        return norm(x)

    jf = thunder.jit(fn, cache=SYMBOLIC)
    for n in (2, 3, 7):
        x = torch.randn(n)
        torch.testing.assert_close(jf(x), fn(x))
    assert thunder.cache_misses(jf) == 1
