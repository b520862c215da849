"""Puts back the producers of size symbols that dead-code elimination or the forward/backward
split dropped from a trace.

thunder's ``dce`` keeps a bound symbol only if an *argument* of a kept one uses its output, and a
size symbol is often used only inside a tensor's shape: a kept ``pad``'s output ``f32[i48, ...]``
kept nothing that defines ``i48``. The forward/backward split likewise puts a number op in the
forward only if the forward uses its output as an argument. ``restore_size_producers(before,
after)`` takes the pass's input and output and puts back, in ``before``'s order, the producers
of every size symbol that ``after``'s tensors carry undefined (and, transitively, of the numbers
those producers use). Its steps:

1. ``index_after``: where ``after`` defines and first uses each name, which tensor carries each
   size, and which sizes are used undefined (``wanted``);
2. ``definitions_in``: ``before``'s bound symbols by what they output, split into producers,
   ``shape`` bindings and unpackings;
3. ``producers_to_restore``: the producers of the wanted sizes and of their number arguments;
4. ``place_producers``: each one right after the bound symbol of ``after`` that defines the last
   of its arguments, if that is before the first use of its outputs, with ``shape`` bindings of
   the sizes it reads off existing tensors;
5. ``insert_placed``: ``after``'s bound symbols with the placed ones spliced in.

Linear in the lengths of both traces.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import thunder.core.prims as prims
from thunder.core.proxies import CollectionProxy, NumberProxy, Proxy, TensorProxy

from metatrace.checker import undefined_in
from metatrace.passes.trace_facts import binds_inputs, input_names, with_bound_symbols


def restore_size_producers(before, after):
    """``after`` (a DCE of ``before``, or the forward split from it) with the producers of its
    tensors' size symbols put back. Linear in the lengths of both traces.

    Each producer is placed, in ``before``'s order, as early as its arguments allow (after the
    bound symbol of ``after`` that defines the last of them) and before the first bound symbol of
    ``after`` that uses one of its outputs; one that cannot be placed so stays out (an orphan
    size beats a trace that cannot run). An argument that is a size of an existing tensor (an
    input's, or an earlier output's) is bound with ``prims.shape`` first, binding only sizes not
    bound yet (a re-bound forward size would drag the binding into the forward at the split). An
    argument that ``before`` unpacks from a collection (a backward's saved number) and ``after``
    no longer does gets its unpacking back, and one that ``before`` bound with a ``shape`` that
    names a size its tensor no longer carries gets that binding back. In a trace already claimed
    by executors the binding must be one the python executor runs.
    """
    index = index_after(after)
    if not index.wanted:
        return after
    definitions = definitions_in(before)
    restored = producers_to_restore(index, definitions)
    if not restored:
        return after
    inserts = place_producers(before, index, definitions, restored)
    if not inserts:
        return after
    return with_bound_symbols(after, insert_placed(index.bsyms, inserts), f"restored {sum(map(len, inserts.values()))} size producers")


@dataclass
class AfterIndex:
    """Where the trace after the pass defines and uses each name."""

    bsyms: list
    # name -> index in ``bsyms`` of its first definition (-1: a parameter no unpack binds)
    position: dict[str, int] = field(default_factory=dict)
    # size name -> (tensor carrying it, index of the tensor's definition)
    owners: dict[str, tuple] = field(default_factory=dict)
    # name -> index of the first bound symbol using it (argument or size)
    first_use: dict[str, int] = field(default_factory=dict)
    # name -> index of the first bound symbol taking it as an argument
    first_argument_use: dict[str, int] = field(default_factory=dict)
    # sizes used where nothing defines them (the checker's orphans), in order of use
    wanted: list[str] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.bsyms)


def index_after(after) -> AfterIndex:
    """One walk over ``after``: definitions, first uses, owners of sizes, and the sizes wanted
    (used undefined, and defined by no bound symbol of ``after`` at all: a size some bound symbol
    outputs, only too late, is ``hoist_size_producers``' job)."""
    index = AfterIndex(list(after.bound_symbols))
    defined = input_names(after)  # grows in trace order, as in the checker
    for i, b in enumerate(index.bsyms):
        _note_arguments(index, i, b, defined)
        if b.sym.is_fusion:
            _note_region(index, i, b, defined)
        _note_outputs(index, i, b, defined)
    _note_parameters(index, _parameters(after))
    index.wanted = [name for name in index.wanted if name not in index.position]
    return index


def _note_arguments(index: AfterIndex, i: int, b, defined: set) -> None:
    for a in b.flat_proxy_args:
        index.first_use.setdefault(a.name, i)
        index.first_argument_use.setdefault(a.name, i)
        if isinstance(a, TensorProxy):
            for s in a._shape:
                if isinstance(s, NumberProxy):
                    index.first_use.setdefault(s.name, i)
                    if s.name not in defined:
                        index.wanted.append(s.name)


def _note_region(index: AfterIndex, i: int, region, defined: set) -> None:
    """A fusion region's bound symbols use sizes only the region's tensors carry (a sliced
    intermediate's ``i828``): dead-code elimination after fusion sees no use of them, and the
    number op defining them went; they are wanted before the region."""
    for name in undefined_in(region.subsymbols, defined):
        index.first_use.setdefault(name, i)
        index.wanted.append(name)


def _note_outputs(index: AfterIndex, i: int, b, defined: set) -> None:
    binder = binds_inputs(b)
    outs = b.flat_proxy_outs
    for o in outs:
        index.position.setdefault(o.name, i)
        defined.add(o.name)
    for o in outs:
        if isinstance(o, TensorProxy):
            for s in o._shape:
                if isinstance(s, NumberProxy):
                    index.first_use.setdefault(s.name, i)
                    index.owners.setdefault(s.name, (o, i))
                    if binder:
                        defined.add(s.name)
                    elif s.name not in defined:
                        index.wanted.append(s.name)
                        defined.add(s.name)  # once


def _note_parameters(index: AfterIndex, params: dict) -> None:
    """Parameters are defined before every bound symbol, and own their sizes from there."""
    for p in params.values():
        at = index.position.setdefault(p.name, -1)
        if isinstance(p, TensorProxy):
            for s in p._shape:
                if isinstance(s, NumberProxy) and index.owners.get(s.name, (None, index.n))[1] > at:
                    index.owners[s.name] = (p, at)


def _parameters(trace) -> dict:
    """The trace function's own parameters: the proxies directly in its args and kwargs (a
    backward's nested ``saved_for_backward`` members exist only once an unpack binds them)."""
    params = {}
    for p in (*(trace.args or ()), *(trace.kwargs or {}).values()):
        if isinstance(p, Proxy) and not isinstance(p, CollectionProxy):
            params.setdefault(p.name, p)
    return params


@dataclass
class Definitions:
    """The bound symbols of the trace before the pass, by the names they output (first wins).

    A size's producer is an op that computes it. A ``shape`` binding re-binds sizes of a tensor
    that must already exist, and an unpack binds inputs: never the definition of a tensor's
    size, but what an argument of a restored producer may need (a binding that names a size its
    tensor no longer carries; a number the backward unpacks from ``saved_for_backward``)."""

    producers: dict = field(default_factory=dict)
    binders: dict = field(default_factory=dict)
    unpackers: dict = field(default_factory=dict)

    @functools.cached_property
    def _binder_ids(self) -> set[int]:
        return {id(b) for b in self.binders.values()}

    @functools.cached_property
    def _unpacker_ids(self) -> set[int]:
        return {id(b) for b in self.unpackers.values()}

    def is_binder(self, bsym) -> bool:
        return id(bsym) in self._binder_ids

    def is_unpacker(self, bsym) -> bool:
        return id(bsym) in self._unpacker_ids


def definitions_in(before) -> Definitions:
    definitions = Definitions()
    for b in before.bound_symbols:
        if b.sym.id == prims.PrimIDs.SHAPE or b.sym.name == "shape":
            table = definitions.binders
        elif b.sym.name.startswith("unpack"):
            table = definitions.unpackers
        else:
            table = definitions.producers
        for out in b.flat_proxy_outs:
            table.setdefault(out.name, b)
    return definitions


def producers_to_restore(index: AfterIndex, definitions: Definitions) -> set[int]:
    """The ids of the bound symbols of ``before`` that define the wanted sizes, and, transitively,
    the numbers and collections those take that ``after`` does not define (a producer for a
    wanted size; also a binding or unpacking for an argument)."""
    restored: set[int] = set()
    todo = [(name, False) for name in index.wanted]
    while todo:
        name, is_argument = todo.pop()
        producer = definitions.producers.get(name)
        if producer is None and is_argument:
            producer = definitions.binders.get(name) or definitions.unpackers.get(name)
        if producer is None or id(producer) in restored:
            continue
        restored.add(id(producer))
        todo.extend((a.name, True) for a in producer.flat_proxy_args
                    if isinstance(a, (NumberProxy, CollectionProxy)) and a.name not in index.position)
    return restored


@dataclass
class Placement:
    """What ``place_producers`` has placed so far."""

    index: AfterIndex
    shape_symbol: object  # the ``shape`` symbol that re-binds sizes of existing tensors
    placed: dict[str, int] = field(default_factory=dict)  # name -> anchor of a restored definition
    bound: dict[str, int] = field(default_factory=dict)  # size name -> earliest anchor of a restored binding
    inserts: dict[int, list] = field(default_factory=dict)  # anchor -> bound symbols to put right after bsyms[anchor]

    def unbound_at(self, name: str, anchor: int) -> bool:
        """Whether nothing binds ``name`` at or before ``anchor`` (a size to bind there)."""
        for table in (self.index.position, self.placed, self.bound):
            at = table.get(name)
            if at is not None and at <= anchor:
                return False
        return True

    def mark_bound(self, sizes, anchor: int) -> None:
        for s in sizes:
            if isinstance(s, NumberProxy):
                self.bound[s.name] = min(self.bound.get(s.name, self.index.n), anchor)

    def unbound_only(self, sizes, anchor: int) -> tuple:
        """``sizes`` with those already bound at ``anchor`` as their values (not bound again)."""
        return tuple(
            s if not isinstance(s, NumberProxy) or self.unbound_at(s.name, anchor) else s.value
            for s in sizes
        )


def place_producers(before, index: AfterIndex, definitions: Definitions, restored: set[int]) -> dict[int, list]:
    """anchor -> the restored bound symbols (with the ``shape`` bindings their arguments need)
    to put right after ``after``'s bound symbol ``anchor`` (-1: first), in ``before``'s order."""
    executed = any(b.sym.executor is not None for b in index.bsyms)
    placement = Placement(index, _python_executor_shape() if executed else prims.shape)
    for producer in before.bound_symbols:
        if id(producer) in restored:
            _place(placement, producer, definitions)
    return placement.inserts


def _place(placement: Placement, producer, definitions: Definitions) -> None:
    """Places ``producer`` as early as its arguments allow, unless that is after the first use of
    its outputs or all of them are bound there already."""
    found = _anchor(placement, producer)
    if found is None:
        return
    anchor, unbound = found
    # (what a restored binding or unpacking outputs that is bound already is dropped below)
    outs = [o for o in producer.flat_proxy_outs if placement.unbound_at(o.name, anchor)]
    if not outs:
        return
    binder, unpacker = definitions.is_binder(producer), definitions.is_unpacker(producer)
    # (a binding or unpacking only has to come before the arguments it binds: a size it re-binds
    # may sit in earlier shapes)
    index = placement.index
    uses = index.first_argument_use if binder or unpacker else index.first_use
    first_user = min(uses.get(o.name, index.n - 1) for o in outs)
    if anchor + 1 > first_user:
        return
    here = placement.inserts.setdefault(anchor, [])
    here.extend(_shape_bindings(placement, unbound, anchor))
    if binder:
        # only what is not bound yet (see above)
        output = placement.unbound_only(producer.output, anchor)
        producer = producer.from_bsym(output=output)
        placement.mark_bound(output, anchor)
    elif producer.sym.name.startswith("unpack"):
        producer = _unpacking_only_unbound(placement, producer)
    here.append(producer)
    for o in outs:
        placement.placed.setdefault(o.name, anchor)


def _anchor(placement: Placement, producer):
    """(anchor, sizes to bind) for ``producer``: the index of the bound symbol of ``after`` (or
    placed one) defining the last of its arguments, and the arguments that are sizes of existing
    tensors that nothing binds; None if an argument is defined nowhere."""
    index = placement.index
    anchor, unbound = -1, []
    for a in producer.flat_proxy_args:
        if not isinstance(a, (NumberProxy, CollectionProxy, TensorProxy)):
            continue
        if (at := index.position.get(a.name)) is not None or (at := placement.placed.get(a.name)) is not None:
            anchor = max(anchor, at)
        elif (owner := index.owners.get(a.name)) is not None and not isinstance(a, TensorProxy):
            anchor = max(anchor, owner[1])
            unbound.append(a.name)
        else:
            return None
    return anchor, unbound


def _shape_bindings(placement: Placement, sizes: list[str], anchor: int) -> list:
    """``shape`` bindings, at ``anchor``, of the owners of ``sizes`` not bound there yet."""
    bindings = []
    for name in sizes:
        if placement.bound.get(name, placement.index.n) <= anchor:
            continue
        tensor = placement.index.owners[name][0]
        output = placement.unbound_only(tensor._shape, anchor)
        bindings.append(placement.shape_symbol.bind(tensor, output=output))
        placement.mark_bound(output, anchor)
    return bindings


def _unpacking_only_unbound(placement: Placement, producer):
    """What ``after`` already binds stays bound there only: its outputs here are None."""
    index = placement.index
    if not isinstance(producer.output, (tuple, list)):  # one collection (``saved_for_backward``)
        return producer
    output = type(producer.output)(
        None if isinstance(o, Proxy) and (o.name in index.position or o.name in placement.placed) else o
        for o in producer.output
    )
    return producer.from_bsym(output=output)


def insert_placed(bsyms: list, inserts: dict[int, list]) -> list:
    result = list(inserts.get(-1, ()))
    for i, b in enumerate(bsyms):
        result.append(b)
        result.extend(inserts.get(i, ()))
    return result


def _python_executor_shape():
    from thunder.executors.pythonex import shape

    return shape
