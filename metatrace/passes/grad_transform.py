"""The one wrapper of thunder's grad transform (``autodiff.grad_transform_on_trace``): its steps,
in the order they run.

1. The collector is paced for the phase (``metatrace.gc_pacing.paced``: thunder's transform makes
   cyclic garbage in bulk).
2. An argument written in place with a tensor that requires grad raises a clear error
   (``grad.written_inputs``: thunder cannot give the caller's tensor a grad_fn).
3. The guard program the prologue reserved for this compile's grad transform is taken
   (``guards.grad_program``; None when no tensor input requires grad).
4. thunder's transform runs as a functional compile step whose concretizations (autograd rules
   that read sizes) go to the reserved program's collector (after those of the steps before it:
   ``passes.view_writes``).
5. They fill the reserved program (``grad.deferred_guards``): a reused entry's backward was
   built for sizes that pass them.
6. A composite the transform bound without tracing it (zeros for an intermediate no rule sent a
   gradient to) is traced, within the same step (``grad.untraced_composites``: passes after it
   drop a composite without subsymbols from a fusion region).
7. An input gradient no output's cotangent reaches is None, as in eager
   (``grad.unreached_inputs``: the zeros above reached the inputs of a detached path).
8. A forward tensor the backward reads that a later in-place write overwrites is cloned where it
   is defined, before the executor passes can fuse the write with its definition
   (``grad.saved_values``).
9. Size producers a grad rule recorded late move up to before their first use
   (``passes.hoist_producers``).
"""

from __future__ import annotations

import functools

import thunder.transforms.autodiff as autodiff
from thunder.core.compile_data import using_symbolic_values

from metatrace.gc_pacing import paced
from metatrace.grad.deferred_guards import fill_grad_program
from metatrace.grad.saved_values import clone_overwritten_backward_reads
from metatrace.grad.unreached_inputs import without_unreached_gradients
from metatrace.grad.untraced_composites import with_traced_composites
from metatrace.grad.written_inputs import check_written_inputs
from metatrace.guards.grad_program import take_pending_grad_program
from metatrace.state.compile_context import compile_step
from metatrace.passes.hoist_producers import hoist_size_producers
from metatrace.patching import Patch, attribute


def _grad_transform_on_trace(original):
    @functools.wraps(original)
    def grad_transform_on_trace(trace, /, *args, **kwargs):
        with paced():
            check_written_inputs(trace)
            pending = take_pending_grad_program()
            if pending is None:
                result = with_traced_composites(original(trace, *args, **kwargs))
            else:
                collector = pending.collector
                with compile_step(collector, functional=True):
                    result = with_traced_composites(original(trace, *args, **kwargs))
                fill_grad_program(pending, collector, [trace, result])
            result = clone_overwritten_backward_reads(without_unreached_gradients(result))
            return hoist_size_producers(result) if using_symbolic_values() else result

    return grad_transform_on_trace


def patches() -> list[Patch]:
    return [attribute(autodiff, "grad_transform_on_trace", _grad_transform_on_trace,
                      "the grad transform paced, its decisions guarded, its late size producers moved up",
                      wrap=True)]
