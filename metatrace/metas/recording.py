"""The meta that thunder calls for a ported prim: the rewritten meta with a recorder around it.

thunder runs a prim's meta with the trace scope switched off (``Symbol.__call__`` pushes ``None``).
The recorder is the scope below it, the list the prim's own bound symbol will be appended to, so
recorded shape arithmetic lands just before the prim that needed it. A prim called inside another
prim's meta records into the outer prim's recorder.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from thunder.core.compile_data import using_symbolic_values
from thunder.core.langctxs import Languages, langctx
from thunder.core.proxies import TensorProxy
from thunder.core.trace import get_tracectx

from thunder.core.proxies import IntegerProxy, NumberProxy, Proxy
from thunder.core.pytree import tree_iter

from metatrace.state import compile_context
from metatrace.state.compile_context import RECORDING_FRAME, RECORDING_SUSPENDED
from metatrace.metas import concretizations, unbacked
from metatrace.metas.proxy_edits import set_shape
from metatrace.metas.record_state import RecordingFrame, current_recorder, recording_frame


def caller_scope(trace) -> list | None:
    for scope in reversed(trace.scopes):
        if scope is not None:
            return scope
    return None


def _has_tensor(args, kwargs) -> bool:
    for x in (*args, *kwargs.values()):
        if isinstance(x, TensorProxy):
            return True
        if isinstance(x, (list, tuple)) and any(isinstance(y, TensorProxy) for y in x):
            return True
    return False


# Scopes longer than this are not scanned for sizes already bound (a duplicate binding is
# harmless; scanning a long top-level scope per meta call would not be).
_SCAN_LIMIT = 4096


class SizeSources:
    """For ``record_state.bind_sizes``: which tensor argument each size symbol of the running meta's
    inputs belongs to, and the names the recorder's scope already defines. Both are computed on
    first need: most metas record nothing on sizes, and a compile runs thousands of metas."""

    __slots__ = ("_args", "_by_size", "_recorder", "_bound")

    def __init__(self, recorder: list, args):
        self._args = args
        self._by_size: dict | None = None
        self._recorder = recorder
        self._bound: set | None = None

    @property
    def by_size(self) -> dict:
        if self._by_size is None:
            by_size = {}
            for t in tree_iter(self._args):
                if isinstance(t, TensorProxy):
                    for s in t._shape:
                        if isinstance(s, NumberProxy):
                            by_size.setdefault(s.name, t)
            self._by_size = by_size
        return self._by_size

    @property
    def bound(self) -> set:
        if self._bound is None:
            recorder = self._recorder
            self._bound = {o.name for b in recorder for o in b.flat_proxy_outs} if len(recorder) < _SCAN_LIMIT else set()
        return self._bound


def _needed_names(result) -> set[str]:
    needed = set()
    for p in tree_iter(result):
        if isinstance(p, Proxy):
            needed.add(p.name)
            if isinstance(p, TensorProxy):
                needed.update(s.name for s in p._shape if isinstance(s, Proxy))
    return needed


def prune_unused(recorder: list, recorded: list, result) -> None:
    """Removes the ops this meta recorded that its result does not depend on (intermediate
    values of folded formulas, operands of comparisons that only fed a check)."""
    if not recorded:
        return
    needed = _needed_names(result)
    dead = set()
    for bsym in reversed(recorded):
        if any(p.name in needed for p in bsym.flat_proxy_outs):
            needed.update(p.name for p in bsym.flat_proxy_args)
        else:
            dead.add(id(bsym))
    if dead:
        recorder[:] = [b for b in recorder if id(b) not in dead]
        recorded[:] = [b for b in recorded if id(b) not in dead]


# Test hook: called as observer(prim_name, original, args, kwargs, result, error) after every
# rewritten meta (see metatrace.testing). None in normal use.
OBSERVER: Callable | None = None
# (while it re-runs an original meta, compile_context.RECORDING_SUSPENDED: nothing is recorded)


def recording_meta(rewritten: Callable, original: Callable, prim_name: str) -> Callable:
    """The Symbol.meta to install: ``original``'s signature, ``rewritten``'s body, recording on."""

    @functools.wraps(original)
    def meta(*args, **kwargs):
        if OBSERVER is not None and not RECORDING_SUSPENDED.get():
            return _observed(prim_name, original, args, kwargs)
        return _run(args, kwargs)

    def _observed(name, original, args, kwargs):
        try:
            result = _run(args, kwargs)
        except Exception as e:
            OBSERVER(name, original, args, kwargs, None, e)
            raise
        OBSERVER(name, original, args, kwargs, result, None)
        return result

    number_op = _NUMBER_OPS.get(prim_name)

    def _run(args, kwargs):
        if prim_name == "CONVERT_ELEMENT_TYPE" and args and isinstance(args[0], NumberProxy) and args[0].value is None:
            # a number read from tensor data (``float(n)`` of a data-dependent size): no value to convert
            return unbacked.converted(*args, **kwargs)
        result = run_recording(rewritten, args, kwargs)
        if number_op is not None and isinstance(result, IntegerProxy) and result.value is None:
            # the elementwise meta's number with no value (``u * C`` of a size read from data, thunder's
            # numel): a size too where the operands are (unbacked.tag_of)
            result.tags.update(unbacked.tag_of(number_op, *args) or ())
        return result

    return langctx(Languages.PRIMS)(meta)


# prims whose number result of unbacked sizes is an unbacked size (unbacked.tag_of's op names)
_NUMBER_OPS = {"ADD": "add", "MUL": "mul"}


def run_recording(meta: Callable, args, kwargs):
    """Runs ``meta`` with its arithmetic on symbolic numbers recorded in the prim caller's scope."""
    outer = RECORDING_FRAME.get()
    recorder = None if outer is None else outer.recorder
    if RECORDING_SUSPENDED.get():
        recorder = None
    elif recorder is None and compile_context.interpreting() and using_symbolic_values():
        trace = get_tracectx()
        if trace is not None:
            recorder = caller_scope(trace)
    if recorder is None:
        # Not recording (no symbolic values, no trace, or an observer's re-run): make sure an
        # enclosing meta's recorder does not leak in either.
        with recording_frame(None):
            return meta(*args, **kwargs)
    frame = RecordingFrame(recorder, SizeSources(recorder, (args, kwargs)), not _has_tensor(args, kwargs), [])
    with recording_frame(frame):
        result = meta(*args, **kwargs)
    prune_unused(recorder, frame.recorded, result)
    if outer is not None:  # an outer meta may still prune them
        outer.recorded.extend(b for b in frame.recorded if b is not None)
    return result


