"""The epilogue replays the net attribute stores of a trace, not a store that a later one undid.

thunder records a store into an object's ``__dict__`` (``self.x = v`` on a module, or on an
object reached from one) in ``JitCtx._additional_outputs`` and replays the last recorded store
of each key in the epilogue. It records only the stores that reach ``dict.__setitem__`` on a
``__dict__`` flagged as a module member's; later stores into the same (proxied) dict through
``object.__setattr__`` are applied but not recorded. transformers 5's output collector
(``CompileableContextVar``, global storage while ``torch.compiler.is_compiling()``, which thunder
answers True) sets ``global_var = {...}`` and resets it to ``None`` in a ``finally``: thunder
recorded only the first store and failed on every Hugging Face model ("trying to set .global_var
of ... to object of type dict"), and a value it could replay would be a store eager never makes.

The dict thunder modified holds the truth after interpretation: where its value of a recorded key
is the value the object held before the call (``original_value``), the call's net effect on that
key is nothing, and the record is dropped. (Where the final value differs from both the original
and the last recorded store, thunder still replays the recorded one: not seen in a model yet.)
"""

from __future__ import annotations

import functools

import thunder.core.jit_ext as jit_ext
from thunder.core.interpreter import PseudoInst

from metatrace.patching import Patch, attribute

_ABSENT = object()


def _net_stores(modified, records: list) -> list:
    """The records of one modified dict whose key's final value differs from its original one."""
    final, original = modified.value, modified.original_value
    if not isinstance(final, dict) or not isinstance(original, dict) or final is original:
        return records
    kept = []
    for record in records:
        inst, *args = record
        if inst == PseudoInst.STORE_SUBSCR:
            key = args[1].value
            if final.get(key, _ABSENT) is original.get(key, _ABSENT):
                continue  # restored before the call returned: no net store
        kept.append(record)
    return kept


def _replaying_net_stores(original):
    @functools.wraps(original)
    def process_recorded_modifications(ctx, epilogue_trace):
        for modified in list(ctx._additional_outputs):
            kept = _net_stores(modified, ctx._additional_outputs[modified])
            if kept:
                ctx._additional_outputs[modified] = kept
            else:
                del ctx._additional_outputs[modified]
        return original(ctx, epilogue_trace)

    return process_recorded_modifications


def patches() -> list[Patch]:
    return [attribute(jit_ext, "process_recorded_modifications", _replaying_net_stores,
                      "a store undone before the call returns (transformers' output collector) is not replayed",
                      wrap=True)]
