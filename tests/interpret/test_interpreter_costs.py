"""metatrace.interpret.costs.interpreter_costs: thunder's interpreter records the same caller and makes
the same frames with the lazy stack and the prompt hand-off as without them."""

from __future__ import annotations

import inspect
import sys

import torch

import thunder
import thunder.core.interpreter as interpreter

from metatrace.interpret.costs.interpreter_costs import CallerFrames, stack


def _records(frames, count: int) -> list[tuple]:
    return [(r.frame, r.filename, r.lineno, r.function, r.code_context, r.index, r.positions) for r in frames[:count]]


def _nested(depth: int, fn):
    return fn() if depth == 0 else _nested(depth - 1, fn)


def test_lazy_stack_records_equal_inspect_stack():
    def both():
        # read while the callers are suspended (a record reads its frame's position when built);
        # frame 0 (this one) moves on between the two calls, so the callers' records from index 1
        lazy = stack()
        lazy_records = [_records([lazy[i]], 1) for i in range(1, 9)]
        full = inspect.stack()
        return lazy_records, [_records([full[i]], 1) for i in range(1, 9)]

    lazy_records, full_records = _nested(5, both)
    assert lazy_records == full_records


def test_lazy_stack_has_the_full_stack_length():
    lazy, full = _nested(3, lambda: (stack(), inspect.stack()))
    assert len(lazy) == len(full)


def test_lazy_stack_slices_equal_inspect_stack_slices():
    def both():
        return _records(stack()[1:4], 3), _records(inspect.stack()[1:4], 3)

    lazy_records, full_records = _nested(3, both)
    assert lazy_records == full_records


def test_lazy_stack_index_past_the_outermost_frame_raises_index_error():
    lazy = CallerFrames(sys._getframe(), 1)
    try:
        lazy[len(lazy)]
    except IndexError:
        return
    raise AssertionError("an index past the outermost frame must raise IndexError")


def test_interpreter_records_the_same_callsite_as_inspect_stack(enabled):
    seen = []
    original_init = interpreter.InterpreterRuntimeCtx.__init__

    def spy(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        # the spy is one more frame: thunder's [__init__, fn_, callsite] is [__init__, spy, fn_]
        expected = inspect.stack()[1]  # [spy, fn_, ...]
        seen.append((self._original_callsite, expected))

    interpreter.InterpreterRuntimeCtx.__init__ = spy
    try:
        thunder.jit(lambda x: x + 1, cache="symbolic values")(torch.ones(2))
    finally:
        interpreter.InterpreterRuntimeCtx.__init__ = original_init
    (got, expected), = seen
    assert _records([got], 1) == _records([expected], 1)


def _raises():
    raise KeyError("from an interpreted frame")


def test_exception_leaving_an_interpreted_frame_keeps_values_and_switch_interval(enabled):
    def fn(x):
        caught = 0
        for _ in range(3):
            try:
                _raises()
            except KeyError:
                caught += 1
        return x * caught

    interval = sys.getswitchinterval()
    out = thunder.jit(fn, cache="symbolic values")(torch.arange(4.0))
    assert torch.equal(out, fn(torch.arange(4.0)))
    assert sys.getswitchinterval() == interval


def test_user_traceback_through_interpreted_frames_names_the_raising_line(enabled):
    def fn(x):
        _raises()
        return x

    try:
        thunder.jit(fn, cache="symbolic values")(torch.ones(2))
    except KeyError as e:
        names = [(f.name, f.lineno) for f in __import__("traceback").extract_tb(e.__traceback__)]
    else:
        raise AssertionError("the jitted function must raise the user's KeyError")
    assert ("_raises", _raises.__code__.co_firstlineno + 1) in names


def test_decoded_instructions_equal_dis_and_are_decoded_once():
    from metatrace.interpret.costs.interpreter_costs import get_instructions

    code = _nested.__code__
    first = get_instructions(code)
    assert first == tuple(__import__("dis").get_instructions(code))
    assert get_instructions(code) is first


def test_decoded_instructions_leave_with_their_code_object():
    import gc
    import weakref

    from metatrace.interpret.costs import interpreter_costs
    from metatrace.state import process_tables

    namespace = {}
    exec("def transient(x):\n    return x + 1\n", namespace)
    code = namespace.pop("transient").__code__
    interpreter_costs.get_instructions(code)
    assert code in process_tables.DECODED_INSTRUCTIONS
    # (the table's size is no measure: other code objects may be collected at the same time, so
    # the test follows this code object itself)
    gone = weakref.ref(code)
    del code
    gc.collect()
    assert gone() is None
