"""Dict literals keep track of their items, as list literals do in thunder's interpreter.

thunder's ``BUILD_MAP`` and ``BUILD_CONST_KEY_MAP`` handlers build the dict from unwrapped
values, so its items have no wrappers: where the function returns ``{"l": l}``, thunder's
epilogue (``jit_ext.build_value_from_wrapped``) finds no item to follow and prints the list ``l``
(an object that existed before the call) into the epilogue as a literal of its contents at
compile time: every call returned that old copy instead of ``l`` itself, and a tensor inside an
untracked dict item was baked in the same way. ``BUILD_LIST`` records its items' wrappers; these
handlers now do the same (the provenance of each key and value), so the epilogue returns the
trace's values and the call's own objects.
"""

from __future__ import annotations

import functools

import thunder.core.interpreter as interpreter
from thunder.core.interpreter import ProvenanceRecord, get_interpretercompilectx, wrap, wrap_const

from metatrace.patching import Patch, item
from metatrace.metas.proxy_edits import set_item_wrapper


def _wrapped_dict(inst, pairs: list) -> object:
    """``{k: v ...}`` of wrapped keys and values, later keys winning as in Python."""
    d = {}
    for k, v in pairs:
        d[k.value] = v.value
    result = wrap(d, provenance=ProvenanceRecord(inst, inputs=[w.provenance for pair in pairs for w in pair]))
    for k, v in pairs:
        set_item_wrapper(result, k.value, v, key_wrapper=k)
    return result


def _map_pairs(inst, stack) -> list:
    """``BUILD_MAP``'s operands, popped: ``inst.arg`` keys and values (k0, v0, k1, v1, ...)."""
    flat = [stack.pop_wrapped() for _ in range(2 * inst.arg)][::-1]
    return list(zip(flat[::2], flat[1::2]))


def _const_key_map_pairs(inst, stack) -> list:
    """``BUILD_CONST_KEY_MAP``'s operands, popped: ``inst.arg`` values under a constant tuple of keys."""
    keys = stack.pop_wrapped()
    values = [stack.pop_wrapped() for _ in range(inst.arg)][::-1]
    return [(wrap_const(k), v) for k, v in zip(keys.value, values, strict=True)]


def _tracking(pop_pairs):
    """A wrapper of thunder's handler of a dict literal's opcode whose operands ``pop_pairs`` pops:
    with provenance tracked, the dict of those pairs with its items' wrappers; else thunder's."""

    def tracked(original):
        @functools.wraps(original)
        def handler(inst, /, stack, **kwargs):
            if not get_interpretercompilectx()._with_provenance_tracking:
                return original(inst, stack=stack, **kwargs)
            stack.append(_wrapped_dict(inst, pop_pairs(inst, stack)))
            return None

        return handler

    return tracked


_tracked_build_map = _tracking(_map_pairs)
_tracked_build_const_key_map = _tracking(_const_key_map_pairs)


def patches() -> list[Patch]:
    label = "thunder.core.interpreter._default_opcode_handler_map"
    why = "a dict literal records its items' wrappers, so the epilogue returns the call's values, not compile-time copies"
    return [item(interpreter._default_opcode_handler_map, "BUILD_MAP", _tracked_build_map, why, wrap=True, label=label),
            item(interpreter._default_opcode_handler_map, "BUILD_CONST_KEY_MAP", _tracked_build_const_key_map, why,
                 wrap=True, label=label)]
