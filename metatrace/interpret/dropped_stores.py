"""An attribute the function stores that thunder's epilogue would drop is an error, not a silent loss.

thunder writes an attribute store back after the call (``prims.pack_attr`` in the epilogue) only
for an object it proxied; for the others (the jitted module's own ``__dict__``, where
``nn.Module.__setattr__`` puts a plain tensor) ``process_recorded_modifications`` skips the store
without a word. The object keeps its old value, so a cache filled on the first call
(``if self.cache is None: self.cache = x * 2``) was recomputed on every call from that call's
input: eager returned ``x * 2 * x0``, thunder ``x * 2 * x`` (stock thunder too).

Before thunder processes the recorded modifications, a store it would skip into an object
reached from the call (the jitted module, its submodules, the arguments) raises
:class:`DroppedStoreError` naming the attribute; stores into objects of libraries reached from
globals (a context manager's or a generator's own state) are left to thunder. Stores into module buffers
(``register_buffer``) and into proxied objects are written back and stay allowed.
"""

from __future__ import annotations

import functools

import thunder.core.jit_ext as jit_ext
from thunder.core.interpreter import PseudoInst

from metatrace.errors import MetatraceError
from metatrace.patching import Patch, attribute


class DroppedStoreError(MetatraceError, NotImplementedError):
    """The jitted function stores an attribute thunder would not write back after the call."""


def _dropped(ctx) -> list[str]:
    """The attributes stored into an object's ``__dict__`` that thunder's epilogue skips."""
    dropped = []
    for modified, modifications in ctx._additional_outputs.items():
        pr = modified.provenance
        if not (isinstance(modified.value, dict) and pr.inst is PseudoInst.LOAD_ATTR
                and pr.inputs[1].inst is PseudoInst.CONSTANT and pr.inputs[1].value == "__dict__"):
            continue
        owner = pr.inputs[0]
        if hasattr(owner, "proxy") or not _rooted_in_the_call(owner):
            continue  # written back (prims.pack_attr); or a library's object (a context manager's state)
        for inst, *args in modifications:
            if inst is PseudoInst.STORE_SUBSCR:
                dropped.append(f"{_owner_text(owner)}.{args[1].value}")
    return dropped


_CALL_ROOTS = (PseudoInst.INPUT_FN, PseudoInst.INPUT_ARGS, PseudoInst.INPUT_KWARGS)


def _rooted_in_the_call(record) -> bool:
    """Whether the object was reached from the jitted function or its arguments (the user's
    module and what it holds), not from a global."""
    while record.inst not in _CALL_ROOTS:
        if not record.inputs:
            return False
        if record.inst is PseudoInst.LOAD_ATTR and _FUNCTION_STATE.intersection(_constants(record.inputs[1:])):
            return False  # the function's globals or closure: code's state, not the call's
        record = record.inputs[0]
    return True


_FUNCTION_STATE = {"__globals__", "__closure__", "__defaults__", "__kwdefaults__", "__code__"}


def _constants(records) -> set:
    return {r.value for r in records if r.inst is PseudoInst.CONSTANT and isinstance(r.value, str)}


def _owner_text(owner) -> str:
    if owner.inst is PseudoInst.INPUT_FN:
        return "self"
    return str(owner)


def _process(original):
    @functools.wraps(original)
    def process_recorded_modifications(ctx, epilogue_trace):
        dropped = _dropped(ctx)
        if dropped:
            raise DroppedStoreError(
                f"the function stores {', '.join(sorted(set(dropped)))} (an attribute of an object thunder does not "
                "write back after the call): the next call would read the old value. Store it outside the jitted "
                "function, or register it as a buffer (module.register_buffer) and copy into it"
            )
        return original(ctx, epilogue_trace)

    return process_recorded_modifications


def patches() -> list[Patch]:
    return [attribute(jit_ext, "process_recorded_modifications", _process,
                      "a store thunder would drop after the call raises, naming the attribute", wrap=True)]
