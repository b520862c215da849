"""Values user code reads from its state: which get a prologue check of their contents.

Values the trace reads from the function's globals, closures, defaults and the user's modules
(installed packages are code: ``metatrace.interpret.reads.library_code``) that are not numbers or
tensors (a dtype, an enum, a list mutated in place, a callable attribute) get a prologue check of
their contents (``metatrace.guards.value_checks``), through thunder's wrap callback, which sees
every value the interpreter reads. :func:`needs_value_check` is the policy: which values the
trace may bake in without a guard, and which are checked elsewhere (arguments, tensors,
parameters and buffers) or are namespaces, torch's bookkeeping or code.
"""

from __future__ import annotations

import enum
import functools
import types

import thunder.core.jit_ext as jit_ext
import torch
from thunder.core.interpreter import INTERPRETER_CALLBACKS, ProvenanceRecord, WrappedValue
from thunder.core.proxies import Proxy

from metatrace.state import compile_context
from metatrace import patching
from metatrace.guards import provenance
from metatrace.state.compile_session import current_jit_ctx, session
from metatrace.guards.provenance import (
    EXT_FLAG_LIBRARY_MODULE,
    attribute_name,
    may_register_for_prologue,
    read_from_module_instance,
    rooted_in_arguments,
    rooted_in_prologue,
    through_library_module,
    through_module_tensors,
)
from metatrace.guards.value_checks import CONTAINER_TYPES, add_value_check
from metatrace.interpret.reads.argument_reads import check_argument_read
from metatrace.interpret.reads.library_code import is_library_module
from metatrace.interpret.interpreted_frames import calling_file, package_dir
from metatrace.interpret.modules.shadowed_attributes import read_from_the_model
from metatrace.patching import Patch
from metatrace.metas.proxy_edits import add_record_flag

# Packages whose own reads are not checked: ``logging`` fills a logger's ``_cache`` while it logs
# (the check would see the value change during the trace and refuse the entry), and what it reads
# decides only what is logged, never a value of the trace.
_SIDE_CHANNEL_CODE = (package_dir(__import__("logging")),)


_CHECKED_LEAVES = (torch.dtype, torch.layout, torch.memory_format, type(None), range, bytes, frozenset, set)
# nn.Module's own bookkeeping attributes (hooks, flags ``Module.__call__`` reads on every call):
# torch's state, not the model's; checking them would cost a prologue check per submodule. A
# submodule's ``_modules`` is checked (``ModuleList.append``, a replaced submodule).
_MODULE_INTERNALS = frozenset(torch.nn.Module().__dict__) - {"training", "_modules"} | {"_compiled_call_impl"}
# Namespaces, not values: the trace reads single entries of them, and each entry read is checked
# on its own. Parameters and buffers: thunder checks each tensor it reads.
_SKIPPED_MEMBER_DICTS = frozenset({"_parameters", "_buffers", "__dict__", "__globals__", "__builtins__", "__closure__"})


_ITERATED_CONTAINERS = (torch.nn.ModuleList, torch.nn.ModuleDict, torch.nn.Sequential)


def _iterated_container(owner_pr: ProvenanceRecord) -> bool:
    """The module whose ``_modules`` is read (found from the jitted module along the provenance)
    is a container whose submodules user code iterates."""
    if provenance.is_jitted_function(owner_pr):
        return False
    ctx = current_jit_ctx()
    if ctx is None:
        return True
    owner = provenance.replay(owner_pr, fn=session(ctx).fn)
    return owner is NotImplemented or isinstance(owner, _ITERATED_CONTAINERS)


def needs_value_check(value: WrappedValue) -> bool:
    """A value the trace may bake in, read from outside the call's arguments (the arguments'
    structure and leaves are ``metatrace.guards.structure``'s), whose provenance the prologue replays."""
    pr = value.provenance
    if not may_register_for_prologue(pr):
        return False  # most values the interpreter wraps: constants, results of instructions
    u = value.value
    t = type(u)
    if isinstance(u, (Proxy, torch.Tensor, torch.nn.Module, types.ModuleType, type)):
        return False
    if read_from_module_instance(pr) and attribute_name(pr) in _MODULE_INTERNALS:
        return False
    if t in CONTAINER_TYPES and t not in (set, frozenset):
        name = attribute_name(pr)
        if name in _SKIPPED_MEMBER_DICTS:
            return False  # namespaces; parameters and buffers: thunder checks each tensor it reads
        if name == "_modules" and not _iterated_container(provenance.last_read(pr).base):
            # Only a ModuleList/ModuleDict/Sequential's submodules are iterated (their number is
            # baked in: ``ModuleList.append``); another module's are read one by one, each name
            # through the submodule it gives (one check per submodule would cost every call).
            # The root's is never checked: the prologue reads it from thunder's ThunderModule.
            return False
    elif t in _CHECKED_LEAVES or isinstance(u, enum.Enum):
        pass
    elif isinstance(u, (types.FunctionType, types.BuiltinFunctionType, functools.partial)):
        # A function stored on a module instance (``self.act = F.gelu``): replaced, the trace
        # would still call the old one. Functions reached through modules of code are not, nor
        # a class's own (``Module.__getattr__``: the prologue would read a bound method).
        name = attribute_name(pr)
        if not read_from_module_instance(pr) or not isinstance(name, str) or name.startswith("__"):
            return False
    else:
        return False
    if pr.ext_flag & jit_ext.EXT_FLAG_IS_TENSOR_PROXY:
        return False
    return (
        rooted_in_prologue(pr)
        and not rooted_in_arguments(pr)
        and not through_module_tensors(pr)
        and not through_library_module(pr)
        and not (calling_file() or "").startswith(_SIDE_CHANNEL_CODE)
    )


def _wrap_callback(original):
    def wrap_callback(value: WrappedValue):
        res = original(value)
        read_from_the_model(value)
        if isinstance(value.value, types.ModuleType):
            if is_library_module(value.value):
                add_record_flag(value.provenance, EXT_FLAG_LIBRARY_MODULE)
            return res
        if compile_context.collector() is not None and may_register_for_prologue(value.provenance):
            check_argument_read(value)  # (a value of the arguments: checked by its kind)
            if needs_value_check(value):
                ctx = current_jit_ctx()
                if ctx is None:
                    return res
                add_value_check(ctx, value.provenance, value.value, "read by the trace")
        return res

    return wrap_callback


def patches() -> list[Patch]:
    return [
        patching.item(jit_ext.general_jit_callbacks, INTERPRETER_CALLBACKS.WRAP_CALLBACK, _wrap_callback,
                      "the wrap callback also checks, by contents, values the trace reads from globals, closures "
                      "and modules (dtypes, enums, containers mutated in place, callable attributes); thunder checks "
                      "none of them", wrap=True, label="thunder.core.jit_ext.general_jit_callbacks"),
    ]
