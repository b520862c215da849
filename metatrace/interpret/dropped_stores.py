"""An attribute the function stores that thunder's epilogue would drop is an error, not a silent loss.

thunder writes an attribute store back after the call (``prims.pack_attr`` in the epilogue) only
for an object it proxied; for the others (the jitted module's own ``__dict__``, where
``nn.Module.__setattr__`` puts a plain tensor) ``process_recorded_modifications`` skips the store
without a word. The object keeps its old value, so a cache filled on the first call
(``if self.cache is None: self.cache = x * 2``) was recomputed on every call from that call's
input: eager returned ``x * 2 * x0``, thunder ``x * 2 * x`` (stock thunder too).

Before thunder processes the recorded modifications, a store it would skip raises
:class:`DroppedStoreError` naming the attribute. Stores into module buffers
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
        if hasattr(owner, "proxy"):
            continue  # thunder writes these back (prims.pack_attr)
        for inst, *args in modifications:
            if inst is PseudoInst.STORE_SUBSCR:
                dropped.append(f"{_owner_text(owner)}.{args[1].value}")
    return dropped


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
