"""What the size-producer passes read off bound symbols and traces: the sizes a bound symbol's
tensors carry, which bound symbols bind rather than compute, and a trace's inputs; and the new
trace a pass returns."""

from __future__ import annotations

from thunder.core.proxies import NumberProxy, Proxy, TensorProxy
from thunder.core.pytree import tree_iter
from thunder.core.trace import TraceProvenance, from_trace


def with_bound_symbols(trace, bsyms: list, what: str):
    """A new trace with ``trace``'s signature and names and ``bsyms``, whose provenance names
    the pass that made ``trace`` and then metatrace's (``thunder.last_traces`` shows both):
    a pass never edits the trace it was given."""
    new = from_trace(trace)
    new.bound_symbols = bsyms
    before = trace.get_provenance()
    text = f"metatrace: {what}"
    new.set_provenance(TraceProvenance(f"{before.pss}, then {text}" if before is not None else text))
    return new


def sizes_of(bsym):
    """The size symbols of the tensors ``bsym`` takes and returns."""
    for p in bsym.flat_proxy_args:
        if isinstance(p, TensorProxy):
            yield from (s for s in p._shape if isinstance(s, NumberProxy))
    for p in bsym.flat_proxy_outs:
        if isinstance(p, TensorProxy):
            yield from (s for s in p._shape if isinstance(s, NumberProxy))


def binds_inputs(bsym) -> bool:
    """Unpacking, ``shape`` and ``get_grad`` bind what they output, sizes included (see checker)."""
    name = bsym.sym.name
    return name.startswith("unpack") or name in ("shape", "get_grad")


def input_names(*traces) -> set[str]:
    """Names of the traces' inputs (nested ones too) and of their tensors' sizes: defined
    throughout, as the strict checker sees it."""
    names = set()
    for p in tree_iter(tuple((trace.args, trace.kwargs) for trace in traces)):
        if isinstance(p, Proxy):
            names.add(p.name)
            if isinstance(p, TensorProxy):
                names.update(s.name for s in p._shape if isinstance(s, NumberProxy))
    return names
