"""thunder's compile phases run with Python's collector paced (:mod:`metatrace.gc_pacing`).

thunder's passes allocate in bulk and make much of it cyclic garbage: recursive closures
(``BoundSymbol.from_bsym_swap_proxies``'s ``swap``, ``safe_map_flat``'s
``convert_sequences_to_tuple``) hold themselves through their cells. A litgpt training compile
(gpt-neox-like, 2 layers) allocates about 125k objects under stock thunder and 205k under
metatrace, whose traces carry the size arithmetic; 60k and 120k of them are such garbage. At the
default young threshold (700 allocations) the collector ran about 500 young, 45 middle and 2-3
full collections in it: 0.25-0.45 s per full one, 7-13% of the compile, and the third one is
metatrace's.

Each phase (interpretation, the executor passes, the grad transform, the forward/backward split)
runs inside :func:`metatrace.gc_pacing.paced`: a young collection every 50k allocations. Measured
on that compile: 24 young collections and at most one full one, 0.96x stock's compile time
against 1.04-1.10x before; its peak RSS grew by 109 MB at the default threshold and 110-122 MB
paced.
"""

from __future__ import annotations

import functools

import thunder

from metatrace.gc_pacing import paced
from metatrace.patching import Patch, attribute


def _paced(original):
    @functools.wraps(original)
    def phase(*args, **kwargs):
        with paced():
            return original(*args, **kwargs)

    return phase


# Where thunder's compile (thunder/__init__.py's cache-miss path) finds each phase when it calls it
# (the grad transform, the execution transform, the operator-executor pass and the split are paced
# by their one wrappers: metatrace.passes.grad_transform, metatrace.guards.module_paths and
# metatrace.passes.size_producers).
PHASES = (
    (thunder, "thunder_general_jit"),
)


def patches() -> list[Patch]:
    why = "the collector runs every 50k allocations during a compile phase, not every 700"
    return [attribute(module, name, _paced, why, wrap=True) for module, name in PHASES]
