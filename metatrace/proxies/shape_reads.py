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
before a symbol that takes a pending size as an argument joins the scope (``Symbol.__call__``:
:func:`bind_pending_sizes`), thunder's own binding of that size's tensor joins it first. Inside
a prim's meta a read returns the sizes directly (thunder's ``prims.shape`` records nothing there
either). The top level is left alone: its passes (DCE, the forward/backward split) move bindings
around and repair them (``later_stages``).

Invariant: a read returns exactly what ``prims.shape`` would (``shape_meta`` is ``t._shape``), and
every size a symbol of a composite takes as an argument is an output of a bound symbol before it
in that scope (or comes from the composite's own arguments). The index of a scope's outputs is
extended incrementally and rebuilt when the scope was shortened or its tail replaced
(``recording.prune_unused`` rewrites a scope in place), so a removed producer is never counted
as a definition.

State: what a scope defines, the sizes pending there and the ``t.numel`` products computed there
(``metatrace.proxies.numel``) live on the trace (an attribute of thunder's ``TraceCtx``), one entry
per scope on its stack: a composite's entry goes when a later new scope finds the composite
returned, the top level's when the trace is collected. No module-level state: nothing outlives
the traces it was made for.
"""

from __future__ import annotations

import thunder.core.jit_ext as jit_ext
from thunder.core.compile_data import using_symbolic_values
from thunder.core import devices, dtypes
from thunder.core.proxies import NumberProxy, Proxy, TensorProxy
from thunder.core.pytree import tree_iter
from thunder.core.trace import get_tracectx, is_tracing

from metatrace.patching import Patch, attribute, item
from metatrace.proxies.number_concretizations import in_meta
from metatrace.proxies.plain_trees import PLAIN_LEAVES as _LEAVES
from metatrace.state.object_tables import SCOPE_STATES

# Leaves besides those (``tree_iter`` yields them as they are): proxies (a collection proxy is
# one too), thunder's dtypes and devices.
_LEAF_CLASSES = (Proxy, dtypes.dtype, devices.Device)

# thunder's own ``TensorProxy.shape`` (its getter binds the sizes with ``prims.shape``), taken when
# this module is imported, which is before any enable() (metatrace.install imports it): the rows
# below replace it while enabled, and pending sizes are bound through it.
THUNDER_SHAPE = TensorProxy.__dict__["shape"]

# Each trace's scopes' state: TraceCtx -> {id(scope) -> ScopeState} (each entry holds its scope,
# so a recycled id is never mistaken for another list), weakly keyed: it dies with the trace.


class ScopeState:
    """What one scope of a trace defines (extended incrementally), the sizes read there and not
    bound yet, and ``t.numel`` products computed there (``metatrace.proxies.numel``)."""

    __slots__ = ("scope", "scanned", "last", "names", "pending", "numels")

    def __init__(self, scope: list):
        self.scope = scope
        self.scanned = 0
        self.last = None  # the bound symbol at scope[scanned - 1] when it was scanned
        self.names: set[str] = set()
        self.pending: dict[str, TensorProxy] = {}  # size name -> a tensor whose shape binds it
        self.numels: dict[int, tuple] = {}  # id(tensor) -> (tensor, product)

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


def scope_state(scope: list, *, create: bool = True) -> ScopeState | None:
    """The state of ``scope``, a scope of the current trace (made if ``create``)."""
    trace = get_tracectx()
    if trace is None:
        return ScopeState(scope) if create else None
    states = SCOPE_STATES.get(trace, create)
    if states is None:
        return None
    state = states.get(id(scope))
    if state is not None and state.scope is scope:
        return state
    if not create:
        return None
    # A new scope: the state of scopes no longer on the trace's stack goes (their composites returned).
    live = {id(s): s for s in trace.scopes if s is not None}
    for key in [key for key, st in states.items() if live.get(key) is not st.scope]:
        del states[key]
    state = states[id(scope)] = ScopeState(scope)
    return state


def scope_states() -> list[ScopeState]:
    """The state of every scope of the current trace that has one."""
    trace = get_tracectx()
    states = SCOPE_STATES.get(trace, False) if trace is not None else None
    return list(states.values()) if states is not None else []


def _read_in_composite(t: TensorProxy) -> bool:
    """A read inside a composite's scope: the sizes the scope does not define yet are noted as
    pending (bound by :func:`bind_pending_sizes` when a symbol first takes one as an argument); True. False at
    the top level, whose passes move bindings around and repair them."""
    scopes = get_tracectx().scopes
    if len(scopes) < 2:
        return False
    scope = scopes[-1]
    sizes = [s for s in t._shape if isinstance(s, NumberProxy)]
    if sizes:
        state = scope_state(scope)
        defined = state.defined()
        for s in sizes:
            if s.name not in defined:
                state.pending.setdefault(s.name, t)
    return True


def _shape(original):
    def _shape(self):
        if using_symbolic_values() and is_tracing() and (in_meta() or _read_in_composite(self)):
            return self._shape
        return original.fget(self)

    return property(_shape, doc=original.__doc__)


def bind_pending_sizes(trace, args, kwargs) -> None:
    """Before a symbol called with ``args`` and ``kwargs`` in ``trace`` (not None) joins the
    current scope, thunder's own binding (``prims.shape``) of the tensor of each pending size it
    takes joins it first: a step of metatrace's one wrapper of ``Symbol.__call__``
    (:mod:`metatrace.grad.requires_grad`)."""
    if len(trace.scopes) >= 2 and (scope := trace.scopes[-1]) is not None:
        state = scope_state(scope, create=False)
        if state is not None and state.pending:
            _bind_pending(state, args, kwargs)


def _flat_arguments(args, kwargs):
    """A symbol's arguments in ``tree_iter``'s order where they are positional leaves and exact
    tuples or lists of leaves (nearly every call); ``tree_iter`` of them otherwise."""
    if kwargs:
        return tree_iter((args, kwargs))
    flat = []
    for x in args:
        t = type(x)
        if t is tuple or t is list:
            for y in x:
                if type(y) not in _LEAVES and not isinstance(y, _LEAF_CLASSES):
                    return tree_iter((args, kwargs))
                flat.append(y)
        elif t in _LEAVES or isinstance(x, _LEAF_CLASSES):
            flat.append(x)
        else:
            return tree_iter((args, kwargs))
    return flat


def _bind_pending(state: ScopeState, args, kwargs) -> None:
    for x in _flat_arguments(args, kwargs):
        if isinstance(x, NumberProxy) and (t := state.pending.pop(x.name, None)) is not None:
            if x.name not in state.defined():
                THUNDER_SHAPE.fget(t)  # prims.shape(t) in this scope: binds all of t's sizes


def patches() -> list[Patch]:
    shape = _shape(THUNDER_SHAPE)
    return [
        attribute(TensorProxy, "shape", shape,
                  "inside a composite symbol a shape read records no prims.shape; the sizes are bound once, "
                  "when a symbol first takes one"),
        # User code reads ``x.shape`` through thunder's interpreter, which would interpret this
        # getter's own bookkeeping; it runs opaquely instead, as the ``prims.shape`` symbol does.
        item(jit_ext._general_jit_lookaside_map, shape.fget, jit_ext.interpreter_needs_wrap(shape.fget),
             "the shape getter runs opaquely", label="thunder.core.jit_ext._general_jit_lookaside_map"),
    ]
