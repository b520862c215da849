"""Wraps thunder's passes after interpretation so that every trace keeps its size symbols
defined; its ``patches()`` rows put the wrappers in place.

- ``dce`` and ``split_into_forward_and_backward`` get back the producers of sizes they dropped
  (``restore_producers``: dead-code elimination keeps a bound symbol only if an *argument* of a
  kept one uses its output, and the split puts a number op in the forward only if the forward
  uses its output as an argument, while a size symbol is often used only inside a tensor's shape).
  Before the split, ``shape`` bindings stop re-binding sizes bound already (``rebindings``): the
  split takes a bound symbol outputting a name the forward needs as forward, backward or not.
- executor passes (``transform_for_execution``) call the executors' symbols again, which reruns
  the metas: with recording off they made fresh, undefined sizes (``t154: f32[i118, ...]``).
  Recording stays on through them, so those sizes are computed (or folded to existing symbols)
  in the execution trace too.
- those passes (thunder's ``TraceSubstitutionProcessor``s) also re-run the number ops, whose new
  outputs replace the old ones in arguments but not inside tensor shapes: after each processor,
  ``keep_size_names`` gives re-run number ops their old proxies back and renames sizes whose
  definition is really gone, through copies where an earlier trace holds the same tensor.
- (``hoist_size_producers``, which moves producers a grad rule put after the tensor whose size
  they define, runs in the grad transform's one wrapper, ``passes.grad_transform``.)

Each pass is linear in the trace's length: one walk to index it, one to rebuild it.

thunder imports ``dce`` by name in several modules; each binding gets its row.
"""

from __future__ import annotations

import functools
import sys

import thunder.core.transform_common as transform_common
import thunder.executors.passes as passes
import thunder.transforms.autodiff as autodiff
from thunder.core.compile_data import using_symbolic_values
from thunder.core.trace_interpreter import TraceSubstitutionProcessor

from metatrace.gc_pacing import paced
from metatrace.grad.repeated_outputs import cotangents_of_every_position
from metatrace.grad.saved_values import clone_overwritten_saved
from metatrace.state.compile_context import compile_step
from metatrace.passes.keep_size_names import keep_size_names
from metatrace.passes.wait_sorting import run_only_for_wait_sorting
from metatrace.passes.rebindings import without_rebindings
from metatrace.passes.restore_producers import restore_size_producers
from metatrace.patching import Patch, attribute


def _dce(original):
    @functools.wraps(original)
    def dce(trace, needed_proxies=None):
        result = original(trace, needed_proxies)
        if not using_symbolic_values():
            return result
        return restore_size_producers(trace, result)

    return dce


def _split_into_forward_and_backward(original):
    """The forward/backward split's one wrapper, in steps:

    1. the collector paced (``gc_pacing``: the split allocates in bulk);
    2. an output returned at several positions gets the gradient of each
       (``grad.repeated_outputs``: PyTorch fills only the last position's);
    3. under symbolic values, ``shape`` bindings stop re-binding sizes bound already
       (``without_rebindings``: a binding that re-binds a forward name would pull its backward
       tensor into the forward);
    4. thunder's split;
    5. saved tensors that a later in-place write overwrites are cloned (``grad.saved_values``);
    6. under symbolic values, the producers of sizes the forward dropped come back
       (``restore_size_producers``).
    """

    @functools.wraps(original)
    def split_into_forward_and_backward(joint_trace):
        with paced():
            joint_trace = cotangents_of_every_position(joint_trace)
            symbolic = using_symbolic_values()
            if symbolic:
                joint_trace = without_rebindings(joint_trace)
            forward, backward = original(joint_trace)
            if backward is not None:
                forward = clone_overwritten_saved(forward)
            if symbolic:
                forward = restore_size_producers(joint_trace, forward)
            return forward, backward

    return split_into_forward_and_backward


def _recording(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not using_symbolic_values():
            return fn(*args, **kwargs)
        with compile_step(collect=False, functional=True):
            return fn(*args, **kwargs)

    return wrapper


def _operator_pass(original):
    """The operator-executor pass's one wrapper, its steps in order:

    1. thunder's run only for sorting distributed waits, on a trace without any, returns the
       trace (``passes.wait_sorting``: thunder discards that run's result);
    2. the collector paced (``gc_pacing``);
    3. under symbolic values, metas recording through it (:func:`_recording`)."""
    recording = _recording(original)

    @functools.wraps(original)
    def operator_pass(trace, *args, **kwargs):
        if run_only_for_wait_sorting(trace):
            return trace
        with paced():
            return recording(trace, *args, **kwargs)

    return operator_pass


def _processor_call(original):
    @functools.wraps(original)
    def processor_call(self):
        result = original(self)
        if using_symbolic_values() and self.swap_map:
            keep_size_names(self)
        return result

    return processor_call


_PASSES_WHY = "executor passes and the forward/backward split keep (and re-bind) size producers"


def patches() -> list[Patch]:
    """One wrapper per pass, bound wherever a thunder module imported it (``from ... import dce``)."""
    wrappers = {
        id(original): wrap(original)
        for original, wrap in (
            (transform_common.dce, _dce),
            (passes.transform_for_execution, _recording),
            (passes._transform_for_operator_executor_execution, _operator_pass),
            (autodiff.split_into_forward_and_backward, _split_into_forward_and_backward),
        )
    }
    rows = [attribute(TraceSubstitutionProcessor, "__call__", _processor_call, "as the passes", wrap=True)]
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "thunder" or name.startswith("thunder.")):
            continue
        for attr in ("dce", "transform_for_execution", "_transform_for_operator_executor_execution",
                     "split_into_forward_and_backward"):
            value = module.__dict__.get(attr)
            if value is not None and id(value) in wrappers:
                rows.append(attribute(module, attr, wrappers[id(value)], _PASSES_WHY))
    return rows
