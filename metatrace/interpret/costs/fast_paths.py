"""Direct paths through thunder's interpreter where its emulation cannot change what it records.

thunder's interpreter reads a global, and subscripts a plain container, by interpreting its own
helper functions: ``LOAD_GLOBAL`` interprets ``lambda d, k: d[k]`` (twice for a builtin: the
module's ``__builtins__``, then the name), whose ``BINARY_SUBSCR`` interprets
``getitem_impl(obj, index)``: ``obj.__getitem__`` is looked up (a bound method wrapped, its
``__self__`` read back), canonicalized to ``dict.__getitem__`` and only then handed to the
container's lookaside (``MutMappingWrapperMethods.__getitem__``, ``SequenceWrapperMethods.__getitem__``),
which alone records anything: the item's wrapper, with its ``BINARY_SUBSCR`` provenance, through
thunder's and metatrace's wrap callbacks. Those frames are a third to a half of a compile.

While metatrace is enabled, for an exact ``dict``, ``list`` or ``tuple`` and a key that is there
(an exact ``str`` or ``int`` key of a dict, an in-range ``int`` index or a slice of plain ints of
a list or tuple), the lookaside the interpreter would reach (``compilectx.lookaside``, with every
row metatrace installed there) is called directly, with the same wrapped container and key. What
the skipped frames did records nothing: their constants and bound methods are fresh wrappers of
thunder's own helpers (a ``__dunder__`` name, so metatrace's checks skip them), their loads are in
thunder's module (no proxy is renamed), and the ``_call_dispatch`` hooks see builtins with
constant provenance. The one thing the callbacks read from those frames is which file is running
(``metatrace.interpret.calls.c_code.values_as_text.calling_file``): a frame of ``getitem_impl`` stands on the
interpreter's frame stack while the lookaside runs, as it did. A missing key, a subclass, a key
of another type or a number proxy takes thunder's path, exceptions and all.

An exception leaving an interpreted frame gets a Python frame for its traceback
(``InterpreterFrame.get_or_make_python_frame``: a thread per exception, ~400 per Hugging Face
compile, from a handful of code locations); the frame depends only on the location (file, first
line, name, qualified name, line), so one frame per location is made and reused.
"""

from __future__ import annotations

import dis
import functools
import types

import thunder.core.interpreter as interpreter
import thunder.core.jit_ext as jit_ext
from thunder.core.options import SHARP_EDGES_OPTIONS
from thunder.core.interpreter import (
    INTERPRETER_SIGNALS,
    InterpreterFrame,
    WrappedValue,
    check_and_append,
    get_interpretercompilectx,
    get_interpreterruntimectx,
    wrap_const,
)

from metatrace.patching import Patch, attribute, item
from metatrace.state import compile_context
from metatrace.state.process_tables import PYTHON_FRAMES, PYTHON_FRAMES_KEPT

_GETITEM = {dict: dict.__getitem__, list: list.__getitem__, tuple: tuple.__getitem__}
_DICT_KEYS = (str, int)
_SLICE_PARTS = (int, type(None))


def _present(container, key) -> bool:
    """``container[key]`` of an exact dict, list or tuple finds an item without running user code."""
    t = type(container)
    if t is dict:
        return type(key) in _DICT_KEYS and key in container
    if type(key) is int:
        return -len(container) <= key < len(container)
    return (type(key) is slice and type(key.start) in _SLICE_PARTS and type(key.stop) in _SLICE_PARTS
            and type(key.step) in _SLICE_PARTS)


def _thunder_helper_frame(fn: types.FunctionType, name: str) -> InterpreterFrame:
    """An interpreter frame of thunder's nested helper ``name`` in ``fn``, at its call: the frame
    that was on top of the stack while the container's lookaside ran."""
    code = next(c for c in fn.__code__.co_consts if isinstance(c, types.CodeType) and c.co_name == name)
    call = next(i for i in dis.get_instructions(code) if i.opname == "CALL")
    return InterpreterFrame(code=code, qualname=code.co_qualname, module=interpreter.__name__,
                            globals=vars(interpreter), names={}, positions=call.positions, _locals={})


