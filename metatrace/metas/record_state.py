"""Where the ops a rewritten meta records go, and the one function that records a number op.

The state is context variables, set by metatrace.metas.recording around each meta call and by the
compile stages that let metas record (metatrace.interpret.jit, the grad transform, the executor
passes); each is reset by whoever set it, so nothing outlives a compile.
"""

from __future__ import annotations

from contextvars import ContextVar
from numbers import Number
from typing import Any

import thunder.core.prims as prims
from thunder.core.proxies import NumberProxy, numberproxy
from thunder.core.utils import resolve_constraints

from metatrace.metas import concretizations

# The list of bound symbols that recorded ops go to: the scope of the caller of the prim whose
# rewritten meta is running. None: record nothing, behave like thunder.
RECORDER: ContextVar[list | None] = ContextVar("metatrace_recorder", default=None)
# True while a prim that received no tensor runs: its meta reads input values only to compute the
# value of its (recorded) output number, which is value propagation, not a decision.
VALUE_PROPAGATION: ContextVar[bool] = ContextVar("metatrace_value_propagation", default=False)

# Size symbol name -> the running meta's tensor argument it is a size of, and the names already
# bound in the recorder's scope (see bind_sizes). Set by metatrace.metas.recording per meta call.
SIZE_SOURCES: ContextVar[Any] = ContextVar("metatrace_size_sources", default=None)  # recording.SizeSources


def bind_sizes(recorder: list, args) -> None:
    """thunder binds a tensor's sizes with ``prims.shape`` before computing with them (its trace
    check requires it in every scope): the first recorded use of an argument's size does too."""
    sources = SIZE_SOURCES.get()
    if sources is None:
        return
    by_size = sources.by_size
    for a in args:
        if isinstance(a, NumberProxy) and (t := by_size.get(a.name)) is not None and a.name not in sources.bound:
            recorder.append(prims.shape.bind(t, output=t._shape))
            sources.bound.update(s.name for s in t._shape if isinstance(s, NumberProxy))


def record(sym, value: Number, *args: Any) -> NumberProxy:
    """Appends ``sym(*args)`` with output value ``value`` to the recorder's scope (binding the
    sizes it reads first) and returns its output, a new symbolic number."""
    recorder = RECORDER.get()
    bind_sizes(recorder, args)
    out = numberproxy(type(value), value, constraint=resolve_constraints(*args))
    bsym = sym.bind(*args, output=out)
    recorder.append(bsym)
    if (recorded := RECORDED.get()) is not None:
        recorded.append(bsym)
    concretizations.produced(bsym)
    return out


# True while metas may record: while thunder interprets the jitted function (metatrace.interpret.jit),
# and through the grad transform and the executor passes (metatrace.grad.deferred_guards,
# metatrace.passes.size_producers), so every trace's sizes have producers. False elsewhere (a meta run
# outside a jit compile records nothing).
INTERPRETING: ContextVar[bool] = ContextVar("metatrace_interpreting", default=False)

# The bound symbols recorded by the running meta (see recording.prune_unused).
# None outside a recording meta (a shared default list would grow with every compile).
RECORDED: ContextVar[list | None] = ContextVar("metatrace_recorded", default=None)
