"""metatrace.guards.value_checks: a value check that matched pins its object (the versions of the
dicts in it, the types of the modules in it) and later accepts the same unchanged object without a
snapshot. Generated: every kind of value x every kind of change, each check sequence decides as a
fresh snapshot comparison does; and end to end, a global the trace read changed in place between
calls gives eager's result."""

from __future__ import annotations

import enum
import itertools

import pytest
import torch

import thunder

from metatrace.guards.value_checks import ExpectedValue, snapshot

SYMBOLIC = "symbolic values"


class Mode(enum.Enum):
    A = 1
    B = 2


def _fn():
    return 1


class Scaled(torch.nn.Linear):
    pass


def _values():
    """Fresh values of each kind (built per test: the changes mutate them)."""
    return {
        "flat dict": {"a": 1, "b": "x", "c": None},
        "nested dict": {"outer": {"inner": 2.0, "mode": Mode.A}, "t": (1, 2)},
        "dict of list": {"xs": [1, 2], "f": _fn},
        "tuple of dicts": ({"k": 1}, {"k": 2}),
        "tuple of leaves": (1, "a", 2.5, True, None, torch.float32),
        "tuple of strings": ("self", "x", "mask"),
        "dict of modules": {"0": torch.nn.Linear(2, 2), "1": torch.nn.ReLU()},
        "list": [1, 2, {"k": 3}],
        "float keys": {1.5: "a", (1, 2): "b"},
    }


def _set_first(v):
    """Changes the value in place where it can (the first dict found gets a new or changed key)."""
    for d in _dicts(v):
        key = next(iter(d), "new")
        d[key] = "changed"
        return True
    if isinstance(v, list):
        v.append(0)
        return True
    return False


def _set_same(v):
    for d in _dicts(v):  # the same object stored again: no change
        for k, item in d.items():
            d[k] = item
            return True
    return False


def _delete(v):
    for d in _dicts(v):
        if d:
            d.pop(next(iter(d)))
            return True
    return False


def _deep(v):
    """Changes the innermost container: a nested dict's item, a list inside a dict."""
    for d in _dicts(v):
        for item in d.values():
            if isinstance(item, dict):
                item["added"] = 1
                return True
            if isinstance(item, list):
                item[0] = -1
                return True
    return False


def _retype_module(v):
    for d in _dicts(v):
        for item in d.values():
            if type(item) is torch.nn.Linear:
                item.__class__ = Scaled
                return True
    return False


def _dicts(v):
    if type(v) is dict:
        yield v
    if type(v) in (tuple, list):
        for e in v:
            yield from _dicts(e)


CHANGES = {"set": _set_first, "set the same object": _set_same, "delete": _delete, "nested": _deep,
           "module class": _retype_module}


@pytest.mark.parametrize("kind,change", list(itertools.product(_values(), CHANGES)))
def test_a_pinned_check_decides_as_a_fresh_snapshot(kind, change):
    value = _values()[kind]
    check = ExpectedValue(value, kind)
    original = snapshot(value)
    decisions = [check.matches(value), check.matches(value)]  # the second one from the pin
    CHANGES[change](value)
    decisions += [check.matches(value), check.matches(value)]
    expected = [True, True] + [snapshot(value) == original] * 2
    assert decisions == expected


@pytest.mark.parametrize("kind", list(_values()))
def test_an_equal_copy_matches_and_a_changed_copy_does_not(kind):
    value = _values()[kind]
    check = ExpectedValue(value, kind)
    check.matches(value)
    copy = _values()[kind]
    assert check.matches(copy) and not (_set_first(copy) and check.matches(copy))


class _EqualToAll(str):
    def __eq__(self, other):
        return True

    __hash__ = str.__hash__


@pytest.mark.parametrize("other", [("self", "x", "mask"), ("self", "x", "maskk"), ("self", "x"),
                                   ("self", "x", _EqualToAll("y")), ["self", "x", "mask"]],
                         ids=["equal", "changed", "shorter", "str subclass", "list"])
def test_a_new_tuple_of_strings_matches_exactly_when_a_snapshot_does(other):
    check = ExpectedValue(("self", "x", "mask"), "co_varnames")
    check.matches(("self", "x", "mask"))  # pinned: a tuple of strings
    assert check.matches(other) == (snapshot(other) == snapshot(("self", "x", "mask")))


SETTINGS = {"scale": 2.0, "sub": {"shift": 1.0}}


def _scaled(x):
    return x * SETTINGS["scale"] + SETTINGS["sub"]["shift"]


@pytest.mark.parametrize("change", ["top", "nested", "none"])
def test_a_global_dict_changed_in_place_between_calls_gives_eagers_result(enabled, change):
    SETTINGS.update(scale=2.0, sub={"shift": 1.0})
    jf = thunder.jit(_scaled, cache=SYMBOLIC)
    x = torch.randn(3)
    jf(x)
    jf(x)
    if change == "top":
        SETTINGS["scale"] = 3.0
    elif change == "nested":
        SETTINGS["sub"]["shift"] = -1.0
    assert torch.equal(jf(x), _scaled(x))
