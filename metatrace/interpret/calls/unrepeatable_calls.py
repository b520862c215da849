"""Calls whose value is new every time, in traced code, raise a clear error: Python's and NumPy's
random numbers, and clock reads.

thunder's interpreter runs ``random.random()``, ``random.uniform(0, 1)`` or
``numpy.random.rand()`` once, while it traces, and the trace bakes the number in: every later
call of the entry reused it (a LayerDrop written with ``random.uniform`` dropped the same layers
on every step; stock thunder does the same). No prologue check can help, since the number is new
on every call. So while metatrace compiles under symbolic values, a call of a method of a
``random.Random`` (the ``random`` module's functions are methods of one) or of a NumPy
``RandomState``/``Generator`` that the function did not create itself raises
:class:`RandomCallError` naming the call and the user's line (a generator created and seeded in
the function draws the same numbers on every call: baking them in is right). torch's random
functions (``torch.rand``, ``torch.bernoulli``) are traced as random ops and are the way to draw
inside a jitted function; a number drawn outside and passed in is a symbolic input.

An iterator that existed before the call (``itertools.count()`` kept on a module, a global
``iter(batches)``, a generator), advanced by C code (``next(it)``, a ``for`` over it, ``zip(it,
...)``, ``list(it)``) is the same: thunder's interpreter calls the C ``__next__`` once while
tracing, the trace bakes in the item, and every later call of the entry reused it while the
iterator stayed where the trace left it. The prologue cannot check an iterator's position, and
the epilogue cannot replay a C iterator, so handing one to C code raises
:class:`PreexistingIteratorError` with the line. An iterator whose ``__next__`` is Python code
is interpreted: its stores are replayed like any other.

A clock read in the user's own code (``time.time()``, ``time.perf_counter()``,
``datetime.now()``) is baked in the same way: a timeout branch or a step timer in ``forward``
froze at its first value. It raises :class:`ClockCallError` with the line. Clock reads inside
installed packages and the standard library are left alone: ``logging`` stamps every record
with ``time.time_ns()``, and a library's log call in a forward must not stop the compile.
"""

from __future__ import annotations

from metatrace.errors import MetatraceError

import datetime
import inspect
import io
import random
import time
import types

from thunder.core.interpreter import WrappedValue

from metatrace.guards.collect import interpreted_line
from metatrace.interpret.reads.library_code import is_library_file
from metatrace.guards.provenance import rooted_in_arguments, rooted_in_prologue
from metatrace.interpret.calls.c_code.opaque_calls import would_call_opaque
from metatrace.interpret.interpreted_frames import OWN_CODE, calling_file


class RandomCallError(MetatraceError, RuntimeError):
    """A traced function draws a Python or NumPy random number: the trace would bake it in."""


class ClockCallError(MetatraceError, RuntimeError):
    """The user's traced code reads a clock: the trace would bake the time in."""


class PreexistingIteratorError(MetatraceError, RuntimeError):
    """The traced function hands an iterator that existed before the call to C code, which
    advances it unseen: the trace would bake in the items it read."""


_CLOCKS = {
    fn: f"time.{fn.__name__}"
    for fn in (time.time, time.time_ns, time.perf_counter, time.perf_counter_ns, time.monotonic,
               time.monotonic_ns, time.process_time, time.process_time_ns)
}
_DATE_CLOCKS = {"now", "utcnow", "today"}  # classmethods of datetime.datetime and datetime.date


def _random_owners() -> tuple[type, ...]:
    owners: list[type] = [random.Random]
    try:
        import numpy as np

        owners += [np.random.RandomState, np.random.Generator]
    except ImportError:  # (NumPy is optional)
        pass
    return tuple(owners)


_OWNERS = _random_owners()


def _drawn_from_outside(fn: WrappedValue, args) -> tuple[object, str] | None:
    """``(generator, method name)`` when ``fn`` draws from a generator the trace did not create
    (a module's or an attribute's, rooted where the prologue reads: a generator created and seeded
    inside the function draws the same numbers on every call, which the trace may bake in)."""
    value, holder = fn.value, fn
    owner = getattr(value, "__self__", None)
    if not isinstance(owner, _OWNERS) and args and type(args[0]) is WrappedValue and isinstance(args[0].value, _OWNERS):
        # thunder calls a builtin method as its class's function on the instance
        owner, holder = args[0].value, args[0]
        if inspect.getattr_static(type(owner), getattr(value, "__name__", ""), None) is not value:
            return None
    name = getattr(value, "__name__", "")
    if not isinstance(owner, _OWNERS) or name.startswith("__"):
        return None
    pr = holder.provenance
    if pr is None or not rooted_in_prologue(pr):
        return None
    return owner, name