def executor_meta(original: Callable) -> Callable:
    """The Symbol.meta for an executor's own opaque symbol (torchex's ``max_pool2d_with_indices``,
    sdpaex's attention): thunder's meta, unrewritten, whose Python arithmetic on symbolic numbers
    (``(in_ + 2 * pad_ - ...) // stride_``) the safety net routes through the runtime while a
    recorder is set, so the output sizes it computes have producers like a ported prim's."""

    @functools.wraps(original)
    def meta(*args, **kwargs):
        if RECORDING_SUSPENDED.get() or not compile_context.interpreting() or not using_symbolic_values():
            return original(*args, **kwargs)
        return run_recording(original, args, kwargs)

    return meta


def fallback_meta(original: Callable, prim_name: str) -> Callable:
    """The Symbol.meta for a prim the codegen could not port: thunder's original meta, made safe.

    Every symbolic number it receives and every size of its tensor inputs is reported as baked in
    (equality guards), and the sizes of its tensor outputs become plain integers: they are
    constants for the cache entry, and the trace has no size symbol without a producer.
    """

    @functools.wraps(original)
    def meta(*args, **kwargs):
        if not (using_symbolic_values() and get_tracectx() is not None):
            return original(*args, **kwargs)
        why = f"input of fallback prim {prim_name}"
        for x in tree_iter((args, kwargs)):
            if isinstance(x, NumberProxy):
                concretizations.bake_in(x, x.value, why)
            elif isinstance(x, TensorProxy):
                for s in x._shape:
                    if isinstance(s, NumberProxy):
                        concretizations.bake_in(s, s.value, why)
        result = original(*args, **kwargs)
        for out in tree_iter(result):
            if isinstance(out, TensorProxy):
                set_shape(out, (s.value if isinstance(s, NumberProxy) else s for s in out._shape))
        return result

    return langctx(Languages.PRIMS)(meta)
