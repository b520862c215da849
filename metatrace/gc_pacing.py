"""Python's cyclic garbage collector, paced while metatrace or thunder allocates in bulk.

Inside a phase (:func:`paced`) the collector's young threshold is at least
:data:`YOUNG_THRESHOLD` allocations instead of Python's default 700: the collector still runs,
so the garbage waiting for it stays bounded, but a phase that makes hundreds of thousands of
objects, many of them in reference cycles, no longer sets off middle and full collections that
re-walk every object the process holds (about 500k once torch and thunder are imported, 0.25-0.45 s
per full walk). A larger threshold the user set stands; whether the collector is enabled at all
(``gc.disable()``) is the user's and is not touched.

Phases: thunder's compile phases (:mod:`metatrace.interpret.costs.gc_pacing_phases`, measured there) and
the codegen (:func:`metatrace.codegen.generate.generate`: libcst builds and replaces a tree per
rewritten function; 3.6 s at the default threshold, 2.6 s without collections).

The thresholds are the process's: the first of concurrent or nested phases raises them, the last
puts back what the first found.
"""

from __future__ import annotations

import contextlib
import gc

from metatrace.state.process_tables import GC_PACING

YOUNG_THRESHOLD = 50_000


def enter_phase() -> None:
    with GC_PACING.lock:
        if GC_PACING.phases == 0:
            saved = GC_PACING.saved = gc.get_threshold()
            gc.set_threshold(max(saved[0], YOUNG_THRESHOLD), *saved[1:])
        GC_PACING.phases += 1


def leave_phase() -> None:
    with GC_PACING.lock:
        GC_PACING.phases -= 1
        if GC_PACING.phases == 0:
            gc.set_threshold(*GC_PACING.saved)


@contextlib.contextmanager
def paced():
    """A phase (also a decorator: ``@paced()``)."""
    enter_phase()
    try:
        yield
    finally:
        leave_phase()
