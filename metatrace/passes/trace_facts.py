"""What the size-producer passes read off bound symbols and traces: the sizes a bound symbol's
tensors carry, which bound symbols bind rather than compute, and a trace's inputs."""

from __future__ import annotations

from thunder.core.proxies import NumberProxy, Proxy, TensorProxy
from thunder.core.pytree import tree_iter


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
