"""Takes out of a trace's top-level ``shape`` bindings the sizes that are bound already.

A ``shape`` binding re-binds every size of its tensor, also sizes the trace defined long before:
an input number (``M`` of ``torch.zeros(N, M)`` with ``N, M`` globals, closure variables or module
attributes), or a size an earlier binding or number op outputs. Recorded number ops bind their
tensor's sizes so (``metas.record_state.bind_sizes``), and thunder's own top-level shape reads do.

Harmless to a running trace (the value is the same), such a re-binding misleads thunder's
forward/backward split: it puts into the forward every bound symbol that *outputs* a name the
forward needs, inputs included. A backward's ``(i92, M) = shape(t94)`` outputs ``M``, so it went
to the forward with ``t94``, the tensors ``t94`` is computed from, and so on up to the incoming
gradient (``get_grad``), which only the joint trace has: the forward read an unbound ``t53``.
``without_rebindings`` runs on the joint trace before the split (``passes.size_producers``): a
binding outputs only the names it is the first to bind, and one that binds nothing new goes.
"""

from __future__ import annotations

import thunder.core.prims as prims
from thunder.core.proxies import Proxy
from thunder.core.pytree import tree_iter

from metatrace.passes.trace_facts import with_bound_symbols


def without_rebindings(trace):
    """``trace`` with each top-level ``shape`` binding outputting only what is not bound before it
    (the others as their values: printed ``_``), and none that binds nothing new; ``trace`` itself
    if no binding re-binds. One walk."""
    # (the names a trace's code has as locals: its parameters, then what each bound symbol outputs;
    # an input tensor's sizes are not among them until a ``shape`` binds them)
    bound = {p.name for p in tree_iter((trace.args, trace.kwargs)) if isinstance(p, Proxy)}
    bsyms, changed = [], 0
    for b in trace.bound_symbols:
        if _is_shape_binding(b) and any(o.name in bound for o in b.flat_proxy_outs):
            changed += 1
            output = _unbound_only(b.output, bound)
            if not any(isinstance(o, Proxy) for o in output):
                continue
            b = b.from_bsym(output=output)
        bsyms.append(b)
        bound.update(o.name for o in b.flat_proxy_outs)
    if not changed:
        return trace
    return with_bound_symbols(trace, bsyms, f"dropped {changed} size re-bindings")


def _is_shape_binding(bsym) -> bool:
    """thunder's ``prims.shape``, or an executor's ``shape`` (pythonex's, in execution traces)."""
    return bsym.sym.id == prims.PrimIDs.SHAPE or bsym.sym.name == "shape"


def _unbound_only(output, bound: set):
    """``output`` with the sizes in ``bound`` as their values (what ``restore_producers`` does)."""
    return type(output)(o.value if isinstance(o, Proxy) and o.name in bound else o for o in output)
