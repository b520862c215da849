"""Guards for what the grad transform concretizes.

thunder builds the prologue before the grad transform runs, and autograd rules concretize
(``_slice_prim_grad`` does ``tree_map(int, padding)``), so a reused entry could run a backward
built for other sizes. When a trace may be differentiated (a tensor input requires grad), the
prologue gets a *deferred* guard program over every input number and size. It checks nothing
until the grad transform has run; the concretizations made during the transform then fill it:
projected to the inputs when their producers are known, else pinning every input number and
size to its value. Correct, if with less reuse than the forward's own guards.
"""

from __future__ import annotations

from metatrace.guards.collect import GuardCollector
from metatrace.guards.compiled_program import GuardProgram
from metatrace.guards.grad_program import PendingGradProgram
from metatrace.guards.program_builder import ProgramScope, build_program, pin_program
from metatrace.guards.projection import producer_map
from metatrace.state.registry import fill_program


def fill_grad_program(pending: PendingGradProgram, collector: GuardCollector, traces) -> None:
    """The reserved program now checks what the grad transform's rules decided (``collector``)."""
    if collector.guards:
        fill_program(pending.program_id, _program(pending, collector, traces))


def _program(pending: PendingGradProgram, collector: GuardCollector, traces) -> GuardProgram:
    """The reserved program, filled by the one builder (metatrace.guards.program_builder) over every
    input number and size, named as the computation trace names them; a guard no expression of
    them states pins them all (only identical inputs reuse this backward)."""
    producers: dict = {}
    for t in traces:
        for name, bsym in producer_map(t, collector).items():
            producers.setdefault(name, bsym)
    scope = ProgramScope(pending.leaves, frozenset(pending.sizes), dict(zip(pending.renamed, pending.shown)),
                         leaf_names=pending.renamed, reserved=True, suffix=" (grad transform)",
                         skip=pending.forward_texts)
    built = build_program(pending.program_id, collector, producers, scope)
    if built.pin_all is not None:
        return pin_program(pending.program_id, scope, f"pinned by the grad transform: {built.pin_all}")
    return built.program
