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

from thunder.core.interpreter import PseudoInst

from metatrace.errors import MetatraceError
from metatrace.guards import provenance


class DroppedStoreError(MetatraceError, NotImplementedError):
    """The jitted function stores an attribute thunder would not write back after the call."""


def _dropped(ctx) -> list[str]:
    """The attributes stored into an object's ``__dict__`` that thunder's epilogue skips."""
    dropped = []
    for modified, modifications in ctx._additional_outputs.items():
        read = provenance.last_read(modified.provenance)
        if not (isinstance(modified.value, dict) and read is not None and read.kind is provenance.Read.ATTR
                and read.key == "__dict__"):
            continue
        owner = read.base
        if hasattr(owner, "proxy") or not provenance.rooted_in_the_call(owner):
            continue  # written back (prims.pack_attr); or a library's object (a context manager's state)
        for inst, *args in modifications:
            if inst is PseudoInst.STORE_SUBSCR:
                dropped.append(f"{_owner_text(owner)}.{args[1].value}")
    return dropped


def _owner_text(owner) -> str:
    if provenance.is_jitted_function(owner):
        return "self"
    return str(owner)


def raise_dropped(ctx) -> None:
    """Raises :class:`DroppedStoreError` for the stores thunder would skip (a step of
    ``process_recorded_modifications``' one wrapper, :mod:`metatrace.mutations.replay`)."""
    dropped = _dropped(ctx)
    if dropped:
        raise DroppedStoreError(
            f"the function stores {', '.join(sorted(set(dropped)))} (an attribute of an object thunder does not "
            "write back after the call): the next call would read the old value. Store it outside the jitted "
            "function, or register it as a buffer (module.register_buffer) and copy into it"
        )