_GETITEM_IMPL_FRAME = _thunder_helper_frame(interpreter._binary_subscr_handler, "getitem_impl")
_LEN_IMPL_FRAME = _thunder_helper_frame(interpreter._len_lookaside, "impl")
_LEN = {dict: dict.__len__, list: list.__len__, tuple: tuple.__len__}
_CONTAINS_IMPL_FRAME = _thunder_helper_frame(interpreter._contains_op_handler, "impl")
# thunder's ``lambda result: not result`` of ``not in``, the same code (in thunder's module)
_NOT = types.FunctionType(
    next(c for c in interpreter._contains_op_handler.__code__.co_consts
         if isinstance(c, types.CodeType) and c.co_name == "<lambda>"), vars(interpreter))


def _direct_lookaside(container: WrappedValue, key: WrappedValue):
    """The lookaside ``container[key]`` reaches in thunder's interpreter, or None (take thunder's path)."""
    if type(container) is not WrappedValue or type(key) is not WrappedValue:
        return None
    ucontainer = container.value
    fn = _GETITEM.get(type(ucontainer))
    if fn is None or not _present(ucontainer, key.value):
        return None
    compilectx = get_interpretercompilectx()
    if not compilectx._with_provenance_tracking:
        return None
    lookaside = compilectx.lookaside(fn, container, key)
    if not callable(lookaside):
        return None
    _note_read(ucontainer)
    return lookaside


def _note_read(container) -> None:
    """A direct path skips the dispatch that notes which containers the trace read."""
    reads = compile_context.CONTENT_READS.get()
    if reads is not None:
        reads.observe(container)


def _on_frame(frame: InterpreterFrame, lookaside, *args):
    """``lookaside(*args)`` with ``frame`` on top of the interpreter's frame stack."""
    frames = get_interpreterruntimectx().frame_stack
    frames.append(frame)
    try:
        return lookaside(*args)
    finally:
        frames.pop()


def _subscript(lookaside, container: WrappedValue, key: WrappedValue):
    return _on_frame(_GETITEM_IMPL_FRAME, lookaside, container, key)


def _sharp_edges_allowed() -> bool:
    try:
        return jit_ext.get_jit_ctx().sharp_edges is SHARP_EDGES_OPTIONS.ALLOW
    except LookupError:
        return False  # (thunder's interpreter outside thunder.jit)


def direct_len(obj):
    """``len`` of an exact dict, list or tuple: the container's ``__len__`` lookaside (a ``GET_LEN``
    record), not thunder's interpreted ``impl``; None for any other value (thunder's path). That
    impl's own steps (``hasattr``, ``isinstance``, ``result < 0``) wrap plain bools whose only
    callback is thunder's sharp edge for a computed value: the direct path is taken only when sharp
    edges are allowed (thunder's default). A step of ``len``'s one wrapper
    (:mod:`metatrace.interpret.calls.numbers.number_builtins`)."""
    fn = _LEN.get(type(obj.value)) if type(obj) is WrappedValue else None
    if fn is not None and _sharp_edges_allowed():
        compilectx = get_interpretercompilectx()
        lookaside = compilectx.lookaside(fn, obj) if compilectx._with_provenance_tracking else None
        if callable(lookaside):
            _note_read(obj.value)
            return _on_frame(_LEN_IMPL_FRAME, lookaside, obj)
    return None


def _direct_globals_lookup(original):
    @functools.wraps(original)
    def globals_lookup(globals_dict, name):
        lookaside = _direct_lookaside(globals_dict, name)
        if lookaside is not None:
            return _subscript(lookaside, globals_dict, name)
        if type(globals_dict) is not WrappedValue or type(name) is not WrappedValue:
            return original(globals_dict, name)
        uglobals = globals_dict.value
        if type(uglobals) is not dict or type(name.value) is not str or name.value in uglobals:
            return original(globals_dict, name)
        ubuiltins = uglobals.get("__builtins__")
        if not (type(ubuiltins) is dict and name.value in ubuiltins or isinstance(ubuiltins, types.ModuleType)):
            return original(globals_dict, name)  # (a NameError, a builtins mapping of another type)
        key = wrap_const("__builtins__")
        lookaside = _direct_lookaside(globals_dict, key)
        if lookaside is None:
            return original(globals_dict, name)
        builtins = _subscript(lookaside, globals_dict, key)
        if isinstance(ubuiltins, types.ModuleType):  # ``__main__``'s: thunder's getattr
            res = interpreter._interpret_call(getattr, builtins, name)
            if res is INTERPRETER_SIGNALS.EXCEPTION_RAISED:
                return interpreter.do_raise(NameError(f"name '{name.value}' is not defined"))
            return res
        lookaside = _direct_lookaside(builtins, name)
        if lookaside is None:  # (thunder's path from here: its interpreted ``d[k]``)
            return interpreter._interpret_call(lambda d, k: d[k], builtins, name)
        return _subscript(lookaside, builtins, name)

    return globals_lookup


