"""The prologue's operators on thunder's python executor, while enabled.

- The guard operation. thunder executes a prologue with its python executor; a bare new prim
  there fails with "Failed to find an executor", so the guard is an operator of that executor. It
  is tagged DONT_DCE (it has no output anyone uses) and raises
  :class:`metatrace.guards.collect.GuardFailure` when the relation does not hold.
- thunder's tensor check (``check_tensor_metadata``), the same test made cheaper. The prologue
  runs it once per tensor input on every call, and it cost 1.5 us there: ``str(t.device)``
  builds a string each time, and the shape is compared element by element through a lambda.
  The replacement compares the shape as one tuple and reads the device's string from a cache.
  Anything it does not accept goes to thunder's own check, which raises thunder's own message.
  This keeps a hit's prologue at or below stock's even though metatrace adds its guard call.
"""

from __future__ import annotations

import torch
from thunder.core.prims import OpTags, PrimIDs

from metatrace.state import registry
from metatrace.guards.compiled_program import check_guards
from metatrace.state.registry import guard_symbol, structure_symbol  # noqa: F401  (where callers look for them)
from metatrace.guards.structure import check_structure
from metatrace.patching import Patch, item

NAME = "metatrace_guards"
STRUCTURE_NAME = "metatrace_structure"


def _meta(program_id: str, *leaves) -> None:
    return None


def _structure_meta(structure_id: str, value, *aliased) -> None:
    return None


def _operator(name: str, meta, fn):
    def register(previous):
        from thunder.executors.pythonex import ex

        assert previous is None, f"{name} is already registered on the python executor"
        # register_operator stores the new symbol in ex.opmap itself; the row stores the same object
        return ex.register_operator(name, meta=meta, fn=fn, tags=[OpTags.DONT_DCE])

    return register


TENSOR_CHECK_NAME = "check_tensor_metadata"  # thunder's name for it: prologues print the same


def _cheaper_tensor_check(original):
    device_names: dict[torch.device, str] = {}

    def check_tensor_metadata(t, shape, device, dtype, requires_grad) -> None:
        # All of thunder's conditions. A tuple compares its elements with ==, as thunder's element
        # loop does; thunder's loop skips a NumberProxy in ``shape``, which a prologue running on
        # values never passes: any other ``shape`` (a list, a Size) goes to thunder's check.
        if (
            isinstance(t, torch.Tensor)
            and type(shape) is tuple
            and t.shape == shape
            and t.dtype == dtype
            and t.requires_grad == requires_grad
            and (device_names.get(t.device) or device_names.setdefault(t.device, str(t.device))) == device
        ):
            return None
        return original(t, shape, device, dtype, requires_grad)

    return check_tensor_metadata


def _tensor_check_operator(previous):
    from thunder.core import prims
    from thunder.executors.pythonex import _check_tensor_shape_and_metadata_impl, ex

    # register_operator puts the new symbol in ex.opmap under thunder's name; the row undoes it
    return ex.register_operator(TENSOR_CHECK_NAME, like=prims.check_tensor_shape_and_metadata,
                                fn=_cheaper_tensor_check(_check_tensor_shape_and_metadata_impl))


def _tensor_check_impl(previous):
    from thunder.extend import ImplInfo
    from thunder.executors.pythonex import ex

    return ImplInfo(symbol=ex.opmap[TENSOR_CHECK_NAME], checker=previous.checker)


def patches() -> list[Patch]:
    from thunder.executors.pythonex import ex

    why = "the prologue operators metatrace_guards/metatrace_structure"
    opmap = "executor python.opmap"
    return [
        item(ex.opmap, NAME, _operator(NAME, _meta, check_guards), why, wrap=True, label=opmap),
        item(ex.opmap, STRUCTURE_NAME, _operator(STRUCTURE_NAME, _structure_meta, check_structure), why, wrap=True,
             label=opmap),
        # where the prologue builder finds them (None while disabled)
        item(registry._symbols, "guards", lambda _: ex.opmap[NAME], why, wrap=True, label="metatrace.state.registry"),
        item(registry._symbols, "structure", lambda _: ex.opmap[STRUCTURE_NAME], why, wrap=True,
             label="metatrace.state.registry"),
        # the prologue's per-tensor check, the same test at a third of the cost (see the docstring)
        item(ex.opmap, TENSOR_CHECK_NAME, _tensor_check_operator, "a cheaper prologue tensor check", wrap=True,
             label=opmap),
        item(ex.implmap, PrimIDs.CHECK_TENSOR_SHAPE_AND_METADATA, _tensor_check_impl,
             "a cheaper prologue tensor check", wrap=True, label="executor python.implmap"),
    ]
