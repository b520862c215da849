"""A composite bound symbol the grad transform binds without tracing it gets its decomposition.

thunder's grad transform gives an intermediate that no rule sent a gradient to (``x * 1`` below a
``detach``) a gradient of zeros, bound directly: ``t20 = ltorch.zeros(i0, i1, ...)`` with no
subsymbols (``transforms/autodiff.py``). Every pass after it takes a non-prim bound symbol without
subsymbols for a no-op: DCE's ``_remove_noop_subsymbols`` drops it from a fusion region, so
``torch_compile_ex``'s backward region reads ``t20`` that nothing defines (``Unsupported name 't20'
is not defined``; stock thunder too), and a fusion executor that flattens to prims finds nothing
to flatten.

Each such bound symbol (not a prim, no subsymbols, an output that is none of its arguments: it
computes something) is traced again from its own arguments, and the traced call, its outputs
renamed to the original's, takes its place. One walk over the joint trace; the trace itself where
there is none.
"""

from __future__ import annotations

from thunder.core.proxies import Proxy, variableify
from thunder.core.pytree import tree_iter
from thunder.core.trace import TraceProvenance, from_trace, tracectx


def _untraced(bsym) -> bool:
    if bsym.sym.is_prim or bsym.subsymbols or bsym.sym.meta is None:
        return False
    arguments = {p.name for p in bsym.flat_proxy_args}
    return any(p.name not in arguments for p in bsym.flat_proxy_outs)


def with_traced_composites(trace):
    """``trace`` with every untraced composite bound symbol replaced by its traced call (a new
    trace; ``trace`` itself when there is none)."""
    if not any(map(_untraced, trace.bound_symbols)):
        return trace
    new = from_trace(trace)
    bsyms = []
    with tracectx(new):
        for bsym in trace.bound_symbols:
            if not _untraced(bsym):
                bsyms.append(bsym)
                continue
            new.push_scope([])
            output = bsym.sym(*bsym.args, **bsym.kwargs)
            traced = new.pop_scope()
            rename = {variableify(o): old for o, old in zip(tree_iter(output), tree_iter(bsym.output))
                      if isinstance(o, Proxy) and isinstance(old, Proxy) and o.name != old.name}
            for b in traced:
                b = b.from_bsym_swap_proxies(rename)
                # (the original's tags, BACKWARD among them, decide which side of the split it goes)
                b.tags.update(bsym.tags)
                bsyms.append(b)
    new.bound_symbols = bsyms
    new.set_provenance(TraceProvenance("Composite bound symbols bound without their decomposition traced"))
    return new
