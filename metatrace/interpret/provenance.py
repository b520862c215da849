"""Questions metatrace asks of a value's provenance (thunder's ``ProvenanceRecord``: how the
interpreter reached the value, from the call's function, arguments, globals or constants).

Each walks from the value towards its root through item and attribute reads only: where the
value comes from (the call's arguments, a module's parameters, an installed package's module
object), what name an attribute read used, and whether thunder's prologue can read the value
again. The modules that decide which values get a prologue check (``python_values``,
``callee_checks``, ``called_modules``, ``unrepeatable_calls``, ``value_proxies``) ask these,
and none walks a provenance itself.
"""

from __future__ import annotations

import thunder.core.jit_ext as jit_ext
from thunder.core.interpreter import ProvenanceRecord, PseudoInst


def through_module_tensors(pr: ProvenanceRecord) -> bool:
    """Read through a module's ``_parameters`` or ``_buffers`` (a ``None`` bias): thunder's
    prologue unpacks those entries as tensors only."""
    while pr.inputs and pr.inst in (PseudoInst.BINARY_SUBSCR, PseudoInst.LOAD_ATTR):
        if attribute_name(pr) in ("_parameters", "_buffers"):
            return True
        pr = pr.inputs[0]
    return False


# Marks the provenance of an installed package's or the standard library's module object
# (``torch`` read from globals): what is read through it (``torch.int64``) is code, not state
# (:mod:`metatrace.interpret.library_code`); through the user's own modules it is state.
EXT_FLAG_LIBRARY_MODULE = 1 << 24


def through_library_module(pr: ProvenanceRecord) -> bool:
    """Read through an installed package's or the standard library's module object."""
    while pr.inputs and pr.inst in (PseudoInst.BINARY_SUBSCR, PseudoInst.LOAD_ATTR):
        pr = pr.inputs[0]
        if pr.ext_flag & EXT_FLAG_LIBRARY_MODULE:
            return True
    return False


def rooted_in_arguments(pr: ProvenanceRecord) -> bool:
    """An argument of the call, or read from one through items and attributes (``args[0].cfg``)."""
    while pr.inputs and pr.inst in (PseudoInst.BINARY_SUBSCR, PseudoInst.LOAD_ATTR):
        pr = pr.inputs[0]
    return pr.inst in (PseudoInst.INPUT_ARGS, PseudoInst.INPUT_KWARGS)


def read_from_module_instance(pr: ProvenanceRecord) -> bool:
    """``module.attr`` (an attribute lookup on a module object)."""
    return (
        pr.inst is PseudoInst.LOAD_ATTR
        and len(pr.inputs) == 2
        and bool(pr.inputs[0].ext_flag & jit_ext.EXT_FLAG_IS_MODULE)
    )


def attribute_name(pr: ProvenanceRecord):
    """The constant key of an attribute or item read (``'weight'`` of ``m.weight``), else None."""
    if pr.inst in (PseudoInst.LOAD_ATTR, PseudoInst.BINARY_SUBSCR) and len(pr.inputs) == 2:
        key = pr.inputs[1]
        if key.inst is PseudoInst.CONSTANT:
            return key.value
    return None


def may_register_for_prologue(pr: ProvenanceRecord) -> bool:
    """The top-level tests of ``jit_ext.should_register_for_prologue``, each of which makes it
    False: a provenance with no inputs (a constant), a tensor proxy's, or one whose instruction
    is not an input's (a value computed by the frame). A few attribute reads instead of a walk
    of the provenance, for the ~250k values a litgpt compile wraps."""
    if not pr.inputs or pr.ext_flag & jit_ext.EXT_FLAG_IS_TENSOR_PROXY:
        return False
    inst = pr.inst  # (``_value_``, not the ``value`` property: a plain attribute read)
    return (inst._value_ if type(inst) is PseudoInst else inst.opname) in jit_ext._input_provenance_inst


def rooted_in_prologue(pr: ProvenanceRecord) -> bool:
    """Whether thunder's prologue can read the value again (``jit_ext.should_register_for_prologue``;
    False where that walk raises)."""
    try:
        return jit_ext.should_register_for_prologue(pr)
    except Exception:
        return False



def an_argument_or_its_item(history) -> bool:
    """The value is an argument, or an element of one (``args[1][0]``, items only: an
    attribute of an argument is another value): ``metatrace.guards.structure`` checks the types
    of those numbers from the call's arguments."""
    while isinstance(history, ProvenanceRecord) and history.inst is PseudoInst.BINARY_SUBSCR and history.inputs:
        history = history.inputs[0]
    return isinstance(history, ProvenanceRecord) and history.inst in (PseudoInst.INPUT_ARGS, PseudoInst.INPUT_KWARGS)
