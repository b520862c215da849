"""What metatrace collects while thunder interprets one call for a compile, in one typed object.

thunder's interpreter runs the user's function once per compile under a ``JitCtx``; metatrace's
hooks along the way (the interpreter's wrap callback, lookasides, the prologue's builder) share
what they learn about that call: the function and its arguments, the guard collector, the numbers
read from outside the arguments, the callees and modules already checked, the values whose
contents the prologue checks. :func:`session` is the one accessor.

Lifetime: one :class:`CompileSession` per ``JitCtx``, weakly keyed by it: it dies with the
compile's context (thunder drops it when the compile ends), and nothing of metatrace's is set on
thunder's objects.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import thunder.core.jit_ext as jit_ext

from metatrace.state.weak_tables import WeakTable


@dataclass(eq=False)
class CompileSession:
    # the function thunder interprets (the user's, or a module) and the call being compiled
    fn: Callable | None = None
    call: tuple | None = None  # (args, kwargs)
    # the compile's GuardCollector (metatrace.guards.collect); None under constant values
    guards: Any = None
    # name -> symbolic number read from anywhere but the call's arguments (its type is checked)
    number_leaves: dict = field(default_factory=dict)
    # callees (metatrace.interpret.calls.python.callee_checks) and provenances of values already checked
    callees: set = field(default_factory=set)
    value_checks: set = field(default_factory=set)
    # the check of the modules the trace called (metatrace.interpret.modules.called_modules), once made
    called_modules: Any = None
    # the stores into objects that existed before the call (metatrace.mutations.log.MutationLog)
    mutations: Any = None
    # the exception the interpreted function raised, until the compile's context exits
    # (metatrace.mutations.raising_calls: the call then runs eagerly, for eager's state and exception)
    raised: BaseException | None = None
    # which containers the trace read, and the contents checks to relax (metatrace.guards.content_reads)
    content_reads: Any = None
    # id -> (object, record): mutable defaults of the functions the trace calls, which thunder binds
    # as constants, and how the prologue reads them (``fn.__defaults__[0]``): pre-existing objects
    # for metatrace.mutations (metatrace.interpret.calls.python.callee_checks.note_mutable_defaults)
    mutable_defaults: dict = field(default_factory=dict)
    # the wrappers of the values the user's code holds as a torch.Size in eager (a tensor's shape,
    # slices and sums of it: metatrace.interpret.calls.numbers.eager_sizes)
    sizes: set = field(default_factory=set)
    # the wrappers of lists and tuples made by + and *, held so thunder's wrapper cache finds them
    # again with their items after its binary-operator handler unwraps them
    # (metatrace.interpret.opcodes.sequence_operators)
    sequence_results: list = field(default_factory=list)
    # the code objects of the Python functions the interpreter ran (metatrace.entry_cache: a stored
    # entry depends on their files)
    interpreted_codes: set = field(default_factory=set)
    # the blocks of module lists recorded once and stamped for their siblings
    # (metatrace.interpret.modules.repeated_blocks.BlockStamps), made at the first module list call
    blocks: Any = None


_SESSIONS = WeakTable(CompileSession)  # JitCtx -> CompileSession


def session(ctx) -> CompileSession:
    """The session of the compile that ``ctx`` (thunder's ``JitCtx``) interprets."""
    return _SESSIONS.get(ctx)


def current_jit_ctx():
    """thunder's ``JitCtx`` of the function being interpreted now, or None outside one."""
    try:
        return jit_ext.get_jit_ctx()
    except LookupError:
        return None
