"""Guards for what the grad transform concretizes.

thunder builds the prologue before the grad transform runs, and autograd rules concretize
(``_slice_prim_grad`` does ``tree_map(int, padding)``), so a reused entry could run a backward
built for other sizes. When a trace may be differentiated (a tensor input requires grad), the
prologue gets a *deferred* guard program over every input number and size. It checks nothing
until the grad transform has run; the concretizations made during the transform then fill it:
projected to the inputs when their producers are known, else pinning every input number and
size to its value. Correct, if with less reuse than the forward's own guards.
"""

from __future__ import annotations

import functools
import logging

import thunder.transforms.autodiff as autodiff

from metatrace.metas import concretizations
from metatrace.metas.record_state import INTERPRETING
from metatrace.guards.collect import GuardCollector, exact
from metatrace.guards.grad_program import PendingGradProgram, take_pending_grad_program
from metatrace.guards.program import GuardProgram, normalize
from metatrace.guards.projection import Unprojectable, describe_guard, producer_map, project
from metatrace.guards.record import FLOAT_RANGE, Guard
from metatrace.guards.registry import PROGRAMS
from metatrace.guards.simplify import simplify
from metatrace.patching import Patch, attribute

logger = logging.getLogger("metatrace.guards.collect")


def _grad_transform_on_trace(original):
    @functools.wraps(original)
    def grad_transform_on_trace(trace, /, *args, **kwargs):
        pending = take_pending_grad_program()
        if pending is None:
            return original(trace, *args, **kwargs)
        collector = GuardCollector()
        token = concretizations.COLLECTOR.set(collector)
        recording = INTERPRETING.set(True)
        try:
            result = original(trace, *args, **kwargs)
        finally:
            INTERPRETING.reset(recording)
            concretizations.COLLECTOR.reset(token)
        if collector.guards:
            PROGRAMS[pending.program_id] = _program(pending, collector, [trace, result])
        return result

    return grad_transform_on_trace


def _program(pending: PendingGradProgram, collector, traces) -> GuardProgram:
    program_id, leaves, renamed, shown = pending.program_id, pending.leaves, pending.renamed, pending.shown
    sizes, forward_texts = pending.sizes, pending.forward_texts
    producers: dict = {}
    for t in traces:
        for name, bsym in producer_map(t, collector).items():
            producers.setdefault(name, bsym)
    leaf_names = set(renamed)
    guards, texts, seen = [], [], set()
    for guard in collector.guards:
        guard = normalize(guard, producers)
        if guard.key() in seen:
            continue
        seen.add(guard.key())
        try:
            _, used = project([guard.lhs, guard.rhs], producers, is_leaf=lambda p: p.name in leaf_names)
        except Unprojectable as e:
            if guard.why == FLOAT_RANGE:
                # float(n) of a number no guard can express (a cotangent): no guard relies on it,
                # as in the forward program (metatrace.guards.program)
                seen.discard(guard.key())
                continue
            # Pin every input number and size: only identical inputs reuse this backward.
            site = f" at {guard.where}" if guard.where else ""
            why = f"pinned by the grad transform: {e}{site}"
            pins = [Guard("eq", p, exact(p.value), why) for p in leaves]
            texts = [f"{n} == {p.value!r} ({why})" for n, p in zip(shown, leaves)]
            return GuardProgram(program_id, pins, texts, leaves, {})
        guards.append(guard)
    names = dict(zip(renamed, shown))
    if getattr(collector, "inexact_float", False):
        # an integer beyond 2**53 was converted to float: the simplifier's float(n) == n does not
        # hold, so the guards are checked as recorded (as the forward program does)
        checked = guards
        texts = [describe_guard(guard, producers, names) + " (grad transform)" for guard in guards]
        return GuardProgram(program_id, checked, texts, leaves, producers, leaf_names=renamed)
    try:
        checked = simplify(guards, producers, renamed, names, sizes, is_leaf=lambda p: p.name in leaf_names)
    except Exception:  # not expected: the guards as recorded are as correct, only longer
        logger.warning("guard simplification failed: checking the grad guards as recorded", exc_info=True)
        checked = guards
        texts = [describe_guard(guard, producers, names) + " (grad transform)" for guard in guards]
    else:
        checked = [g for g in checked if g.text not in forward_texts]  # the forward checks those
        texts = [g.text + " (grad transform)" for g in checked]
    # Guards name the computation trace's proxies: parameters follow the renamed leaf names.
    return GuardProgram(program_id, checked, texts, leaves, producers, leaf_names=renamed)


def patches() -> list[Patch]:
    return [attribute(autodiff, "grad_transform_on_trace", _grad_transform_on_trace,
                      "decisions of autograd rules become a second guard program (the prologue is built before them)",
                      wrap=True)]
