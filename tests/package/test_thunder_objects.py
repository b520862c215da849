"""metatrace keeps a compile's state in its own objects: nothing of metatrace's is set on any of
thunder's objects (checked here by behaviour, not by a name prefix in the source).

Two checks over real compiles (forward and backward, two shapes):
- the objects a compile makes and keeps (traces, bound symbols, proxies, the compile statistics,
  found by the garbage collector, not by walking what thunder exposes), and the proxies, traces and
  bound symbols it makes and lets go during the compile (their attribute stores recorded) carry, per
  thunder class, no attribute that stock thunder (metatrace disabled) does not also set on that
  class when it compiles the same programs (under either cache option; stock thunder's symbolic
  values cannot compile a module's parameters, so both options make the baseline);
- the objects that exist before a compile (thunder's executors) have the same attribute names
  after it. (thunder's symbols are frozen, slotted dataclasses: nothing can be added to them.)
"""

from __future__ import annotations

import collections
import contextlib
import gc

import pytest
import thunder
import thunder.extend
import torch
from thunder.core.proxies import Proxy
from thunder.core.symbol import BoundSymbol
from thunder.core.trace import TraceCtx

import metatrace


def _sizes_in_slices(x, w, n):
    y = torch.nn.functional.pad(torch.nn.functional.linear(x, w).relu(), (1, 2))  # (sizes offset by the metas)
    return y[1:].sum(-1) * n + y[: x.shape[0] - 1].sum(0).sum(-1, keepdim=True) + x.shape[1]


class _Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(6)
        self.proj = torch.nn.Linear(6, 12)

    def forward(self, x):
        B, T, C = x.shape
        h = self.proj(self.norm(x)).view(B, T, 2, C)
        return h.transpose(1, 2).reshape(B * 2, T, C).softmax(-1).sum()


def _call_sizes_in_slices(jfn, T):
    w = torch.randn(5, 3, requires_grad=True)
    jfn(torch.randn(T, 3), w, 2).sum().backward()


def _call_block(jfn, T):
    jfn(torch.randn(2, T, 6)).backward()


WORKLOADS = {
    "function": (lambda: _sizes_in_slices, _call_sizes_in_slices),
    "module": (_Block, _call_block),
}


def _thunder_class(obj) -> type:
    """The nearest class of ``obj`` that thunder defines (metatrace's subclasses count as it)."""
    return next(c for c in type(obj).__mro__ if str(vars(c).get("__module__", "")).startswith("thunder.") or c is object)


def _thunder_objects() -> dict[int, object]:
    """Every live object whose class thunder defines (or metatrace derives from thunder's)."""
    gc.collect()
    return {id(o): o for o in gc.get_objects() if _thunder_class(o) is not object}


# Classes whose instances' attribute stores are recorded while a workload compiles, so that an
# attribute stored on an object that dies before the compile ends is seen too.
WATCHED = (Proxy, TraceCtx, BoundSymbol)


@contextlib.contextmanager
def _attribute_stores(names: dict):
    """Records, per thunder class, the names of attributes stored on instances of ``WATCHED``."""
    originals = {cls: vars(cls).get("__setattr__") for cls in WATCHED}

    def make(cls, inherited):
        def __setattr__(self, name, value):
            # (a proxy given a subclass of its own class, which adds behaviour and no state,
            # ``proxy_edits.give_class``, is still the thunder object it was)
            if name != "__class__" or not issubclass(value, type(self)):
                names[_thunder_class(self)].add(name)
            inherited(self, name, value)
        return __setattr__

    for cls in WATCHED:
        setattr(cls, "__setattr__", make(cls, cls.__setattr__))
    try:
        yield
    finally:
        for cls, original in originals.items():
            if original is None:
                delattr(cls, "__setattr__")
            else:
                setattr(cls, "__setattr__", original)


def _compile(workload: str, enabled: bool, cache: str = "symbolic values") -> dict[type, set[str]]:
    """Per thunder class, the attribute names of the objects a compile of ``workload`` made (and
    its calls kept alive: traces, bound symbols, proxies, cache entries, statistics)."""
    make, call = WORKLOADS[workload]
    with metatrace.enable() if enabled else contextlib.nullcontext():
        before = _thunder_objects()
        names = collections.defaultdict(set)
        with _attribute_stores(names):
            jfn = thunder.jit(make(), cache=cache)
            for T in (4, 6):
                call(jfn, T)
        for key, obj in _thunder_objects().items():
            if key not in before and hasattr(obj, "__dict__"):
                names[_thunder_class(obj)] |= set(vars(obj))
        del jfn
        return names


@pytest.fixture(scope="module")
def stock_attribute_names() -> dict[type, set[str]]:
    names = collections.defaultdict(set)
    for workload in WORKLOADS:
        for cache in ("constant values", "symbolic values"):
            try:
                found = _compile(workload, enabled=False, cache=cache)
            except Exception:  # stock thunder's symbolic values fails on a module's parameters
                continue
            for cls, attributes in found.items():
                names[cls] |= attributes
    return names


@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_objects_a_compile_makes_carry_only_thunders_attributes(workload, stock_attribute_names):
    patched = _compile(workload, enabled=True)
    extra = {cls.__qualname__: sorted(names - stock_attribute_names.get(cls, set()))
             for cls, names in patched.items() if names - stock_attribute_names.get(cls, set())}
    assert extra == {}


def test_thunders_executors_gain_no_attribute_in_a_compile():
    with metatrace.enable():
        before = {ex.name: set(vars(ex)) for ex in thunder.extend.get_all_executors()}
        jfn = thunder.jit(_Block(), cache="symbolic values")
        for T in (4, 6):
            _call_block(jfn, T)
        after = {ex.name: set(vars(ex)) for ex in thunder.extend.get_all_executors()}
    assert after == before
