"""Static module state under ``cache="symbolic values"``: parameter and buffer shapes, attributes.

A module's parameters and buffers do not change shape between calls, so giving them size
symbols only costs: every weight size becomes a prologue input, and thunder 0.2.6 cannot even
unpack one (a parameter reached through ``weight.shape[0]`` is unpacked as a fresh proxy
without the STATIC_MEMORY_LOCATION tag, and the prologue asserts). Parameters and buffers are
proxied with integer shapes instead; the prologue's ``check_tensor_shape_and_metadata`` then
checks those exact sizes, so a resized parameter misses the cache rather than reusing it.
Inputs keep their size symbols.

Numbers read from the module's attributes (``config.n_head``, ``dropout.p``, ``training``) are
made static the same way thunder's constant-values cache does it (``CONSTRAINT.STATIC``: the
prologue checks the value), as PyTorch's dynamo specializes on module attributes: they are
configuration, not inputs, and as symbols they only hide constants from metas and executors.
Until one changes: state the module keeps in ``forward`` (``self.steps += 1``, ``self.count +=
x.shape[0]``, an annealed ``self.temperature``) differs on every call, and a static value would
compile every call anew. So, as dynamo's automatic dynamic shapes do, a later compile of the same
jitted function that reads another value from the same place keeps that number symbolic from
then on (:func:`_static_until_changed`, remembered in the function's record).

Every value goes through ``metatrace.interpret.reads.value_proxies.proxify_static`` first: strings (arguments and module
attributes alike) stay static, slices get symbolic numbers.
"""

from __future__ import annotations

import contextlib
import functools

import thunder.core.jit_ext as jit_ext
import thunder.core.proxies as proxies
import torch
from thunder.core.proxies import CONSTRAINT, NumberProxy

from metatrace.guards import provenance
from metatrace.state import registry
from metatrace.guards.explain import recompile_logger
from metatrace.patching import Patch, attribute
from metatrace.interpret.reads import value_proxies

def is_module_state(t: torch.Tensor, history) -> bool:
    """A Parameter, or a tensor the interpreter read as ``module._parameters[name]`` /
    ``module._buffers[name]`` (buffers are plain tensors: only their provenance tells)."""
    return isinstance(t, torch.nn.Parameter) or provenance.reads_module_tensor(history)


@contextlib.contextmanager
def _integer_shapes():
    # tensorproxy (and TensorProxy's property inference) ask this module-level function
    # whether to make size symbols; answering False for this one call gives integer sizes.
    original = proxies.using_symbolic_values
    proxies.using_symbolic_values = lambda: False
    try:
        yield
    finally:
        proxies.using_symbolic_values = original


def _tensorproxy(original):
    @functools.wraps(original)
    def tensorproxy(t, /, *, name, history=None):
        if proxies.using_symbolic_values() and is_module_state(t, history):
            with _integer_shapes():
                return original(t, name=name, history=history)
        return original(t, name=name, history=history)

    return tensorproxy


def _proxify(original):
    @functools.wraps(original)
    def proxify(self, value):
        # Strings are static and slices keep symbolic numbers (metatrace.interpret.reads.value_proxies); the rest is thunder's.
        p = value_proxies.proxify_static(self, value)
        if p is not value_proxies.NOT_HANDLED:
            if type(p) is slice and provenance.read_from_jitted_module(value.provenance):
                for part in (p.start, p.stop, p.step):
                    if isinstance(part, NumberProxy):
                        part.constraint = CONSTRAINT.STATIC  # a module's slice is configuration too
            return p
        p = original(self, value)
        if (isinstance(p, NumberProxy) and proxies.using_symbolic_values()
                and provenance.read_from_jitted_module(value.provenance) and _static_until_changed(value)):
            # (checked by thunder when the computation takes it as an input, by
            # metatrace.guards.program_builder when a decision or a baked value depends on it)
            p.constraint = CONSTRAINT.STATIC
        value_proxies.note_number_leaf(self, value, p)  # its type is checked in the prologue (metatrace.guards.structure)
        return p

    return proxify


CHANGED = object()


def _static_until_changed(value) -> bool:
    """Whether the module number ``value`` stays static: no earlier compile of this jitted
    function read another value from the same place."""
    record = registry.function_record()
    if record is None:
        return True
    key = provenance.key(value.provenance)
    seen = record.state_numbers.get(key)
    u = value.value.value if isinstance(value.value, NumberProxy) else value.value  # (read again: proxied)
    now = (type(u), repr(u))  # (NaN is NaN, -0.0 is not 0.0)
    if seen is None:
        record.state_numbers[key] = now
    elif seen is not CHANGED and seen != now:
        record.state_numbers[key] = CHANGED
        recompile_logger.info("%s changed from %s to %s since an earlier compile: symbolic from now on",
                              provenance.text(value.provenance), seen[1], now[1])
        return False
    return seen is not CHANGED


def patches() -> list[Patch]:
    return [
        attribute(proxies, "tensorproxy", _tensorproxy,
                  "module state (parameters, buffers) is proxied with integer shapes", wrap=True),
        attribute(jit_ext.JitCtx, "proxify", _proxify,
                  "module attributes are static, strings static, slices keep symbolic numbers", wrap=True),
    ]
