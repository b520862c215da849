"""Reading ``t.shape`` inside thunder's composite symbols binds the sizes only where they are used.

Under symbolic values thunder's ``TensorProxy.shape`` records a ``prims.shape`` bound symbol on
every read while a trace is live, so that the size symbols it returns are defined where they are
used (thunder's ``check_trace`` wants every argument bound in its scope). thunder's own clang and
torch layers read shapes many times per operation, mostly to compare them
(``compute_broadcast_shape``): a litgpt layer's first trace had 366 ``shape`` bound symbols, 80%
of them re-binding sizes the same scope already bound, most of the rest never used as an
argument. Every later pass re-traces each of them (the grad transform, the executor passes),
which made them the largest single cost of a compile under metatrace.

While enabled, a read inside one of thunder's composite symbols (a scope below the trace's top
level) records nothing: the sizes its scope does not define yet are *pending* there, and just
before a symbol that takes a pending size as an argument joins the scope (``Symbol.__call__``),
thunder's own binding of that size's tensor joins it first. Inside a prim's meta a read returns
the sizes directly (thunder's ``prims.shape`` records nothing there either). The top level is
left alone: its passes (DCE, the forward/backward split) move bindings around and repair them
(``later_stages``).

Invariant: a read returns exactly what ``prims.shape`` would (``shape_meta`` is ``t._shape``), and
every size a symbol of a composite takes as an argument is an output of a bound symbol before it
in that scope (or comes from the composite's own arguments). The index of a scope's outputs is
extended incrementally and rebuilt when the scope was shortened or its tail replaced
(``recording.prune_unused`` rewrites a scope in place), so a removed producer is never counted
as a definition.
"""

from __future__ import annotations

import functools

import thunder.core.jit_ext as jit_ext
from thunder.core.compile_data import using_symbolic_values
from thunder.core.proxies import NumberProxy, TensorProxy
from thunder.core.pytree import tree_iter
from thunder.core.symbol import Symbol
from thunder.core.trace import get_tracectx, is_tracing

from metatrace.proxies.number_methods import in_meta

_original_shape = None
_original_call = None

# id(scope) -> _ScopeIndex. Bounded: cleared when it grows past _MAX_SCOPES (an index is only a
# cache, and each entry holds its scope, so a recycled id is never mistaken for another list).
_indexes: dict[int, "_ScopeIndex"] = {}
_MAX_SCOPES = 512


class _ScopeIndex:
    __slots__ = ("scope", "scanned", "last", "names")

    def __init__(self, scope: list):
        self.scope = scope
        self.scanned = 0
        self.last = None  # the bound symbol at scope[scanned - 1] when it was scanned
        self.names: set[str] = set()

    def defined(self) -> set[str]:
        scope = self.scope
        n = len(scope)
        if n < self.scanned or (self.scanned and scope[self.scanned - 1] is not self.last):
            self.scanned, self.last, self.names = 0, None, set()  # shortened or rewritten: rebuild
        if n > self.scanned:
            names = self.names
            for bsym in scope[self.scanned :]:
                for out in bsym.flat_proxy_outs:
                    names.add(out.name)
            self.scanned, self.last = n, scope[n - 1]
        return self.names


def defined_in(scope: list) -> set[str]:
    index = _indexes.get(id(scope))
    if index is None or index.scope is not scope:
        if len(_indexes) >= _MAX_SCOPES:
            _indexes.clear()
        index = _indexes[id(scope)] = _ScopeIndex(scope)
    return index.defined()


# id(scope) -> (scope, {size name: tensor}): sizes read in a composite's scope and not bound there
# yet. Bounded like _indexes; each entry holds its scope.
_pending: dict[int, tuple[list, dict]] = {}


def _read_in_composite(t: TensorProxy) -> bool:
    """A read inside a composite's scope: the sizes the scope does not define yet are noted as
    pending (bound by ``_call`` when a symbol first takes one as an argument); True. False at
    the top level, whose passes move bindings around and repair them."""
    scopes = get_tracectx().scopes
    if len(scopes) < 2:
        return False
    scope = scopes[-1]
    sizes = [s for s in t._shape if isinstance(s, NumberProxy)]
    if sizes:
        defined = defined_in(scope)
        missing = [s.name for s in sizes if s.name not in defined]
        if missing:
            entry = _pending.get(id(scope))
            if entry is None or entry[0] is not scope:
                if len(_pending) >= _MAX_SCOPES:
                    _pending.clear()
                entry = _pending[id(scope)] = (scope, {})
            for name in missing:
                entry[1].setdefault(name, t)
    return True


def _shape(self):
    if using_symbolic_values() and is_tracing() and (in_meta() or _read_in_composite(self)):
        return self._shape
    return _original_shape.fget(self)


def _call(self, *args, **kwargs):
    """``Symbol.__call__``: before a symbol that takes a pending size as an argument joins the
    scope, thunder's own binding of that size's tensor (``prims.shape``) joins it first."""
    if _pending:
        trace = get_tracectx()
        if trace is not None and len(trace.scopes) >= 2 and (scope := trace.scopes[-1]) is not None:
            entry = _pending.get(id(scope))
            if entry is not None and entry[0] is scope:
                _bind_pending(scope, entry[1], args, kwargs)
                if not entry[1] and _pending.get(id(scope)) is entry:
                    del _pending[id(scope)]  # nothing left to bind (the binding's own call may have removed it)
    return _original_call(self, *args, **kwargs)


def _bind_pending(scope: list, pending: dict, args, kwargs) -> None:
    for x in tree_iter((args, kwargs)):
        if isinstance(x, NumberProxy) and (t := pending.pop(x.name, None)) is not None:
            if x.name not in defined_in(scope):
                _original_shape.fget(t)  # prims.shape(t) in this scope: binds all of t's sizes


def install() -> None:
    global _original_shape
    if _original_shape is None:
        _original_shape = TensorProxy.__dict__["shape"]
        TensorProxy.shape = property(_shape, doc=_original_shape.__doc__)
        # User code reads ``x.shape`` through thunder's interpreter, which would interpret this
        # getter's own bookkeeping; it runs opaquely instead, as the ``prims.shape`` symbol does.
        jit_ext._general_jit_lookaside_map[_shape] = jit_ext.interpreter_needs_wrap(_shape)
    global _original_call
    if _original_call is None:
        _original_call = Symbol.__call__
        Symbol.__call__ = functools.wraps(_original_call)(_call)


def uninstall() -> None:
    global _original_shape
    if _original_shape is not None:
        TensorProxy.shape = _original_shape
        _original_shape = None
        jit_ext._general_jit_lookaside_map.pop(_shape, None)
    global _original_call
    if _original_call is not None:
        Symbol.__call__ = _original_call
        _original_call = None
    _pending.clear()
    _indexes.clear()
