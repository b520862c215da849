"""The guard program the prologue reserves for the grad transform, and the record that carries
it from the prologue to the transform.

thunder builds the prologue before the grad transform runs (``metatrace.grad.deferred_guards``
fills the program once it has). While the prologue is built, :func:`reserve_grad_program` adds
an empty program over every input number and size to it and keeps a :class:`PendingGradProgram`
for the compile; :func:`take_pending_grad_program` hands it to the grad transform once.

Lifetime: the record is keyed weakly by thunder's ``CompileStats`` of the compile (one per
``thunder.jit``'d function, alive as long as that function), replaced by the next compile's
reservation and removed when taken: no attribute of metatrace's on thunder's objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from thunder.core.proxies import NumberProxy, TensorProxy

from metatrace.guards.collect import GuardCollector
from metatrace.guards.compiled_program import GuardProgram, ProgramConstraint, input_sizes_and_numbers
from metatrace.state.registry import PROGRAMS, function_record, new_id


@dataclass(frozen=True)
class PendingGradProgram:
    """What the grad transform needs to fill the program the prologue checks."""

    program_id: str
    leaves: list  # the interpreter's proxies of the input numbers and sizes, in the program's order
    renamed: list[str]  # their names in the computation trace (the interpreter's i3 becomes i)
    shown: list[str]  # their names in guard texts (``x.shape[0]``)
    sizes: set[str]  # the renamed names that are tensor sizes (known >= 0)
    forward_texts: frozenset[str]  # plain texts of the guards the forward's program checks (not checked twice)
    # what the steps between the prologue and the grad transform decide goes here too
    # (``passes.view_writes``), then the transform's own decisions
    collector: GuardCollector = field(default_factory=GuardCollector)


def reserve_grad_program(ctx, inputs, names: dict[str, str], display: dict[str, str], forward_texts=()) -> None:
    """Called while the prologue is built: when a tensor input requires grad, reserve a guard
    program for the grad transform (empty until it has run) and keep what it needs."""
    if not any(isinstance(v.proxy, TensorProxy) and v.proxy.requires_grad for v in inputs):
        return
    record = function_record()
    if record is None:
        return
    leaves = input_sizes_and_numbers(inputs)
    if not leaves:
        return
    program_id = new_id("g")
    renamed = [names.get(p.name, p.name) for p in leaves]
    PROGRAMS[program_id] = GuardProgram.accepting_all(program_id, leaves)
    size_names = {s.name for v in inputs if isinstance(v.proxy, TensorProxy) for s in v.proxy._shape
                  if isinstance(s, NumberProxy)}
    record.pending_grad = PendingGradProgram(
        program_id,
        leaves,
        renamed,
        [display.get(p.name, p.name) for p in leaves],
        {name for p, name in zip(leaves, renamed) if p.name in size_names},
        frozenset(forward_texts),
    )
    ctx.add_constraint((ProgramConstraint(program_id), *leaves))


def pending_grad_program() -> PendingGradProgram | None:
    """The reservation of the compile running, left in place for the grad transform."""
    record = function_record()
    return record.pending_grad if record is not None else None


def take_pending_grad_program() -> PendingGradProgram | None:
    """The reservation of the compile running (once: a second grad transform gets None)."""
    record = function_record()
    if record is None:
        return None
    pending, record.pending_grad = record.pending_grad, None
    return pending
