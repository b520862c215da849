"""metatrace.interpret.costs.fast_paths: thunder's interpreter reads globals, builtins and items of plain
containers directly, and makes one traceback frame per code location; what it records does not
change. Each workload is compiled with and without the fast paths (``enable(fast_paths=False)``)
and the prologue, computation and backward traces, the guard programs and explain()'s guards
are compared as text."""

from __future__ import annotations

import collections
import dis
import re
import traceback

import pytest
import thunder
import torch
from thunder.core.interpreter import InterpreterFrame

import metatrace
from metatrace.state.registry import PROGRAMS

SCALES = {"a": 2.0, "b": 3.0}
OFFSETS = [1.0, 2.0, 3.0]
PAIR = (4, 5)
# ChainMap.__getitem__ (the standard library) raises KeyError in its first map and catches it:
# an exception leaving an interpreted frame of library code.
SETTINGS = collections.ChainMap({"scale": 2.0}, {"shift": 1.0, "scale": 9.0})


def globals_builtins_and_exceptions(x):
    shift = SETTINGS["shift"]
    y = x * SCALES["a"] + OFFSETS[-1] + PAIR[0] + len(OFFSETS)
    if "a" in SCALES and "z" not in SCALES:
        y = y * 2
    return y[: PAIR[1] - 3] + shift + sum(OFFSETS[1:])


def argument_containers(batch, sizes, pair):
    x = batch["x"] * batch["n"] if "n" in batch else batch["x"]
    y = x.reshape(sizes[0], -1) + pair[1]
    return y.sum(pair[0]) + len(sizes) + sizes[-1]


def missing_key(x):
    return x + SCALES["missing"]


def _normalized(text: str, ids: dict) -> str:
    """Trace text without what differs between two compiles of one function: timings, and the
    registry ids of guard programs and checks (``'g12'``), renumbered in order of appearance."""
    text = re.sub(r"took \d+ milliseconds", "took N milliseconds", re.sub(r"0x[0-9a-f]+", "0x", text))
    return re.sub(r"'([gsvr])(\d+)'", lambda m: f"'{m.group(1)}#{ids.setdefault(m.group(0), len(ids))}'", text)


def _record(jitted) -> list[str]:
    """The prologue, computation and backward traces, guard programs and explained guards."""
    ids: dict = {}
    texts = [_normalized(str(t), ids) for t in thunder.last_prologue_traces(jitted)]
    texts += [_normalized(str(t), ids) for t in thunder.last_traces(jitted)]
    texts += [_normalized(str(t), ids) for t in thunder.last_backward_traces(jitted) or []]
    for bsym in thunder.last_prologue_traces(jitted)[-1].bound_symbols:
        if bsym.sym.name == "metatrace_guards":
            program = PROGRAMS[bsym.args[0]]
            texts += [program.source, "\n".join(program.texts)]
    texts += ["\n".join(g for entry in metatrace.explain(jitted, verbose=True) for g in entry.guards)]
    return texts


def _compiled(fn, step, fast_paths: bool) -> list[str]:
    with metatrace.enable(fast_paths=fast_paths):
        jitted = thunder.jit(fn, cache="symbolic values")
        step(jitted)
        return _record(jitted)


def _same_records(fn, step) -> tuple[list[str], list[str]]:
    return _compiled(fn, step, True), _compiled(fn, step, False)


def test_globals_builtins_and_exceptions_record_the_same():
    x = torch.randn(4, 3)
    fast, slow = _same_records(globals_builtins_and_exceptions, lambda jf: jf(x))
    assert fast == slow


def test_argument_containers_record_the_same():
    batch = {"x": torch.randn(2, 6), "n": 3}
    fast, slow = _same_records(argument_containers, lambda jf: jf(batch, [3, 4], (1, 2)))
    assert fast == slow


def test_a_global_item_is_read_without_interpreting_thunders_helpers():
    def helper_calls(fast_paths: bool) -> int:
        with metatrace.enable(fast_paths=fast_paths):
            options = thunder.DebugOptions(record_interpreter_history=True)
            jitted = thunder.jit(globals_builtins_and_exceptions, cache="symbolic values", debug_options=options)
            jitted(torch.randn(4, 3))
            return sum(1 for item in thunder.last_interpreter_log(jitted)
                       if isinstance(item, dict) and item.get("kind") == "InterpreterCall"
                       and "getitem_impl" in str(item.get("fn")))

    assert helper_calls(True) < helper_calls(False)


def test_a_raised_exception_has_the_same_traceback():
    def raised(fast_paths: bool) -> list[str]:
        with metatrace.enable(fast_paths=fast_paths):
            jitted = thunder.jit(missing_key, cache="symbolic values")
            with pytest.raises(KeyError) as info:
                jitted(torch.randn(2))
            return traceback.format_exception(info.value)

    assert raised(True) == raised(False)


def test_one_python_frame_per_code_location():
    code = missing_key.__code__
    positions = dis.Positions(*next(iter(code.co_positions())))

    def frame() -> InterpreterFrame:
        return InterpreterFrame(code=code, qualname=code.co_qualname, module=__name__, globals=globals(), names={},
                                positions=positions, _locals={})

    with metatrace.enable():
        first, second = frame().get_or_make_python_frame(), frame().get_or_make_python_frame()
    assert first is second


def _hf_llama_forward():
    from hf_workloads import build, ids

    model = build("llama")
    x = ids(16, 0)

    def step(jitted):
        with torch.no_grad():
            jitted(input_ids=x)

    return model, step


def _litgpt_training_step():
    from litgpt_workloads import build, training_input, training_step

    model = build("llama2-like")
    idx = training_input(model, 16)
    return model, lambda jitted: training_step(jitted, model, idx)


@pytest.mark.slow
@pytest.mark.parametrize("workload", [_hf_llama_forward, _litgpt_training_step], ids=["hf-llama", "litgpt"])
def test_models_record_the_same(workload):
    model, step = workload()
    fast, slow = _same_records(model, step)
    assert fast == slow


def test_the_comparison_sees_a_fast_path_that_loses_provenance(monkeypatch):
    """The records above can differ: a direct subscript that hands back a number item as a constant
    (losing its ``BINARY_SUBSCR`` provenance from the argument: ``batch["n"]`` baked in, unchecked,
    a silently wrong entry) changes what the compile records."""
    import metatrace.interpret.costs.fast_paths as fast_paths
    from thunder.core.interpreter import wrap_const

    subscript = fast_paths._subscript

    def losing_number_provenance(lookaside, container, key):
        item = container.value[key.value]
        return wrap_const(item) if type(item) is int else subscript(lookaside, container, key)

    monkeypatch.setattr(fast_paths, "_subscript", losing_number_provenance)
    batch = {"x": torch.randn(2, 6), "n": 3}
    fast = _compiled(argument_containers, lambda jf: jf(batch, [3, 4], (1, 2)), True)
    monkeypatch.undo()
    slow = _compiled(argument_containers, lambda jf: jf(batch, [3, 4], (1, 2)), False)
    assert fast != slow
