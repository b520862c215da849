"""A tensor's metadata read in the user's code is eager's: torch's dtype and device, an input's contiguity.

A tensor's ``dtype`` and ``device``, read in the user's code, are torch's objects, as in eager.

thunder's interpreter reads them from the proxy, which holds thunder's own (``thunder.dtypes.float32``,
``thunder.devices.Device``), and these compare unequal to torch's: ``x.dtype == torch.float32``
and ``x.dtype is torch.float32`` were False for a float32 ``x``, so a branch on a dtype took the
wrong arm (``-x if x.dtype != torch.bool else ~x`` negated a bool tensor), ``str(x.device)`` was
``"thunder.devices.Device(type='cpu')"`` and ``x.dtype.itemsize`` raised. Both values are
constants of the cache entry: the prologue checks every input tensor's dtype and device.

``torch.device(...)`` in the user's code makes torch's device too (thunder's makes its own, which
would compare unequal to ``x.device``); thunder's constructor still checks its arguments.

thunder's own code reads the proxy's attributes directly (not through the interpreter) and
still sees thunder's objects; the torch-level operators the user's code calls take torch's.

``x.is_contiguous(...)`` of an input tensor is the input's answer (thunder models every tensor
as contiguous), checked in the prologue (``metatrace.guards.value_checks.ExpectedContiguity``);
of an intermediate it is thunder's.
"""

from __future__ import annotations

import functools

import thunder.core.jit_ext as jit_ext
from thunder.core.devices import to_torch_device
from thunder.core.dtypes import to_torch_dtype
from thunder.core.proxies import TensorProxy

import thunder.torch as ltorch
import torch

from metatrace.state import compile_context
from metatrace.guards import provenance
from metatrace.state.compile_session import current_jit_ctx, session
from metatrace.state.registry import EXPECTED, new_id
from metatrace.guards.value_checks import ExpectedContiguity, ValueConstraint
from metatrace.patching import SYMBOL_METAS, Patch, attribute, item

_GENERAL = "thunder.core.jit_ext._general_jit_lookaside_map"


def _dtype(self):
    return to_torch_dtype(self.dtype)


def _device(self):
    return to_torch_device(self.device)


def _torch_device(type, index=None):
    return to_torch_device(ltorch.torch_device(type, index))


def _is_contiguous_meta(original):
    @functools.wraps(original)
    def meta(a, *args, **kwargs):
        result = original(a, *args, **kwargs)
        if compile_context.collector() is None or not isinstance(a, TensorProxy):
            return result
        ctx = current_jit_ctx()
        if ctx is None:
            return result
        real = provenance.replay(a.history, call=session(ctx).call)
        if not isinstance(real, torch.Tensor):
            return result  # an intermediate: thunder's answer (it models every result as contiguous)
        memory_format = kwargs.get("memory_format", args[0] if args else torch.contiguous_format)
        expected = real.is_contiguous(memory_format=memory_format)
        value_id = new_id("v")
        EXPECTED[value_id] = ExpectedContiguity(
            memory_format, expected, f"{provenance.text(a.history)}.is_contiguous() == {expected} (read by the trace)"
        )
        ctx.add_constraint((ValueConstraint(value_id), a))
        return expected

    return meta


def patches() -> list[Patch]:
    is_contiguous = ltorch._torch_to_thunder_function_map[torch.Tensor.is_contiguous]
    return [
        item(jit_ext._general_jit_lookaside_map, torch.device, jit_ext.interpreter_needs_wrap(_torch_device),
             "torch.device(...) in the user's code is torch's device", label=_GENERAL),
        item(jit_ext._general_jit_lookaside_map, TensorProxy.dtype.fget, jit_ext.interpreter_needs_wrap(_dtype),
             "x.dtype in the user's code is torch's dtype", label=_GENERAL),
        item(jit_ext._general_jit_lookaside_map, TensorProxy.device.fget, jit_ext.interpreter_needs_wrap(_device),
             "x.device in the user's code is torch's device", label=_GENERAL),
        attribute(is_contiguous, "meta", _is_contiguous_meta, "is_contiguous of an input is the argument's, checked",
                  wrap=True, label=SYMBOL_METAS),
    ]
