"""Where metatrace meets thunder.jit: collecting guards during tracing, adding them to the prologue.

- while ``jit_ext.jit_ctx`` (the context thunder interprets a function in) is entered,
  :func:`collecting` installs a :class:`GuardCollector` under ``cache="symbolic values"``, and
  :func:`remember_call` keeps the call (steps of the one wrapper of each,
  :mod:`metatrace.mutations.tracing_context`).
- ``jit_ext.propagate_constraints`` (called before the prologue is built) also turns the
  collector's guards into prologue constraints, and remembers their readable forms on the
  computation trace for ``metatrace.explain``.
"""

from __future__ import annotations

import contextlib

import thunder.core.jit_ext as jit_ext
from thunder.core.compile_data import using_symbolic_values
from thunder.core.proxies import NumberProxy, TensorProxy

from metatrace.state import compile_context
from metatrace.guards import provenance
from metatrace.state.compile_session import current_jit_ctx, session
from metatrace.state.compile_context import compile_step
from metatrace.metas.proxy_edits import restore_input_flags
from metatrace.guards.explain import log_miss
from metatrace.guards.grad_program import reserve_grad_program
from metatrace.state.registry import function_record
from metatrace.guards.collect import GuardCollector
from metatrace.guards.content_reads import ContentReads
from metatrace.guards.program_builder import add_prologue_constraints
from metatrace.guards.structure import add_number_type_constraint, add_structure_constraints
from metatrace.patching import Patch, attribute
from metatrace.interpret.modules.wrapper_copies import follow_the_model

def remember_call(fn, call_args: tuple, call_kwargs: dict) -> None:
    """The call's arguments and function, on the compile's session (for the structure guards of
    the prologue); the model's copies followed; the jitted function's defaults checked."""
    ctx = current_jit_ctx()
    if ctx is None:
        return
    compile_session = session(ctx)
    compile_session.call = (call_args, call_kwargs)
    compile_session.fn = fn
    follow_the_model(fn)
    if compile_context.collector() is not None:
        check_defaults(ctx, fn)


def note_outputs(result) -> None:
    """The outputs' contents are read (thunder builds the outputs from their contents)."""
    reads = compile_context.CONTENT_READS.get()
    if reads is not None:
        reads.observe_reachable(result)


@contextlib.contextmanager
def collecting(ctx):
    """While thunder interprets under symbolic values: a guard collector, the content reads and
    the interpreted codes are live; the codes are left on the function's record for the entry this
    compile stores (metatrace.entry_cache)."""
    if not using_symbolic_values():
        session(ctx).guards = None
        yield
        return
    compile_session = session(ctx)
    collector = compile_session.guards
    if collector is None:
        log_miss()  # a new trace under an existing function: say why its entries were rejected
        collector = compile_session.guards = GuardCollector()
    reads = compile_session.content_reads = ContentReads()
    codes = compile_session.interpreted_codes
    with compile_step(collector), compile_context.CONTENT_READS.set_to(reads), \
            compile_context.INTERPRETED_CODES.set_to(codes):
        yield
    record = function_record()
    if record is not None:
        record.interpreted_codes = codes
        record.stamped_blocks = [] if compile_session.blocks is None else compile_session.blocks.log


def check_defaults(ctx, fn) -> None:
    """The jitted function's defaults (:func:`metatrace.interpret.calls.python.callee_checks.check_defaults`);
    functions it calls are checked where they were read from the user's state."""
    import types

    from metatrace.interpret.calls.python.callee_checks import check_defaults as check_defaults_of

    if isinstance(fn, types.FunctionType):
        check_defaults_of(ctx, fn, provenance.root_record(provenance.Root.FUNCTION), fn.__name__)


def _propagate_constraints(original):
    def propagate_constraints(ctx, inputs, intermediates, computation_trace):
        restore_input_flags(computation_trace, inputs)  # (before anything reads the inputs' flags)
        original(ctx, inputs, intermediates, computation_trace)
        if session(ctx).content_reads is not None:
            session(ctx).content_reads.settle()  # (tracing is over: which containers it read is known)
        call = session(ctx).call
        numbers = add_structure_constraints(ctx, computation_trace, *call, inputs)[1] if call is not None else []
        collector = session(ctx).guards
        if collector is not None:
            names = input_names(ctx, inputs)
            checked_by_forward = add_prologue_constraints(ctx, inputs, computation_trace, collector, names, numbers)
            reserve_grad_program(
                ctx, inputs, {k.proxy.name: v.name for k, v in ctx._proxy_swapmap.items()}, names, checked_by_forward
            )
        elif numbers:
            add_number_type_constraint(ctx, numbers)

    return propagate_constraints


def input_names(ctx, inputs) -> dict[str, str]:
    """Readable names for guard texts: the interpreter's proxies renamed to the function's
    argument names (``i3`` -> ``i``), input tensor sizes as ``a.shape[2]``."""
    names = {k.proxy.name: v.name for k, v in ctx._proxy_swapmap.items()}
    parameters = provenance.parameter_names(session(ctx).fn)
    for v in inputs:
        p = v.proxy
        if isinstance(p, NumberProxy) and (text := provenance.argument_name(p.history, parameters)
                                           or provenance.state_name(p.history, session(ctx).fn)):
            if p.name not in names or "[" in text or "." in text:
                # an element of a container argument reads as ``l[0]``, not as the local variable
                # it was first stored in (thunder names proxies after locals: ``best > item``)
                names[p.name] = text  # a slice argument's number: s.start
        if isinstance(p, TensorProxy):
            for d, s in enumerate(p._shape):
                if isinstance(s, NumberProxy):
                    names.setdefault(s.name, f"{names.get(p.name, p.name)}.shape[{d}]")
    return names


def patches() -> list[Patch]:
    return [
        attribute(jit_ext, "propagate_constraints", _propagate_constraints,
                  "the prologue gets metatrace's guard program and structure checks besides thunder's constraints",
                  wrap=True),
    ]
