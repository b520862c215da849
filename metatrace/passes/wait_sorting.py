"""The operator-executor pass thunder runs only to sort distributed waits, skipped where the
trace has none.

``apply_transforms_and_build_cache_entry`` runs ``_transform_for_operator_executor_execution``
on the computation trace, hands the result to ``maybe_sort_waits`` and keeps it only if it holds
a ``wait`` to sort; otherwise it is thrown away and ``transform_for_execution`` runs the same pass
again. Without a distributed prim anywhere in the trace (a ``wait`` comes only from one) the
first run is wasted: on litgpt llama2-like it costs 0.93 s of the compile at 8 layers (0.65 s
for stock thunder, whose metas record nothing). Skipping it returns the trace, which
``maybe_sort_waits`` then leaves, as it left the pass's result. The traces that follow are the
same up to proxy names (the skipped run no longer takes names from the trace's name set), and
every decision the run made is made again by the pass that is kept.
"""

from __future__ import annotations

import sys

import thunder
from thunder.distributed import prims as dist_prims

_DISTRIBUTED = frozenset(dist_prims.PrimIDs)


def _has_distributed_prim(bsyms) -> bool:
    return any(b.sym.id in _DISTRIBUTED or _has_distributed_prim(b.subsymbols) for b in bsyms)


def run_only_for_wait_sorting(trace) -> bool:
    """Whether this call of the operator pass is thunder's run for ``maybe_sort_waits`` (the
    caller's frame is ``apply_transforms_and_build_cache_entry``) on a trace with no distributed
    prim, whose result thunder discards."""
    caller = sys._getframe(2).f_code  # (this function's caller is the pass's wrapper)
    return (caller.co_name == "apply_transforms_and_build_cache_entry" and caller.co_filename == thunder.__file__
            and not _has_distributed_prim(trace.bound_symbols))
