"""Values proxied differently from thunder's symbolic-values mode: static strings, complex numbers
and bools, symbolic slices.

thunder 0.2.6's symbolic-values mode proxies every string and slice it reads from the inputs.
While metatrace is enabled (called by ``metatrace.interpret.modules.module_state``'s ``JitCtx.proxify``):

- Inputs that can never be sizes are static, as in thunder's constant-values mode: a string
  (an argument, or a module attribute such as ``Conv1d.padding_mode``) stays a plain ``str`` in
  the trace and the prologue checks its value (``check_string_value``); so do a complex and a
  bool (``check_number_type_and_value``, or the argument check of ``metatrace.guards.structure``).
  Devices already are;
  dtypes, ``None`` and ``Ellipsis`` are never proxied (``metatrace.guards.structure`` checks the call's).
- A slice argument keeps its numbers symbolic: ``start``/``stop``/``step`` become number
  proxies that the prologue unpacks as ``args[i].start`` ..., guarded like any number, and the
  slice's shape (which parts are None) is checked by ``metatrace.guards.structure``.
- A symbolic number read from anywhere but the call's arguments is noted, for the prologue to
  check its type (:func:`note_number_leaf`).
"""

from __future__ import annotations

from typing import Any

import numpy
import thunder.clang as clang
import thunder.core.jit_ext as jit_ext
from thunder.core.compile_data import using_symbolic_values
from thunder.core.interpreter import ProvenanceRecord, WrappedValue
from thunder.core.proxies import NumberProxy, proxy

from metatrace.state.compile_session import session
from metatrace.guards.provenance import an_argument_or_its_item, attribute_record
from metatrace.metas.proxy_edits import add_record_flag, clear_record_flags

NOT_HANDLED = object()
# Static, checked by value (``metatrace.guards.classify``'s EQUAL): a string; a complex (thunder's
# ComplexProxy has no ``.real``: ``c.real`` raised where stock constant values works); a bool
# (a proxy is never ``True``: ``b is True`` was False in the trace, and the trace reads at most
# two values).
_STATIC = (str, complex, bool)
# thunder proxies every instance of these; only the exact types (and numpy's float64, which
# thunder's operations take only as a proxy) mean what a proxy of them does
_SUBCLASSED = (int, float, complex, str)
_EXACT = frozenset({int, float, complex, str, bool})


def _slice_part(slice_provenance: ProvenanceRecord, attr: str, v: Any) -> Any:
    if type(v) is not int:
        return v  # None (checked by the structure guard), or an object thunder handles as is
    # (thunder's record takes its flags from its inputs: a constant's none)
    history = attribute_record(slice_provenance, attr)
    p = proxy(v, history=history)
    if hasattr(p, "make_constrainable"):
        p.make_constrainable()
    return p


def note_number_leaf(ctx, value: WrappedValue, p: Any) -> None:
    """Remembers a symbolic number read from anywhere but the call's arguments (a global, a
    closure cell, an object's attribute), so that ``metatrace.guards.structure`` checks its type in the
    prologue: thunder's symbolic-values prologue checks no number's type, and a trace made for
    ``n = 2`` bakes in what ``int`` implies (``x * n``'s dtype, ``isinstance(n, int)``)."""
    if (
        isinstance(p, NumberProxy)
        and not p.is_static_constrained()  # thunder's prologue checks type and value
        and using_symbolic_values()
        and type(p.value) in (bool, int, float, complex)
        and not an_argument_or_its_item(value.provenance)
    ):
        session(ctx).number_leaves.setdefault(p.name, p)


def proxify_static(ctx, value: WrappedValue) -> Any:
    """Returns NOT_HANDLED for what thunder's own ``JitCtx.proxify`` does right."""
    uvalue = value.value
    if value.original_value is not value.nothing or not using_symbolic_values():
        return NOT_HANDLED
    if type(uvalue) not in _EXACT and isinstance(uvalue, _SUBCLASSED) and type(uvalue) is not numpy.float64:
        # An IntEnum or StrEnum member, a user's int subclass: thunder's proxy of it is typed as
        # its base (``type(a)`` was int, ``isinstance(a, Mode)`` False, ``a.name`` failed). It
        # stays the object it is; the prologue checks it by identity (metatrace.guards.classify),
        # which reads no value marked as one thunder proxied (the flags its wrap callback set).
        clear_record_flags(value.provenance, jit_ext.EXT_FLAG_IS_PROXY_DERIVED | jit_ext.EXT_FLAG_IS_CONSTRAINABLE_INPUT)
        return uvalue
    if type(uvalue) in _STATIC:
        # thunder's constant-values path: the trace keeps the value, the prologue checks it.
        add_record_flag(value.provenance, jit_ext.EXT_FLAG_IS_PROXY_DERIVED)
        p = proxy(uvalue, history=value.provenance)
        if type(uvalue) is str:
            ctx.add_constraint((clang.check_string_value, p, uvalue))
        elif not an_argument_or_its_item(value.provenance):  # (an argument's: metatrace.guards.structure)
            ctx.add_constraint((clang.check_number_type_and_value, p, uvalue))
        return p
    if type(uvalue) is slice:
        add_record_flag(value.provenance, jit_ext.EXT_FLAG_IS_PROXY_DERIVED)
        parts = [_slice_part(value.provenance, a, getattr(uvalue, a)) for a in ("start", "stop", "step")]
        proxied = slice(*parts)
        value.register_proxy(proxied)
        return proxied
    return NOT_HANDLED
