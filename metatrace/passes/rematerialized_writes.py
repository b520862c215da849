"""A fusion region's in-place write is never recomputed in another region.

A fusion executor's pass ends with thunder's ``rematerialize``: for each producer region and
consumer region it finds a cut and recomputes, inside the consumer, what the producer computed
beyond the cut, so fewer tensors cross. The recomputed bound symbols are toposorted by dataflow
only, and an in-place write (``prims.copy_(result, dst)``) carries no edge to the reads of ``dst``
it must come after. With ``torch_compile_ex`` a joint trace's backward region recomputed
``target.div_(t)``'s ``copy_`` and then read ``target`` for ``t``'s gradient, the written value
instead of the one the rule means: ``t``'s gradient was halved, silently (stock thunder too). The
write is also done twice. Recomputing a buffer that is written between the two regions is as
wrong: ``b = zeros; d = b.view(...); d += s; return b`` under ``no_grad`` recomputed ``b`` in the
consumer (thunder's ``update_aliases`` there names the written buffer) as fresh zeros.

:func:`find_cut`, thunder's with one step: a cut whose recomputation would include a write
(``copy_``, or a symbol tagged in-place) or an ``update_aliases`` is refused, so that pair is
left as it was (the producer's outputs cross, as without rematerialization). Pairs that
recompute neither are unchanged. The check dry-runs thunder's own consumer update for the cut, and only for a producer
region that writes at all.
"""

from __future__ import annotations

import functools

import thunder.core.rematerialization as rematerialization
from thunder.core import prims

from metatrace.patching import Patch, attribute


def _writes(bsym) -> bool:
    """An in-place write, or thunder's ``update_aliases`` (which names a buffer's state after
    writes: recomputed, the buffer is a fresh one, without them)."""
    if bsym.sym.id in (prims.PrimIDs.COPY_, prims.PrimIDs.UPDATE_ALIASES):
        return True
    return prims.OpTags.IN_PLACE in (bsym.sym.tags or ()) or any(map(_writes, bsym.subsymbols))


def _find_cut(original):
    @functools.wraps(original)
    def find_cut(external_producer_outputs, producer, consumer):
        cut = original(external_producer_outputs, producer, consumer)
        if not cut or not any(map(_writes, producer.subsymbols)):
            return cut
        updated = rematerialization.apply_rematerialization_for_consumer(producer, consumer, cut)
        kept = {id(b) for b in consumer.subsymbols}
        if any(_writes(b) for b in updated.subsymbols if id(b) not in kept):
            return None
        return cut

    return find_cut


def patches() -> list[Patch]:
    return [attribute(rematerialization, "find_cut", _find_cut,
                      "no in-place write is recomputed in a consumer region (reads after it would see the written value)",
                      wrap=True)]