def check_random_call(fn: WrappedValue, args) -> None:
    drawn = _drawn_from_outside(fn, args)
    if drawn is None:
        return
    owner, name = drawn
    where = interpreted_line()
    raise RandomCallError(
        f"{type(owner).__module__.split('.')[0]}.{name}() draws a new number on every call, but thunder runs "
        f"it once while tracing and the compiled entry would reuse that number on every later call"
        + (f" (at {where})" if where else "")
        + ". Draw with torch (torch.rand, torch.bernoulli: traced as random ops), or draw outside the "
        "jitted function and pass the number in."
    )


def _clock_name(fn) -> str | None:
    """``time.time``, ``datetime.now``: the clock ``fn`` reads, else None."""
    if type(fn) is not types.BuiltinFunctionType:  # (clocks are builtins; a proxy's ``==`` is traced)
        return None
    name = _CLOCKS.get(fn)
    if name is not None:
        return name
    owner = fn.__self__
    if (owner is datetime.datetime or owner is datetime.date) and fn.__name__ in _DATE_CLOCKS:
        return f"{owner.__name__}.{fn.__name__}"
    return None


def _called_from_users_code() -> bool:
    """The calling frame's file is neither an installed package's, the standard library's,
    thunder's nor metatrace's."""
    path = calling_file()
    return path is not None and not path.startswith(OWN_CODE) and not is_library_file(path)


def check_clock_call(fn: WrappedValue) -> None:
    name = _clock_name(fn.value)
    if name is None or not _called_from_users_code():
        return
    where = interpreted_line()
    raise ClockCallError(
        f"{name}() returns a new value on every call, but thunder runs it once while tracing and the "
        f"compiled entry would reuse that value on every later call" + (f" (at {where})" if where else "")
        + ". Read the clock outside the jitted function and pass the value in."
    )


# C calls that take an iterator without reading from it
_NOT_ADVANCING = frozenset({iter, isinstance, type, id, callable})


def _preexisting_iterator(args) -> object | None:
    """An argument that is an iterator the prologue can read again (it existed before the call:
    a global's, a closure's, a module attribute's), else None. Files are iterators too,
    but writing to one is output (a log line), not reading an item."""
    for a in args:
        if type(a) is WrappedValue and hasattr(type(a.value), "__next__") and not isinstance(a.value, io.IOBase):
            # (an argument's is checked as an argument of its kind: an iterator never matches
            # again, so every call compiles and follows eager; tests/guards/test_argument_kinds.py)
            if a.provenance is not None and rooted_in_prologue(a.provenance) and not rooted_in_arguments(a.provenance):
                return a.value
    return None


def check_iterator_call(compilectx, fn, args: tuple, kwargs: dict) -> None:
    """Refuses C code given an iterator that existed before the call (``type(it).__next__(it)``
    is how thunder calls ``next(it)``'s C method)."""
    it = _preexisting_iterator(args)
    if it is None or type(fn) is not WrappedValue or fn.value in _NOT_ADVANCING:
        return
    if getattr(fn.value, "__name__", None) == "__iter__":  # (an iterator's is itself: ``iter(it)``, a ``for``'s start)
        return
    if not would_call_opaque(compilectx, fn.value, args, kwargs):
        return
    where = interpreted_line()
    name = getattr(fn.value, "__qualname__", None) or getattr(fn.value, "__name__", repr(fn.value))
    raise PreexistingIteratorError(
        f"{name}() advances the {type(it).__name__} iterator {it!r}, which existed before the call, in C code: "
        "thunder runs it once while tracing, and the compiled entry would reuse the items it read on every later "
        "call while the iterator stayed where tracing left it" + (f" (at {where})" if where else "")
        + ". Take the item outside the jitted function and pass it in, or create the iterator inside the function."
    )


def before_call(fn, args: tuple) -> None:
    """Refuses a call whose result the trace would bake in although it changes on every call."""
    if type(fn) is WrappedValue:
        check_random_call(fn, args)
        check_clock_call(fn)
