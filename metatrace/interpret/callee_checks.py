"""A function the trace inlines is checked where it was read from a global or a closure cell:
rebinding it (``helper = other``) or changing its defaults (``helper.__defaults__ = (3,)``, a
mutable default mutated) misses the entry.

thunder's interpreter enters every Python function the traced code calls, so the trace holds the
function's body and, bound as constants (``wrap_const``), its defaults. Stock thunder's prologue
checks neither: after a rebinding a reused entry returns the old function's result.

Where the callee was read from a function's ``__globals__`` or ``__closure__`` (the state a
user rebinds), the prologue checks it by identity and its ``__defaults__``/``__kwdefaults__`` by
contents (:func:`metatrace.guards.value_checks.add_value_check`; the jitted function's own
defaults are :func:`metatrace.interpret.jit.check_defaults`'). One check per global or cell: the
same helper read by every layer of a model is one entry of one dict. Functions reached through a
module of code (``torch.nn.functional``), through a class (methods) or through an argument are
not checked (code, not state; an argument's structure is :mod:`metatrace.guards.structure`'s).
"""

from __future__ import annotations

import functools
import types

import thunder.core.interpreter as interpreter
import thunder.core.jit_ext as jit_ext
from thunder.core.interpreter import ProvenanceRecord, PseudoInst

from metatrace.guards.value_checks import add_value_check, traced_value
from metatrace.interpret.python_values import (
    _attribute_name,
    _may_register_for_prologue,
    _rooted_in_arguments,
    _rooted_in_prologue,
    _through_python_module,
)
from metatrace.metas import concretizations
from metatrace.patching import Patch, attribute

_WHY = "a function the trace inlines"


def _read_from(pr: ProvenanceRecord) -> str | None:
    """``"globals"`` for ``<fn>.__globals__[name]``, ``"closure"`` for ``<fn>.__closure__[i].cell_contents``."""
    if pr.inst is PseudoInst.BINARY_SUBSCR and len(pr.inputs) == 2 and _attribute_name(pr.inputs[0]) == "__globals__":
        return "globals"
    if pr.inst is PseudoInst.LOAD_ATTR and _attribute_name(pr) == "cell_contents" and len(pr.inputs) == 2:
        cells = pr.inputs[0]
        if cells.inputs and _attribute_name(cells.inputs[0]) == "__closure__":
            return "closure"
    return None


def check_callee(wrapped_fn) -> None:
    fn = wrapped_fn.value
    pr = getattr(wrapped_fn, "provenance", None)
    if not isinstance(fn, types.FunctionType) or pr is None or _read_from(pr) is None:
        return
    if (not _may_register_for_prologue(pr) or not _rooted_in_prologue(pr) or _rooted_in_arguments(pr)
            or _through_python_module(pr)):
        return
    try:
        ctx = jit_ext.get_jit_ctx()
    except LookupError:
        return
    # the dict or cell the callee was read from, and the name in it: one check for all paths to it
    container = traced_value(pr.inputs[0], call=getattr(ctx, "_metatrace_call", None),
                             fn=getattr(ctx, "_metatrace_fn", None))
    if container is NotImplemented:
        return
    seen = ctx.__dict__.setdefault("_metatrace_callees", set())
    key = (id(container), _attribute_name(pr))
    if key in seen:
        return
    seen.add(key)
    add_value_check(ctx, pr, fn, _WHY)
    for attr in ("__defaults__", "__kwdefaults__"):
        value = getattr(fn, attr)
        if value:
            history = ProvenanceRecord(PseudoInst.LOAD_ATTR, inputs=[pr, ProvenanceRecord(PseudoInst.CONSTANT, inputs=[], value=attr)])
            add_value_check(ctx, history, value, "defaults are bound as constants")


def _entering(original):
    @functools.wraps(original)
    def _setup_frame_and_run_python_function(compilectx, runtimectx, wrapped_fn, /, *args, **kwargs):
        if concretizations.COLLECTOR.get() is not None:
            check_callee(wrapped_fn)
        return original(compilectx, runtimectx, wrapped_fn, *args, **kwargs)

    return _setup_frame_and_run_python_function


def patches() -> list[Patch]:
    return [attribute(interpreter, "_setup_frame_and_run_python_function", _entering,
                      "a function read from globals or a closure is checked by identity and defaults", wrap=True)]
