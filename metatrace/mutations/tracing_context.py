"""metatrace's one wrapper of ``jit_ext.jit_ctx`` (the context thunder interprets a function in)
and of ``jit_ext.interpret`` (the interpreted function's call), their steps in order. Here, past
both interpret/ and mutations/ in the pipeline, because their steps are both's.

``jit_ctx``, entered outermost first, left innermost first:

1. a call whose function raised while traced runs eagerly, for eager's state and exception
   (:func:`metatrace.mutations.raising_calls.running_eagerly_on_raise`, after step 2's undo);
2. the objects the trace mutated are restored when tracing ends
   (:func:`metatrace.mutations.replay.restoring`);
3. the guard collector, the content reads and the interpreted codes are live
   (:func:`metatrace.interpret.jit_hooks.collecting`);
4. thunder's context.

``interpret``'s function, per call:

1. the call is remembered for the prologue's structure guards, the model's copies followed, the
   jitted function's defaults checked (:func:`metatrace.interpret.jit_hooks.remember_call`);
2. thunder's interpreted function runs;
3. its outputs' contents are noted as read (``jit_hooks.note_outputs``);
4. an exception it raised (from step 1 or 2) is noted as the function's
   (:func:`metatrace.mutations.raising_calls.note_raised_now`), for step 1 of ``jit_ctx``.
"""

from __future__ import annotations

import contextlib
import functools

import thunder.core.jit_ext as jit_ext

from metatrace.interpret import jit_hooks
from metatrace.mutations import raising_calls, replay
from metatrace.patching import Patch, attribute


def _jit_ctx(original):
    @contextlib.contextmanager
    def jit_ctx(ctx):
        with raising_calls.running_eagerly_on_raise(ctx), replay.restoring(ctx), jit_hooks.collecting(ctx), \
                original(ctx):
            yield

    return jit_ctx


def _interpret(original):
    @functools.wraps(original)
    def interpret(fn, *args, **kwargs):
        jfn = original(fn, *args, **kwargs)

        @functools.wraps(jfn)
        def interpreted(*call_args, **call_kwargs):
            try:
                jit_hooks.remember_call(fn, call_args, call_kwargs)
                result = jfn(*call_args, **call_kwargs)
                jit_hooks.note_outputs(result)
                return result
            except BaseException as exc:
                raising_calls.note_raised_now(exc)
                raise
            finally:
                interpreted._last_interpreter_log = getattr(jfn, "_last_interpreter_log", None)

        return interpreted

    return interpret


def patches() -> list[Patch]:
    return [
        attribute(jit_ext, "jit_ctx", _jit_ctx, "while thunder interprets: guards collected, the objects the trace "
                  "mutated restored at the end, a call whose function raised run eagerly", wrap=True),
        attribute(jit_ext, "interpret", _interpret, "the call is remembered for the structure guards; an exception "
                  "the function raised is noted as its own", wrap=True),
    ]
