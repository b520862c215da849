"""metatrace's one hook on every call thunder's interpreter dispatches, its steps in order.

Every call the interpreted function makes (a builtin, a method, a module, a Python function)
goes through ``interpreter._call_dispatch``; it is the hottest path of a compile (~180k calls for
a small Hugging Face forward), so metatrace wraps it once, and the wrapper does nothing but
dispatch outside a compile that collects guards. Under one, before thunder dispatches the call:

1. an opaque (C) callable gets the values of the number proxies among its arguments, guarded
   (``opaque_calls.before_call``: it may replace the call, or answer it);
2. a call whose result changes on every call (random numbers, clocks) is refused
   (``unrepeatable_calls``);
3. a callee read from the user's state is checked by identity, code and defaults
   (``callee_checks``);
4. a list, dict or set among the arguments is noted as read, unless the call only writes it
   (``metatrace.guards.content_reads``): such containers are checked by type, not contents;
5. an opaque (C) call given a list, dict or set must leave it as it was (``c_mutations``).

Before step 1, the code of a Python callee is noted (``compile_context.INTERPRETED_CODES``): a
stored entry is valid only while the files of the code the compile ran are unchanged
(``metatrace.entry_cache``).

Between steps 1 and 2, torch's C code given a traced tensor raises a clear error
(``tensor_in_c_code``: thunder would hand it a proxy with no data).

After step 5, a call of a module read from a module list may be stamped from the list's first
block instead of interpreted (``metatrace.interpret.modules.repeated_blocks``).

Steps 2-4 see the call as step 1 leaves it (as when each was its own wrapper, step 1 outermost).

``f(*args)`` (``CALL_FUNCTION_EX``) reads the argument list's length in thunder's handler, before
any dispatch: that handler notes its list and dict as read too.
"""

from __future__ import annotations

import functools
import types

import thunder.core.interpreter as interpreter
import torch
from thunder.core.interpreter import do_raise, unwrap

from metatrace.guards.collect import interpreted_line
from metatrace.interpret.calls.c_code import container_writes
from metatrace.interpret.calls.python import callee_checks
from metatrace.interpret.calls.c_code import opaque_calls
from metatrace.interpret.calls.c_code import tensor_arguments
from metatrace.interpret.calls import unrepeatable_calls
from metatrace.interpret.modules import repeated_blocks
from metatrace.patching import Patch, attribute, item
from metatrace.state import compile_context


def _dispatching(original):
    @functools.wraps(original)
    def _call_dispatch(compilectx, runtimectx, fn, /, *args, **kwargs):
        if compile_context.collector() is None:
            return original(compilectx, runtimectx, fn, *args, **kwargs)
        call = opaque_calls.before_call(compilectx, fn, args, kwargs)
        if type(call) is opaque_calls.Result:
            return call.value
        fn, args, kwargs = call
        ufn = unwrap(fn)
        _note_code(ufn)
        c_error = tensor_arguments.error(ufn, args, kwargs)
        if c_error is not None and compilectx.lookaside(ufn, *args, **kwargs) is None:
            return do_raise(c_error)
        unrepeatable_calls.before_call(fn, args)
        unrepeatable_calls.check_iterator_call(compilectx, fn, args, kwargs)
        callee_checks.before_call(fn, args)
        reads = compile_context.CONTENT_READS.get()
        if reads is not None:
            reads.note_call(ufn, args, kwargs)
        before = container_writes.fingerprints(ufn, args)
        if before is None or not opaque_calls.would_call_opaque(compilectx, ufn, args, kwargs):
            if isinstance(ufn, torch.nn.Module):
                return repeated_blocks.call(runtimectx, fn, args, kwargs,
                                            lambda: original(compilectx, runtimectx, fn, *args, **kwargs))
            return original(compilectx, runtimectx, fn, *args, **kwargs)
        result = original(compilectx, runtimectx, fn, *args, **kwargs)
        changed = container_writes.changed_containers(before)
        return do_raise(container_writes.error(ufn, changed, interpreted_line())) if changed else result

    return _call_dispatch


def _note_code(fn) -> None:
    """The code a Python callee runs, for the files a stored entry depends on (step 0: every call)."""
    codes = compile_context.INTERPRETED_CODES.get()
    if codes is None:
        return
    kind = type(fn)
    if kind is types.MethodType:
        fn, kind = fn.__func__, type(fn.__func__)
    if kind is types.FunctionType:
        codes.add(fn.__code__)


def _noting_unpacked_arguments(original):
    @functools.wraps(original)
    def _call_function_ex_handler(inst, /, stack, **kwargs):
        reads = compile_context.CONTENT_READS.get()
        if reads is not None:
            for i in (-1, -2)[: 1 + (inst.arg & 1)]:
                reads.observe(unwrap(stack.getitem_wrapped(i)))
        return original(inst, stack=stack, **kwargs)

    return _call_function_ex_handler


def patches() -> list[Patch]:
    return [attribute(interpreter, "_call_dispatch", _dispatching,
                      "before a call is dispatched: C code gets numbers' values (guarded), unrepeatable calls are "
                      "refused, callees read from the user's state are checked, containers' reads are noted",
                      wrap=True),
            item(interpreter._default_opcode_handler_map, "CALL_FUNCTION_EX", _noting_unpacked_arguments,
                 "f(*args, **kwargs) notes its argument list and dict as read (their length decides the call)",
                 wrap=True, label="thunder.core.interpreter._default_opcode_handler_map")]
