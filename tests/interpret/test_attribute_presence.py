"""Lazy state, written the ordinary ways: an attribute a call reads with a default, tests with
``hasattr`` or catches ``AttributeError`` for, then stores. Generated: every way of asking,
crossed with every owner (the jitted module, an object argument, a dataclass argument, the
module's class through ``type(self)`` and through ``self.__class__``, a global object), over four
calls; the results and the owner's attribute equal eager's after each call.

Before the prologue checked the answer (``metatrace.interpret.reads.attribute_presence``), the entry
traced while the attribute was absent served every later call: a counter stayed at 1.
"""

from __future__ import annotations

import dataclasses
import types

import pytest
import thunder
import torch

from metatrace.testing import assert_no_proxies_after

pytestmark = pytest.mark.metatrace_sentinel

ASKS = {
    "getattr default": "n = getattr(owner, 'calls', 0)",
    "hasattr": "n = owner.calls if hasattr(owner, 'calls') else 0",
    "try AttributeError": "try:\n        n = owner.calls\n    except AttributeError:\n        n = 0",
}
# the owner expression, seen from ``forward(self, x, arg)``
OWNERS = {
    "module": "self",
    "namespace argument": "arg",
    "dataclass argument": "arg",
    "type(self)": "type(self)",
    "self.__class__": "self.__class__",
    "global object": "STATE",
}


@dataclasses.dataclass
class Config:
    k: int = 1


def _source(ask: str, owner: str) -> str:
    body = [f"owner = {owner}", *ask.split("\n    "), "owner.calls = n + x.shape[0]", "return x * owner.calls"]
    return ("class Counting(torch.nn.Module):\n    def forward(self, x, arg):\n"
            + "".join(f"        {line}\n" for line in body))


def _make(ask_name: str, owner_name: str):
    namespace = {"torch": torch, "STATE": types.SimpleNamespace()}
    exec(compile(_source(ASKS[ask_name], OWNERS[owner_name]), f"<{ask_name} on {owner_name}>", "exec"), namespace)
    module = namespace["Counting"]()
    arg = Config() if owner_name == "dataclass argument" else types.SimpleNamespace()
    owners = {"module": module, "namespace argument": arg, "dataclass argument": arg,
              "type(self)": type(module), "self.__class__": type(module), "global object": namespace["STATE"]}
    return module, arg, owners[owner_name]


@pytest.mark.parametrize("owner", OWNERS)
@pytest.mark.parametrize("ask", ASKS)
def test_lazy_state_matches_eager(enabled, ask, owner):
    eager, eager_arg, eager_owner = _make(ask, owner)
    module, arg, jitted_owner = _make(ask, owner)
    jm = thunder.jit(module, cache="symbolic values")
    for rows in (2, 3, 2, 5):
        x = torch.ones(rows, 2)
        torch.testing.assert_close(jm(x, arg), eager(x, eager_arg))
        assert_no_proxies_after(module, (x, arg))
        assert getattr(jitted_owner, "calls", None) == getattr(eager_owner, "calls", None)


def test_a_present_attribute_keeps_the_entry(enabled):
    """The check is of presence: a later value of a present number stays symbolic."""
    module, arg, _ = _make("getattr default", "namespace argument")
    jm = thunder.jit(module, cache="symbolic values")
    for calls in (1, 2, 7):
        arg.calls = calls
        jm(torch.ones(2, 2), arg)
    assert thunder.cache_misses(jm) == 1
