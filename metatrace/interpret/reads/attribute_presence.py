"""Whether an object has an attribute, as the trace decided it, is checked in the prologue.

``self.calls = getattr(self, "calls", 0) + 1``, ``if not hasattr(self, "cache"): ...``, ``try:
self.cache except AttributeError: ...``: lazy
state on a module or on an object the call was given. thunder's ``hasattr`` runs on the
unwrapped object and its ``getattr`` falls back to the default, and nothing in the prologue
checked the answer: once the first call had stored the attribute, every later call reused the
entry traced without it (the counter stayed at 1, silently). While metatrace compiles, each such
answer about an object the prologue can read again becomes a check ``hasattr(obj, name) is
<answer>``; a value read where the attribute is present is checked where it is read, as before.
Library modules (``hasattr(torch, "compiler")``) are code, not state, and are not checked.
"""

from __future__ import annotations

import functools
import types

import thunder.core.jit_ext as jit_ext
from thunder.core.interpreter import INTERPRETER_SIGNALS, WrappedValue, get_interpreterruntimectx, unwrap
from thunder.core.proxies import Proxy

from metatrace.state.compile_session import current_jit_ctx
from metatrace.guards import provenance
from metatrace.guards.value_checks import add_presence_check
from metatrace.interpret.interpreted_frames import called_from_thunder
from metatrace.patching import Patch, item
from metatrace.state import compile_context

_WHY = "the trace decided on it"


def _check_presence(obj: WrappedValue, name, present: bool) -> None:
    if compile_context.collector() is None or not isinstance(obj, WrappedValue) or type(unwrap(name)) is not str:
        return
    pr, u, uname = obj.provenance, obj.value, unwrap(name)
    if pr is None or uname.startswith("__") or isinstance(u, (Proxy, types.ModuleType)):
        return  # (a dunder's presence is its type's: the type is checked where the object is)
    if not (provenance.is_jitted_function(pr) or provenance.rooted_in_prologue(pr)):
        return
    if provenance.through_library_module(pr) or called_from_thunder():
        return
    ctx = current_jit_ctx()
    if ctx is None:
        return
    add_presence_check(ctx, pr, uname, present, _WHY)


def _hasattr(original):
    @functools.wraps(original)
    def hasattr_lookaside(obj, name):
        result = original(obj, name)
        if result is not INTERPRETER_SIGNALS.EXCEPTION_RAISED:
            _check_presence(obj, name, bool(unwrap(result)))
        return result

    return hasattr_lookaside


def _getattr(original):
    @functools.wraps(original)
    def getattr_lookaside(obj, name, *maybe_default):
        result = original(obj, name, *maybe_default)
        if maybe_default and result is maybe_default[0]:  # (thunder hands back the default it was given)
            _check_presence(obj, name, False)
        elif result is INTERPRETER_SIGNALS.EXCEPTION_RAISED and isinstance(
                get_interpreterruntimectx().curexc, AttributeError):  # ``try: self.calls except AttributeError``
            _check_presence(obj, name, False)
        return result

    return getattr_lookaside


def patches() -> list[Patch]:
    label = "thunder.core.jit_ext._general_jit_lookaside_map"
    lookasides = jit_ext._general_jit_lookaside_map
    return [item(lookasides, hasattr, _hasattr, "hasattr's answer about a pre-existing object is checked",
                 wrap=True, label=label),
            item(lookasides, getattr, _getattr, "getattr's fallback to its default is checked (the attribute absent)",
                 wrap=True, label=label)]