def _direct_binary_subscr(original):
    @functools.wraps(original)
    def _binary_subscr_handler(inst, /, stack, **kwargs):
        if len(stack) >= 2:
            container, key = stack.getitem_wrapped(-2), stack.getitem_wrapped(-1)
            lookaside = _direct_lookaside(container, key)
            if lookaside is not None:
                stack.pop_wrapped()
                stack.pop_wrapped()
                return check_and_append(stack, _subscript(lookaside, container, key))
        return original(inst, stack=stack, **kwargs)

    return _binary_subscr_handler


def _direct_contains(original):
    """``key in d`` for an exact dict and an exact ``str`` or ``int`` key: the dict's
    ``__contains__`` lookaside (its items tracked, a ``CONTAINS_OP`` record), not thunder's
    interpreted ``impl`` (whose ``hasattr`` wraps a plain bool: sharp edges allowed, as for len)."""

    @functools.wraps(original)
    def _contains_op_handler(inst, /, stack, **kwargs):
        if len(stack) >= 2 and _sharp_edges_allowed():
            container, key = stack.getitem_wrapped(-1), stack.getitem_wrapped(-2)
            if (type(container) is WrappedValue and type(key) is WrappedValue and type(container.value) is dict
                    and type(key.value) in _DICT_KEYS):
                compilectx = get_interpretercompilectx()
                lookaside = (compilectx.lookaside(dict.__contains__, container, key)
                             if compilectx._with_provenance_tracking else None)
                if callable(lookaside):
                    _note_read(container.value)
                    stack.pop_wrapped()
                    stack.pop_wrapped()
                    result = _on_frame(_CONTAINS_IMPL_FRAME, lookaside, container, key)
                    if result is INTERPRETER_SIGNALS.EXCEPTION_RAISED:
                        return result
                    if inst.arg == 1:
                        result = interpreter._interpret_call(_NOT, result)
                        if result is INTERPRETER_SIGNALS.EXCEPTION_RAISED:
                            return result
                    stack.append(result)
                    return None
        return original(inst, stack=stack, **kwargs)

    return _contains_op_handler




def frame_per_location(make_frame, frame):
    """The Python frame of interpreted ``frame``'s location: made once by ``make_frame(frame)``
    and reused (a step of ``get_or_make_python_frame``'s one wrapper,
    :mod:`metatrace.interpret.costs.interpreter_costs`)."""
    code = frame.code
    lineno = frame.positions.lineno if frame.positions is not None else None
    key = (code.co_filename, code.co_firstlineno, code.co_name, frame.qualname,
           code.co_firstlineno if lineno is None else lineno)
    made = PYTHON_FRAMES.get(key)
    if made is None:
        if len(PYTHON_FRAMES) >= PYTHON_FRAMES_KEPT:
            PYTHON_FRAMES.clear()
        made = PYTHON_FRAMES[key] = make_frame(frame)
    return made


def patches() -> list[Patch]:
    return [
        attribute(interpreter, "globals_lookup", _direct_globals_lookup,
                  "a global or builtin in a plain dict is read through the dict's lookaside directly, not by "
                  "interpreting thunder's lambda d, k: d[k]", wrap=True),
        item(interpreter._default_opcode_handler_map, "BINARY_SUBSCR", _direct_binary_subscr,
             "an item of a plain dict, list or tuple is read through the container's lookaside directly, not by "
             "interpreting thunder's getitem_impl", wrap=True, label="thunder.core.interpreter._default_opcode_handler_map"),
        item(interpreter._default_opcode_handler_map, "CONTAINS_OP", _direct_contains,
             "key in d for a plain dict is the dict's __contains__ lookaside, not thunder's interpreted impl",
             wrap=True, label="thunder.core.interpreter._default_opcode_handler_map"),
    ]
