"""Three costs of thunder's interpreter that do not come from the user's program (the caller's
stack, the thread scheduler, decoding bytecode again), removed without changing what thunder
computes or records.

- ``InterpreterRuntimeCtx.__init__`` (once per compile) reads its caller's position with
  ``inspect.stack()[2]``: the full stack, with a source line and a module search per frame. Under
  pytest, Lightning or any deep caller that is 40-50 frames, 23 ms per compile and 15% of a small
  op's compile. thunder's interpreter module gets an ``inspect`` whose ``stack()`` builds each
  record only when it is indexed; the record it builds is the one ``inspect.stack()`` would hold.
- ``InterpreterFrame.get_or_make_python_frame`` (when an exception leaves an interpreted frame)
  starts a thread and spins, holding the GIL, until the thread has made a frame: the thread runs
  only when the interpreter's switch interval (5 ms) forces a hand-off. The wrapper shortens the
  switch interval for that call, so the hand-off takes microseconds; the frame is the same.
- ``_run_frame`` (every call of an interpreted function) decodes the function's bytecode with
  ``dis.get_instructions``: half a million decodings of the same few thousand functions in one
  litgpt compile, 4% of it. The interpreter's ``dis`` keeps each code object's instructions
  (a tuple of immutable ``dis.Instruction``), weakly: a code object that goes takes its entry.
"""

from __future__ import annotations

import dis
import functools
import inspect
import sys
import types
from collections.abc import Sequence

import thunder.core.interpreter as interpreter

from metatrace.interpret.costs.fast_paths import frame_per_location
from metatrace.patching import Patch, attribute
from metatrace.state.process_tables import DECODED_INSTRUCTIONS, HANDOFF


class CallerFrames(Sequence):
    """``inspect.stack(context)`` from ``frame`` outwards, each record built when it is read."""

    def __init__(self, frame: types.FrameType, context: int):
        self._frame = frame
        self._context = context

    def _frames(self):
        frame = self._frame
        while frame is not None:
            yield frame
            frame = frame.f_back

    def __len__(self) -> int:
        return sum(1 for _ in self._frames())

    def __getitem__(self, index):
        if isinstance(index, slice) or index < 0:
            return inspect.getouterframes(self._frame, self._context)[index]
        for i, frame in enumerate(self._frames()):
            if i == index:
                info = inspect.getframeinfo(frame, self._context)
                return inspect.FrameInfo(frame, *info, positions=info.positions)
        raise IndexError("stack index out of range")


def stack(context: int = 1) -> CallerFrames:
    """``inspect.stack`` for thunder's interpreter: the records above the caller's frame, on demand."""
    return CallerFrames(sys._getframe(1), context)


# Code objects compare by content (name, bytecode, constants, line table, ...): equal ones
# decode to equal instructions, positions included.


def get_instructions(x, *, first_line=None, show_caches=False, adaptive=False):
    """``dis.get_instructions``, kept per code object for the interpreter's plain calls."""
    if type(x) is not types.CodeType or first_line is not None or show_caches or adaptive:
        return dis.get_instructions(x, first_line=first_line, show_caches=show_caches, adaptive=adaptive)
    insts = DECODED_INSTRUCTIONS.get(x)
    if insts is None:
        insts = DECODED_INSTRUCTIONS[x] = tuple(dis.get_instructions(x))
    return insts


def _module_with(module: types.ModuleType, **names) -> types.ModuleType:
    # A copy of the module's namespace (every other name read as fast as before) with ``names``.
    copy = types.ModuleType(module.__name__, module.__doc__)
    copy.__dict__.update(module.__dict__)
    copy.__dict__.update(names)
    return copy


# A switch interval short enough that the spinning caller yields the GIL to the frame-making
# thread almost at once (the default, 5 ms, is what each raised exception cost).
_HANDOFF_INTERVAL = 1e-6
# The interval is the process's: the first of concurrent callers sets it, the last puts it back.


def _making_frames(original, reuse: bool):
    """``InterpreterFrame.get_or_make_python_frame``'s one wrapper: (1) with the fast paths, a
    frame made for the same code location before is reused
    (:func:`metatrace.interpret.costs.fast_paths.frame_per_location`); (2) a new one is made with a
    prompt hand-off to thunder's frame-making thread."""
    prompt = _prompt_handoff(original)

    @functools.wraps(original)
    def get_or_make_python_frame(self):
        return frame_per_location(prompt, self) if reuse else prompt(self)

    return get_or_make_python_frame


def _prompt_handoff(original):
    def get_or_make_python_frame(self):
        with HANDOFF.lock:
            if HANDOFF.callers == 0:
                HANDOFF.saved = sys.getswitchinterval()
                sys.setswitchinterval(_HANDOFF_INTERVAL)
            HANDOFF.callers += 1
        try:
            return original(self)
        finally:
            with HANDOFF.lock:
                HANDOFF.callers -= 1
                if HANDOFF.callers == 0:
                    sys.setswitchinterval(HANDOFF.saved)

    return get_or_make_python_frame


def patches(with_fast_paths: bool = True) -> list[Patch]:
    return [
        attribute(interpreter, "inspect", _module_with(inspect, stack=stack),
                  "the interpreter reads one caller record of inspect.stack(): built on demand"),
        attribute(interpreter, "dis", _module_with(dis, get_instructions=get_instructions),
                  "the interpreter decodes a function's bytecode once, not at every call"),
        attribute(interpreter.InterpreterFrame, "get_or_make_python_frame",
                  functools.partial(_making_frames, reuse=with_fast_paths),
                  "an exception's traceback frame is made once per code location (fast paths), and the "
                  "frame-making thread gets the GIL at once, not after the 5 ms switch interval", wrap=True),
    ]
