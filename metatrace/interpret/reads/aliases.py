"""One object read from the user's state through two paths: the prologue checks that both still lead
to one object.

thunder's interpreter keeps one wrapper per object (``interpreter.wrap`` returns the wrapper it
made at the object's first read, by ``id``) and a wrapper carries the provenance of that first
read. So ``f(x, c)`` that reads ``c.n`` and the global ``CFG.n``, called with ``c`` being ``CFG``,
reads ``CFG.n`` as ``args[1].n``: the prologue checks ``args[1].n`` and never ``CFG``, and a later
call after ``CFG = Cfg(5)`` reused the entry (a wrong result; the same for a global function
that is also an argument, or a module attribute: ``ACT`` and ``self.act``). Every read that got a
wrapper made for another path (both replayable by the prologue) adds the check ``<second path>
is <first path>`` (equal values of the same type for strings, numbers and other immutable
leaves, which Python may or may not share): a call where the two paths lead to different objects
misses. Not checked: an item of an object's ``__dict__`` (thunder wraps them all when it reads the
dict; the trace's reads of the attribute come as ``obj.k``) and a module object (``F`` in two
files' globals: a global rebound to another module between calls is not followed). Where the first path is computed by the call, the object flows from that computation and
the trace replays it; where the call itself made the paths one object (``self.cache =
self.cfg``), the check is dropped on the call that compiled the entry (it read the stored value).
"""

from __future__ import annotations

import functools
import inspect
import sys
import types

import thunder.core.interpreter as interpreter
import thunder.core.jit_ext as jit_ext
from thunder.core.interpreter import WrappedValue

from metatrace.guards import provenance
from metatrace.guards.provenance import Read
from metatrace.state.compile_session import current_jit_ctx, session
from metatrace.guards.value_checks import add_alias_check
from metatrace.patching import Patch, attribute
from metatrace.state import compile_context


def _noting_aliases(original):
    @functools.wraps(original)
    def wrap(value, /, *, provenance):
        wrapped = original(value, provenance=provenance)
        # a wrapper made for another read (thunder's per-object cache), during a compile that checks
        if (type(wrapped) is WrappedValue and wrapped.provenance is not provenance and type(value) is not WrappedValue
                and compile_context.collector() is not None):
            _check_alias(wrapped, provenance)
        return wrapped

    return wrap


def _check_alias(wrapped: WrappedValue, second) -> None:
    first = wrapped.provenance
    if first is None or type(wrapped.value) is types.ModuleType or _a_dict_item(second):
        return
    if not provenance.may_register_for_prologue(second) or not provenance.rooted_in_prologue(second):
        return  # (the second path is computed inside the call: the object flows from the first)
    ctx = current_jit_ctx()
    if ctx is None:
        return
    if provenance.key(first) == provenance.key(second) or _implied(ctx, wrapped.value, first, second):
        return
    if provenance.may_register_for_prologue(first) and provenance.rooted_in_prologue(first):
        add_alias_check(ctx, second, first, wrapped.value)
    # (else the first path is computed by the call, and the object flows from that computation:
    # a cached property's value read back, an object stored and read again)


def _a_dict_item(record) -> bool:
    """``obj.__dict__[k]``: thunder wraps every item of an object's ``__dict__`` when it reads the
    dict (an attribute lookup), so such a read is not the trace's use of the item; the trace's own
    reads of the attribute come as ``obj.k``."""
    step = provenance.last_read(record)
    if step is None or step.kind is not Read.ITEM:
        return False
    inner = provenance.last_read(step.base)
    return inner is not None and inner.kind is Read.ATTR and inner.key == "__dict__"


def _implied(ctx, value, first, second) -> bool:
    """Whether the two paths lead to one object by Python's own rules, whatever the user's state:

    - ``b.k`` and ``b.__dict__['k']`` where ``b``'s class has no data descriptor ``k`` (an
      instance's attribute is its dict's item);
    - ``a.k`` and ``b.k`` where neither object has ``k`` of its own and their classes resolve ``k``
      to the one object (a method or class attribute, looked up through the classes: the classes are
      checked where the trace called or read them);
    - a module's globals dict (``f.__globals__``: a function's globals cannot be rebound, and the
      function is checked where the trace called it)."""
    if type(value) is dict and isinstance(value.get("__name__"), str):
        module = sys.modules.get(value["__name__"])
        if module is not None and vars(module) is value:
            return True
    a, b = provenance.parse(first).last, provenance.parse(second).last
    if a is None or b is None or not (a.known and b.known):
        return False
    for x, y in ((a, b), (b, a)):
        if x.kind is Read.ATTR and y.kind is Read.ITEM and x.key == y.key:
            inner = provenance.last_read(y.base)
            if (inner is not None and inner.kind is Read.ATTR and inner.key == "__dict__"
                    and provenance.key(inner.base) == provenance.key(x.base)):
                owner = _replayed(ctx, x.base)
                if owner is NotImplemented:
                    return False
                found = inspect.getattr_static(type(owner), x.key, None)  # (only a data descriptor
                return not (hasattr(type(found), "__set__") or hasattr(type(found), "__delete__"))  # wins)
    if a.kind is Read.ATTR and b.kind is Read.ATTR and a.key == b.key and isinstance(a.key, str):
        owners = (_replayed(ctx, a.base), _replayed(ctx, b.base))
        if any(o is NotImplemented or a.key in getattr(o, "__dict__", {a.key: None}) for o in owners):
            return False
        found = [inspect.getattr_static(type(o), a.key, NotImplemented) for o in owners]
        return found[0] is not NotImplemented and found[0] is found[1]
    return False


def _replayed(ctx, record):
    compile_session = session(ctx)
    return provenance.replay(record, call=compile_session.call, fn=compile_session.fn)


def patches() -> list[Patch]:
    why = "an object read through a second path is checked to be the one read through the first"
    return [attribute(interpreter, "wrap", _noting_aliases, why, wrap=True),
            attribute(jit_ext, "wrap", _noting_aliases, why, wrap=True)]
