"""Attributes of the jitted module that its ThunderModule shadows are read from the user's module.

thunder's prologue reads the jitted module as its ThunderModule (``get_thunder_module(module0)``),
which hands a missing attribute on to the model (``ThunderModule.__getattr__``) but holds
``nn.Module``'s own instance state itself: ``_buffers``, ``_parameters``, ``_modules``, its hook
dicts, thunder's overrides, its ``__dict__`` and class. So the record ``self._buffers`` (the dict ``register_buffer``
stores into) read the wrapper's empty dict: the epilogue replayed ``register_buffer("acc", ...)``
into the wrapper, the model never had the buffer, and every later call registered a fresh one
(a running sum restarted on every call, silently; stock thunder drops the store); a
``functools.cached_property`` stored its value in the wrapper's ``__dict__``. thunder reads
an attribute of a module from the user's module where the record carries
``EXT_FLAG_IS_CALLABLE`` (``jit_ext.unpack_inputs``' ``from_load_attr``, meant for methods);
such reads get that flag as the interpreter makes them.
"""

from __future__ import annotations

import functools

import thunder.core.jit_ext as jit_ext
import torch
from thunder.core.interpreter import PseudoInst, WrappedValue
from metatrace.metas.proxy_edits import add_record_flag


@functools.cache
def _shadowed() -> frozenset[str]:
    """The instance attributes of a ThunderModule (``_buffers``, ``_overrides_parameters``, ...),
    its ``__dict__`` and ``__class__``."""
    from thunder.core.module import ThunderModule

    return frozenset(vars(ThunderModule(torch.nn.Module(), None))) | {"_model", "__dict__", "__class__"}


def read_from_the_model(value: WrappedValue) -> None:
    """Marks ``self.<name>`` read from the jitted module, where its wrapper holds ``<name>`` itself,
    to be read from the user's module."""
    pr = value.provenance
    if pr is None or pr.inst is not PseudoInst.LOAD_ATTR:
        return
    base, name = pr.inputs
    if (base.inst is PseudoInst.INPUT_FN and base.ext_flag & jit_ext.EXT_FLAG_IS_MODULE
            and name.inst is PseudoInst.CONSTANT and name.value in _shadowed()):
        add_record_flag(pr, jit_ext.EXT_FLAG_IS_CALLABLE)
