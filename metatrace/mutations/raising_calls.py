"""A call whose function raises while thunder traces it leaves the state eager's raising call leaves.

thunder interprets the function with proxies: the stores it makes into objects that existed
before the call are undone when tracing ends (:mod:`.replay`), and its in-place writes into the
caller's tensors (``self.num_batches_tracked.add_(1)``) only ever touched proxies. So when the
function raises while it is traced, the call raised with the state as it was before the call.
Eager raises at the same statement with every mutation before it made: ``nn.BatchNorm1d`` in
training on a batch of 1 increments ``num_batches_tracked`` and then raises, ``self.calls += 1``
before a ``raise`` keeps the new count, a list argument keeps what was appended, and every later
call started from a state one step behind eager's, for good. thunder's exception was not
always eager's either (BatchNorm's was a ``RuntimeError`` quoting ``<function size ...>`` where
eager raises ``ValueError``).

The trace stops at the raise, and what came before it cannot be run from a trace that has no
end; so once the undo has put everything back, the call is run eagerly (:func:`run_eagerly`):
eager makes exactly its own mutations, in its own order, up to its own raise, and that
exception is the one the caller gets. This runs only where the interpreted program raised
(:func:`note_raised`: not thunder's machinery failing, ``InterpreterError``), and only for
exceptions that say the program raised rather than that thunder or metatrace cannot trace it
(:func:`eager_may_raise`: not a ``MetatraceError``, not thunder's ``NotImplementedError`` for
an unsupported call, not a sharp edge), and not where the jitted module's wrapper computes with
tensors the eager model does not hold (a transform's replacements, ddp/fsdp). Where eager then
runs without raising, thunder refused a call eager accepts: its exception is raised, with a note
that eager's mutations were made.

Under constant values metatrace records and undoes nothing (thunder's stores while tracing stay),
so nothing runs again. A call that raises later, in the compiled computation (an index out of range read from data),
is not traced again: the tensor writes before the raising operator were made in eager's order,
and the epilogue's stores are not made.
"""

from __future__ import annotations

import contextlib

import thunder.core.jit_ext as jit_ext
from thunder.core.compile_data import using_symbolic_values
from thunder.core.interpreter import InterpreterError

from metatrace.errors import MetatraceError
from metatrace.interpret.modules.wrapper_copies import wrapper_of_module
from metatrace.state.compile_session import session

# What says "thunder or metatrace cannot trace this", not "the program raised": eager would run on.
_NOT_THE_PROGRAMS = (MetatraceError, InterpreterError, NotImplementedError, jit_ext.JITSharpEdgeError)

NOTE_EAGER_RAN = ("metatrace: eager runs this call without raising (it was run eagerly after tracing raised, so "
                  "the state is the one eager's call leaves): thunder refuses what eager accepts here")


def eager_may_raise(exc: BaseException) -> bool:
    """Whether ``exc``, raised by the interpreted program, may be eager's own exception."""
    return isinstance(exc, Exception) and not isinstance(exc, _NOT_THE_PROGRAMS)


def _eager_computes_as_the_wrapper(fn) -> bool:
    """Whether calling ``fn`` eagerly computes with what its compiled call reads: a function, or a
    module whose ThunderModule holds the model's own parameters, buffers and submodules (a
    transform such as fsdp or quantization replaces some; ddp and fsdp also communicate)."""
    if getattr(fn, "use_ddp", False) or getattr(fn, "use_fsdp", False):
        return False
    wrapper = wrapper_of_module(fn)
    if wrapper is None:
        return True
    for held, named in ((wrapper._overrides_parameters, fn.named_parameters),
                        (wrapper._overrides_buffers, fn.named_buffers),
                        (wrapper._module_cache, fn.named_modules)):
        model = dict(named(remove_duplicate=False))
        if any(model.get(name) is not value for name, value in held.items()):
            return False
    return True


def run_eagerly(fn, args: tuple, kwargs: dict, traced: BaseException) -> None:
    """Runs the call eagerly after tracing it raised ``traced`` (its mutations already undone)
    and raises what eager raises; where eager returns, raises ``traced`` with a note."""
    try:
        fn(*args, **kwargs)
    except Exception as eager:
        _without_context(eager, traced)
        raise
    traced.add_note(NOTE_EAGER_RAN)
    raise traced


def _without_context(eager: BaseException, traced: BaseException) -> None:
    """Eager's exception as eager chains it: it runs while thunder's exception leaves the compile
    (a context manager's exit), and Python makes thunder's its context ("during handling of the
    above exception"), at the end of eager's own chain."""
    seen, e = set(), eager
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if e.__context__ is traced:
            e.__context__ = None
            return
        e = e.__context__


def note_raised(ctx, exc: BaseException) -> None:
    """The interpreted function raised ``exc`` (not thunder's machinery: that is an InterpreterError)."""
    session(ctx).raised = exc


def note_raised_now(exc: BaseException) -> None:
    """The interpreted function of the compile running now raised ``exc``."""
    try:
        note_raised(jit_ext.get_jit_ctx(), exc)
    except LookupError:
        pass


def _runs_eagerly(compile_session, exc: BaseException) -> bool:
    """Whether the call whose compile ``exc`` ends runs eagerly: the program raised it, it may be
    eager's, the undo ran (symbolic values: under constant values thunder's stores while tracing
    stay, and running again would repeat them), and eager computes as the compiled call would."""
    return (compile_session.raised is exc and eager_may_raise(exc) and using_symbolic_values()
            and compile_session.call is not None and compile_session.fn is not None
            and _eager_computes_as_the_wrapper(compile_session.fn))


@contextlib.contextmanager
def running_eagerly_on_raise(ctx):
    """A compile whose function raised (eager's exception, after the undo) runs the call eagerly:
    eager's state and eager's exception."""
    compile_session = session(ctx)
    try:
        yield
    except BaseException as exc:
        runs_eagerly = _runs_eagerly(compile_session, exc)
        compile_session.raised = None
        if not runs_eagerly:
            raise
        traced = exc
    else:
        return
    # outside the handler (Python still makes thunder's exception the context of what a
    # context manager's exit raises: run_eagerly takes it off eager's)
    args, kwargs = compile_session.call
    run_eagerly(compile_session.fn, args, kwargs, traced)
