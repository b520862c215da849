"""Python's cyclic garbage collector, paced for thunder's compile phases.

thunder's passes allocate in bulk and make much of it cyclic garbage: recursive closures
(``BoundSymbol.from_bsym_swap_proxies``'s ``swap``, ``safe_map_flat``'s
``convert_sequences_to_tuple``) hold themselves through their cells. A litgpt training compile
(gpt-neox-like, 2 layers) allocates about 125k objects under stock thunder and 205k under
metatrace, whose traces carry the size arithmetic; 60k and 120k of them are such garbage. At the
default young threshold (700 allocations) the collector ran about 500 young, 45 middle and 2-3
full collections in it. A full collection walks every object the process holds (about 500k once
torch and thunder are imported): 0.25-0.45 s each, 7-13% of the compile, and the third one is
metatrace's.

While a compile phase runs (interpretation, the executor passes, the grad transform, the
forward/backward split) the young generation's threshold is raised to :data:`YOUNG_THRESHOLD`
(never lowered: a user's larger value stands), then put back. The collector still runs, every
50k allocations instead of every 700, so the garbage waiting for it stays bounded (the same
compile's peak RSS grew by 109 MB at the default threshold, 110-122 MB paced), and a young
collection's cost is in proportion to the young objects: the compile pays for its own garbage
once instead of re-walking the process's heap. Whether the
collector is enabled at all (``gc.disable()``) is the user's and is not touched. Measured on
that compile: 24 young collections and at most one full one; 0.96x stock's compile time against
1.04-1.10x before.

The thresholds are the process's: the first of concurrent or nested phases raises them, the last
puts back what the first found.
"""

from __future__ import annotations

import functools
import gc
import threading

import thunder
import thunder.executors.passes as passes
import thunder.transforms.autodiff as autodiff

from metatrace.patching import Patch, attribute

YOUNG_THRESHOLD = 50_000

_lock = threading.Lock()
_state = {"phases": 0, "saved": None}


def enter_phase() -> None:
    with _lock:
        if _state["phases"] == 0:
            saved = _state["saved"] = gc.get_threshold()
            gc.set_threshold(max(saved[0], YOUNG_THRESHOLD), *saved[1:])
        _state["phases"] += 1


def leave_phase() -> None:
    with _lock:
        _state["phases"] -= 1
        if _state["phases"] == 0:
            gc.set_threshold(*_state["saved"])


def _paced(original):
    @functools.wraps(original)
    def phase(*args, **kwargs):
        enter_phase()
        try:
            return original(*args, **kwargs)
        finally:
            leave_phase()

    return phase


# Where thunder's compile (thunder/__init__.py's cache-miss path) finds each phase when it calls it.
PHASES = (
    (thunder, "thunder_general_jit"),
    (thunder, "transform_for_execution"),
    (passes, "_transform_for_operator_executor_execution"),
    (autodiff, "grad_transform_on_trace"),
    (autodiff, "split_into_forward_and_backward"),
)


def patches() -> list[Patch]:
    why = "the collector runs every 50k allocations during a compile phase, not every 700"
    return [attribute(module, name, _paced, why, wrap=True) for module, name in PHASES]
