"""Where the ops a rewritten meta records go, and the one function that records a number op.

Two pieces of context (declared in ``metatrace.state.compile_context``) decide what happens:

- the recording frame (:class:`RecordingFrame`, :func:`recording_frame`) of the rewritten meta
  running: the scope its ops go to, the sizes it may bind, whether it only propagates values, and
  the ops it recorded (metatrace.metas.recording, around each meta call);
- the compile step (``compile_context.compile_step``): metas may record, and concretizations go
  to the step's guard collector (metatrace.interpret.jit_hooks while thunder interprets the function,
  the grad transform, the executor passes).
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Number
from typing import Any

import thunder.core.prims as prims
from thunder.core.proxies import FloatProxy, IntegerProxy, NumberProxy, numberproxy
from thunder.core.utils import resolve_constraints

from metatrace.state import compile_context
from metatrace.state.compile_context import RECORDING_FRAME
from metatrace.metas import concretizations, unbacked

@dataclass(slots=True)
class RecordingFrame:
    """The rewritten meta running and what it records.

    ``recorder``: the list of bound symbols recorded ops go to, the scope of the caller of the
    prim whose meta runs; ``sizes``: size symbol name -> the meta's tensor argument it is a size
    of, and the names already bound in the recorder's scope (``recording.SizeSources``, see
    :func:`bind_sizes`); ``value_propagation``: the prim received no tensor, so its meta reads
    input values only to compute its (recorded) output number, which is not a decision;
    ``recorded``: the bound symbols this meta recorded (``recording.prune_unused``)."""

    recorder: list
    sizes: Any = None
    value_propagation: bool = False
    recorded: list = None

    def __post_init__(self):
        if self.recorded is None:
            self.recorded = []


def current_recorder() -> list | None:
    """The scope recorded ops go to, or None when nothing records."""
    frame = RECORDING_FRAME.get()
    return None if frame is None else frame.recorder


def value_propagation() -> bool:
    frame = RECORDING_FRAME.get()
    return frame is not None and frame.value_propagation


def recording_frame(frame: RecordingFrame | None):
    """``frame`` is the running meta's for the block (None: a meta that records nothing, so an
    enclosing meta's recorder does not leak into it)."""
    return RECORDING_FRAME.set_to(frame)


def bind_sizes(recorder: list, args) -> None:
    """thunder binds a tensor's sizes with ``prims.shape`` before computing with them (its trace
    check requires it in every scope): the first recorded use of an argument's size does too."""
    frame = RECORDING_FRAME.get()
    sources = None if frame is None else frame.sizes
    if sources is None:
        return
    by_size = sources.by_size
    for a in args:
        if isinstance(a, NumberProxy) and (t := by_size.get(a.name)) is not None and a.name not in sources.bound:
            recorder.append(prims.shape.bind(t, output=t._shape))
            sources.bound.update(s.name for s in t._shape if isinstance(s, NumberProxy))


def record(sym, value: Number | None, *args: Any, python_type: type | None = None, tags: set | None = None) -> NumberProxy:
    """Appends ``sym(*args)`` with output value ``value`` to the recorder's scope (binding the
    sizes it reads first) and returns its output, a new symbolic number. ``value`` None: an
    operand was read from tensor data; the output is a ``python_type`` with no value and ``tags``."""
    frame = RECORDING_FRAME.get()
    recorder = frame.recorder
    bind_sizes(recorder, args)
    if value is None:
        cls = IntegerProxy if python_type in (int, bool) else FloatProxy
        out = cls(value=None, constraint=resolve_constraints(*args), tags=tags)
        unbacked.remember_op(sym.name, args, out)
    else:
        out = numberproxy(type(value), value, constraint=resolve_constraints(*args))
    bsym = sym.bind(*args, output=out)
    recorder.append(bsym)
    frame.recorded.append(bsym)
    concretizations.produced(bsym)
    return out


def functional_trace() -> bool:
    """Metas run on a trace in which a proxy is one value wherever it appears: a functional compile
    step, or no compile step (thunder's check_trace re-running the metas of a finished trace)."""
    current = compile_context.step()
    return current.functional or not current.interpreting
