"""Arguments that alias each other keep their sizes bound under symbolic values.

thunder's ``insert_alias_updates`` (a computation with an in-place op) first calls
``replace_args_with_alias_map``: of the arguments that share storage, every one but the first is
replaced by the first, reshaped to its shape: ``t = prims.reshape(q_indices, position_ids.shape)``.
Under symbolic values that shape is the replaced argument's size proxies (``(i17, i18)``), which
only the replaced argument carries; once nothing uses it, dead-code elimination drops its
unpacking and the reshape reads sizes nothing binds (the torch_compile fusion pass then fails with
``KeyError: 'position_ids'``, and without a fusion pass the program would not run).

ThunderFX makes this common: Dynamo's graph computes several views of one tensor (HF's
``cache_position`` as ``position_ids = cache_position.unsqueeze(0)`` and the mask's
``q_indices = cache_position[None, None, :, None]``), and when thunder's splitter cuts the graph
after them (an inductor partition in between), the next thunder subgraph takes the views as
separate arguments; Mixtral's and Qwen2-MoE's subgraphs write in place (the router's
``index_add_``/``scatter``), so the alias replacement runs.

While metatrace is enabled, each such reshape is preceded by a ``shape`` read of the replaced
argument binding the sizes it names that nothing bound before (the read keeps the argument's
unpacking alive through dead-code elimination). Nothing is computed differently.
"""

from __future__ import annotations

import functools

import thunder.core.prims as prims
from thunder.core.compile_data import using_symbolic_values
from thunder.core.proxies import NumberProxy, Proxy, TensorProxy
from thunder.core.pytree import tree_iter

from metatrace.patching import Patch, attribute


def _with_size_reads(trace, swap_map: dict):
    """``trace`` with a ``shape`` read of each replaced argument before the reshape that replaces it."""
    replaced = {}  # name of the reshape's output -> the argument it replaces
    for key, new in swap_map.items():
        old = key.proxy if hasattr(key, "proxy") else None
        if isinstance(old, TensorProxy) and isinstance(new, TensorProxy) and new.name != old.name:
            replaced[new.name] = old
    if not replaced:
        return trace
    # (an argument's sizes are bound by a ``shape`` read of it in the trace, as every input's)
    defined = {p.name for p in tree_iter((trace.args, trace.kwargs)) if isinstance(p, Proxy)}
    bsyms, added = [], 0
    for b in trace.bound_symbols:
        if b.sym.id == prims.PrimIDs.RESHAPE and b.output is not None and getattr(b.output, "name", None) in replaced:
            old = replaced[b.output.name]
            wanted = [s for s in old._shape if isinstance(s, NumberProxy) and s.name not in defined]
            if wanted:
                output = tuple(s if not isinstance(s, NumberProxy) else s if s.name not in defined else s.value
                               for s in old._shape)
                bsyms.append(prims.shape.bind(old, output=output))
                defined.update(s.name for s in wanted)
                added += 1
        bsyms.append(b)
        for o in b.flat_proxy_outs:
            defined.add(o.name)
    if not added:
        return trace
    trace.bound_symbols = bsyms
    return trace


def _replace_args_with_alias_map(original):
    @functools.wraps(original)
    def replace_args_with_alias_map(computation_trace, alias_tensor_indices):
        trace, swap_map = original(computation_trace, alias_tensor_indices)
        if not swap_map or not using_symbolic_values():
            return trace, swap_map
        return _with_size_reads(trace, swap_map), swap_map

    return replace_args_with_alias_map


def patches() -> list[Patch]:
    import thunder.core.update_aliases as update_aliases

    return [attribute(update_aliases, "replace_args_with_alias_map", _replace_args_with_alias_map,
                      "an aliased argument's reshape reads the sizes of the argument it replaces", wrap=True)]
