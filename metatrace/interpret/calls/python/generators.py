"""``generator.throw(exc)`` on a generator thunder interprets raises inside its frame, as in eager.

thunder's interpreter runs a generator function's frame inside a Python generator of its own
(``interpreter.make_generator``), which relays ``next`` and ``send`` to the interpreted frame, but
not ``throw``: the exception was raised at that wrapper's ``yield``, so the interpreted
generator's ``except`` and ``finally`` never ran. ``contextlib.contextmanager``'s ``__exit__``
throws an exception of the ``with`` block into its generator: torch.vmap's
``vmap_increment_nesting`` then skipped its ``finally: _vmap_decrement_nesting()``, and a
jitted function that failed inside ``torch.vmap`` left functorch's vmap level raised for the
rest of the process (every later random op failed "called random operation while in
randomness error mode").

While metatrace is enabled, ``throw`` on such a generator unwinds the interpreted frame from the
``yield`` it is suspended at, as CPython does: the frame's exception table (Python 3.11+) gives
the handler, which runs under the interpreter; the generator's next yield is ``throw``'s result,
its return a ``StopIteration``, and an exception it does not handle propagates. Any other
generator's ``throw`` runs as before.
"""

from __future__ import annotations

import dis
import sys
import types

import thunder.core.interpreter as interpreter
from thunder.core.interpreter import (
    INTERPRETER_SIGNALS, ProvenanceRecord, PseudoInst, do_raise, interpreter_ctx, unwrap, wrap,
)

from metatrace.patching import Patch, item

_WRAPPER_NAME = "thunder_interpreter_generator"


def _interpreted_state(gen):
    """(frame, compilectx, runtimectx) of a suspended generator thunder's interpreter made, or None."""
    frame = getattr(gen, "gi_frame", None)
    if frame is None or gen.gi_code.co_name != _WRAPPER_NAME or gen.gi_code.co_filename != interpreter.__file__:
        return None
    state = frame.f_locals
    if not all(name in state for name in ("frame", "compilectx", "runtimectx")) or frame.f_lasti < 0:
        return None
    return state["frame"], state["compilectx"], state["runtimectx"]


def _exception(typ, val, tb) -> BaseException:
    """``throw``'s arguments as the exception it raises (the 3-argument form is deprecated)."""
    if isinstance(typ, BaseException):
        return typ
    exc = typ(*(() if val is None else val if isinstance(val, tuple) else (val,))) if not isinstance(val, typ) else val
    return exc.with_traceback(tb) if tb is not None else exc


def _unwind_to_handler(frame, exc: BaseException) -> bool:
    """Sets ``frame`` to run the handler of its exception table that covers the ``yield`` it is
    suspended after (thunder's unwinding in ``_run_frame``, at that instruction); False where
    none covers it."""
    yield_ptr = frame.inst_ptr - 1  # (thunder advanced past YIELD_VALUE when it suspended)
    for start, end, handler, level, lasti in dis._parse_exception_table(frame.code):
        if start <= yield_ptr * 2 < end:
            stack = frame.interpreter_stack
            del stack[level:]
            frame.lasti = yield_ptr
            with stack.set_cur_instruction(PseudoInst.EXCEPTION_HANDLER):
                if lasti:
                    stack.append(frame.lasti)
                stack.append(exc)
            frame.inst_ptr = handler // 2
            return True
    return False


def _throw(gen, exc: BaseException, state):
    frame, compilectx, runtimectx = state
    if not _unwind_to_handler(frame, exc):
        gen.throw(exc)  # not handled: the wrapper raises it and is finished, as the generator is
    with interpreter_ctx(compilectx, runtimectx):
        res, status = interpreter._run_frame(frame, compilectx, runtimectx)
    if status is INTERPRETER_SIGNALS.YIELD_VALUE:
        return res
    gen.close()  # the interpreted frame is done: so is its wrapper
    if status is INTERPRETER_SIGNALS.EXCEPTION_RAISED:
        e, runtimectx.curexc = runtimectx.curexc, None
        raise e
    raise StopIteration(unwrap(res))


def _throw_lookaside(original):
    def lookaside(gen, typ, val=None, tb=None):
        ugen = unwrap(gen)
        state = _interpreted_state(ugen) if sys.version_info >= (3, 11) else None
        exc = _exception(unwrap(typ), unwrap(val), unwrap(tb))
        try:
            result = _throw(ugen, exc, state) if state is not None else ugen.throw(exc)
        except BaseException as e:  # noqa: BLE001 - whatever the generator raises is throw's
            return do_raise(e)
        if state is not None:
            return result  # (the interpreted frame's own wrapped value)
        return wrap(result, provenance=ProvenanceRecord(PseudoInst.OPAQUE, inputs=[gen.provenance]))

    return lookaside


def patches() -> list[Patch]:
    return [item(interpreter._default_lookaside_map, types.GeneratorType.throw, _throw_lookaside,
                 "throw() into a generator thunder interprets raises in its frame (its except/finally run)",
                 wrap=True, label="thunder.core.interpreter._default_lookaside_map")]
