"""Runs one program of ``fuzz_families`` eagerly and jitted, side by side, and names every
difference after every call: the outputs, the state the program mutates (its arguments, the
module's attributes, the globals ``G`` and ``GD``, the closure variables ``CELLS()`` reads), the
thunder proxy left in the caller's objects (``metatrace.testing``'s sentinel).

A ``MetatraceError`` passes where eager does not raise only when stock thunder (metatrace
disabled) under ``cache="constant values"`` fails the same call too (raises, or differs from eager).
"""

from __future__ import annotations

import dataclasses
import types
from typing import Any

import torch

import fuzz_families as ff
from fuzz_programs import Outcome, _same, _short


def same_value(a: Any, b: Any) -> bool:
    """Eager's value and the jitted one agree: tensors by value, floats with NaN and the sign of
    zero, containers element by element, namespaces and dataclasses by their attributes."""
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return type(b) is dict and list(a) == list(b) and all(same_value(a[k], b[k]) for k in a)
    if isinstance(a, complex):
        return type(b) is complex and same_value(a.real, b.real) and same_value(a.imag, b.imag)
    if isinstance(a, types.SimpleNamespace) or dataclasses.is_dataclass(a) and not isinstance(a, type):
        return type(a) is type(b) and same_value(vars(a), vars(b))
    return _same(a, b)


class _Side:
    """One side of the comparison: a module built from the program, its namespace, and the
    objects it is called with (kept or rebuilt between calls as the sequence says)."""

    def __init__(self, source: str, jit_cache: str | None):
        import thunder

        self.ns = ff.fresh_namespace()
        exec(compile(source, "<fuzzed program>", "exec"), self.ns)
        self.module = self.ns["Family"]()
        self.fn = thunder.jit(self.module, cache=jit_cache) if jit_cache else self.module
        self.a = self.state = None

    def arguments(self, call: ff.FamilyCall) -> tuple:
        if call.a_how == "build" or self.a is None:
            self.a = ff.build_argument(call.a)
        elif call.a_how == "mutate":
            ff.mutate_argument(self.a)
        if call.fresh_state or self.state is None:
            self.state = ff.fresh_state(call.cfg_kind)
        x = torch.arange(call.size * 2, dtype=torch.float32).reshape(call.size, 2) + 1
        return (x, self.a, call.n, call.m, call.r, *self.state)

    def run(self, call: ff.FamilyCall):
        """The call's result or the exception it raised, and the state after it."""
        args = self.arguments(call)
        try:
            result = self.fn(*args)
        except Exception as e:
            result = e
        return result, args

    def observed_state(self) -> dict:
        acc, cfg, d = self.state
        attributes = {k: v for k, v in vars(self.module).items() if not k.startswith("_") and k != "training"}
        return {"acc": acc, "cfg": vars(cfg), "d": d, "module": attributes, "G": self.ns["G"], "GD": self.ns["GD"],
                "cells": self.ns["CELLS"]()}


def check_family_program(program: ff.FamilyProgram, sequence: list[ff.FamilyCall], jitted_side=None) -> Outcome:
    """Differences from eager of ``program`` over ``sequence`` under ``cache="symbolic values"``
    (metatrace must be enabled by the caller). ``jitted_side``: a ``_Side`` whose program lives
    elsewhere (an imported module: tools/fuzz_two_process.py), else the program exec'd."""
    import thunder

    from metatrace.testing import reachable_proxies, state_of_call

    outcome, source = Outcome(), program.source()
    eager, jitted = _Side(source, None), _Side(source, "symbolic values") if jitted_side is None else jitted_side
    for i, call in enumerate(sequence):
        outcome.calls += 1
        expected, _ = eager.run(call)
        got, args = jitted.run(call)
        if thunder.cache_misses(jitted.fn) > len(outcome.compiled_calls):
            outcome.compiled_calls.append(i)
        where = f"call {i} ({call}):"
        leaked = reachable_proxies(state_of_call(jitted.fn, args, {}))
        if leaked:
            outcome.differences.append(f"{where} proxies left in {', '.join(leaked)}")
        difference = _difference(expected, got)
        if difference and _excused(got, program, sequence, i):
            difference = None
        if difference:
            outcome.differences.append(f"{where} {difference}")
        if isinstance(expected, Exception) or isinstance(got, Exception):
            break  # a failed call leaves eager's objects half mutated: later calls compare nothing
        if not same_value(expected_state := eager.observed_state(), jitted.observed_state()):
            outcome.differences.append(f"{where} state: eager {_short(expected_state)}, "
                                       f"jitted {_short(jitted.observed_state())}")
            break
    outcome.compiles, outcome.jitted = thunder.cache_misses(jitted.fn), jitted.fn
    if outcome.differences:  # the whole sequence: a later call's difference may need the earlier ones
        outcome.differences.insert(0, f"sequence: {sequence!r}")
    return outcome


def _difference(expected, got) -> str | None:
    if isinstance(expected, Exception):
        if type(got) is type(expected):
            return None
        return f"eager {_short(expected)}, jitted {_short(got)}"
    if isinstance(got, Exception):
        return f"eager {_short(expected)}, jitted {_short(got)}"
    if not same_value(expected, got):
        for j, (e, g) in enumerate(zip(expected, got)):
            if not same_value(e, g):
                return f"result[{j}]: eager {_short(e)}, jitted {_short(g)}"
        return f"result: eager {_short(expected)}, jitted {_short(got)}"
    return None


def _excused(got, program, sequence, i) -> bool:
    """A clear MetatraceError where stock thunder under constant values fails call ``i`` too."""
    import metatrace

    if not isinstance(got, metatrace.MetatraceError):
        return False
    metatrace.disable()
    try:
        source = program.source()
        eager, stock = _Side(source, None), _Side(source, "constant values")
        for call in sequence[: i + 1]:
            expected, _ = eager.run(call)
            result, _ = stock.run(call)
            if _difference(expected, result):
                return True
            if not same_value(eager.observed_state(), stock.observed_state()):
                return True
        return False
    finally:
        metatrace.enable()
