"""Keeps every size symbol of a ``TraceSubstitutionProcessor``'s new trace defined, old traces
untouched.

thunder's executor passes are such processors: they re-run bound symbols, and a re-run number op
outputs a new proxy (``i85`` for ``i71``) that replaces the old one in later arguments (the
processor's swap map), but not in tensor shapes, and a re-run tensor op may give its output other
size symbols than the old output had. Tensor proxies are shared between traces, so renaming sizes
in place would make earlier traces (``thunder.last_traces``) use names they never define.
``keep_size_names(processor)`` runs after the processor, in steps:

1. ``index_substitution``: what the new trace produces and computes, and the inputs of both;
2. ``give_back_old_names``: a re-run number op outputs its old proxy again
   (``i71 = operator.sub(i2, 2)``), so the sizes that name it stay defined;
3. ``rename_candidates``: numbers replaced by ones that already existed, and sizes of swapped
   tensors that the re-run ops computed anew;
4. ``renames``: those candidates, followed to their final names, less inputs' sizes and the
   numbers step 2 kept;
5. ``rename_sizes_copying_shared``: the renames applied to the new trace's tensors, in place for
   tensors only it holds, through copies swapped in where the old trace holds the same tensor.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from thunder.core.proxies import NumberProxy, TensorProxy, variableify
from thunder.core.pytree import tree_iter

from metatrace.passes.trace_facts import binds_inputs, input_names
from metatrace.metas import runtime
from metatrace.metas.proxy_edits import copy_with_own_tags, set_shape
from metatrace.proxies.renames import rename_sizes
from metatrace.proxies.renames import proxy_outputs as _outputs  # (one walker of output proxies for both modules)


def keep_size_names(processor) -> None:
    """Keeps every size symbol of the processor's new trace defined, old traces untouched.

    - a re-run number op outputs its old proxy again (``i71 = operator.sub(i2, 2)``): the sizes
      that name it stay defined, and nothing in the old trace changes;
    - a number replaced by one that already existed (a re-run op folded to an operand) and a
      size of a swapped tensor that the re-run op computed anew (it lived in the old symbol's
      subsymbols, or the processor's new ops computed it again) is renamed to its replacement
      in the tensors that still carry it: in place in tensors this processor made, through
      copies swapped in where the old trace holds the same tensor. Never renamed: an input or
      an input tensor's size (a re-run ``transpose`` in a grad rule gives ``h``'s place to the
      equal ``i43`` of a padded cotangent: no reason to rename ``h`` in the forward), and a
      number whose op step 2 re-ran under its old name.
    """
    state = index_substitution(processor)
    back = give_back_old_names(state)
    candidates = rename_candidates(state, back)
    if not candidates:
        return
    renamed = renames(candidates, state.inputs, kept={was.name for was in back.values()})
    if renamed:
        rename_sizes_copying_shared(state.new_trace, state.old_trace, renamed)


@dataclass
class Substitution:
    """A processor's old and new traces, with what the steps read off them."""

    old_trace: object
    new_trace: object
    swaps: dict  # the processor's swap map: Variable of an old proxy -> its replacement
    produced: dict = field(default_factory=dict)  # name -> the proxy the new trace outputs first under it
    computed: set = field(default_factory=set)  # numbers a bound symbol computes (not one that binds existing sizes)
    inputs: set = field(default_factory=set)  # both traces' inputs and their tensors' sizes

    @property
    def bsyms(self) -> list:
        return self.new_trace.bound_symbols


def index_substitution(processor) -> Substitution:
    state = Substitution(processor.trace, processor.new_trace, processor.swap_map)
    for b in state.bsyms:
        binder = binds_inputs(b)
        for o in b.flat_proxy_outs:
            state.produced.setdefault(o.name, o)
            if not binder:
                state.computed.add(o.name)
    state.inputs = input_names(state.old_trace, state.new_trace)
    return state


def give_back_old_names(state: Substitution) -> dict:
    """Re-run number ops output their old proxies again, in the new trace's bound symbols and in
    the shapes of fresh tensors computed from them; returns new name -> old proxy.

    (A re-run ``shape`` returns the sizes its tensor carries now: those are no new names, and
    other tensors hold them too.)"""
    back = {}
    for old, new in state.swaps.items():
        was = old.proxy
        if (isinstance(was, NumberProxy) and isinstance(new, NumberProxy) and was.name != new.name
                and new.name in state.computed and state.produced.get(new.name) is new
                and was.name not in state.produced and was.name not in state.inputs):
            back[new.name] = was
    if not back:
        return back
    for was in back.values():
        # The runtime folds ``was + k`` through the chain of constant offsets ``was`` was
        # recorded with (its base and offset), whose base lives in the old trace's scope: in the
        # new trace that fold would name a number nothing there binds.
        runtime.forget_offset(was)
    swap = {variableify(state.produced[name]): was for name, was in back.items()}
    bsyms = state.bsyms
    for i, b in enumerate(bsyms):
        if any(p.name in back for p in b.flat_proxy_outs) or any(p.name in back for p in b.flat_proxy_args):
            bsyms[i] = b.from_bsym_swap_proxies(swap, skip_subsymbols=False)
    for name, was in back.items():
        del state.produced[name]
        state.produced[was.name] = was
    # fresh tensors (computed from the new numbers) carry them in their shapes
    rename_sizes(bsyms, back)
    return back


def rename_candidates(state: Substitution, back: dict) -> dict:
    """old size name -> replacement: numbers replaced by one that was already there (a re-run op
    folded to an operand, a re-run ``shape``: no old name to give back), and sizes of swapped
    tensors whose definition is gone (the re-run op gave the new tensor other sizes)."""
    candidates: dict = {}
    for old, new in state.swaps.items():
        was = old.proxy
        if isinstance(was, NumberProxy) and isinstance(new, NumberProxy):
            if was.name != new.name and new.name not in back:
                candidates[was.name] = new
    swapped = {old.proxy.name for old, new in state.swaps.items() if isinstance(new, TensorProxy)}
    old_tensors = tensors_of(state.old_trace, swapped) if swapped else {}
    sizes: dict = {}
    for old, new in state.swaps.items():
        if isinstance(new, TensorProxy) and (before := old_tensors.get(old.proxy.name)) is not None:
            for was, now in zip(before._shape, new._shape):
                if isinstance(was, NumberProxy) and isinstance(now, NumberProxy) and was.name != now.name:
                    sizes.setdefault(was.name, now)
    for name in still_defined(state, sizes):
        del sizes[name]
    for name, now in sizes.items():
        candidates.setdefault(name, now)
    return candidates


def still_defined(state: Substitution, sizes: dict) -> set[str]:
    """The names in ``sizes`` whose definition is not gone: a top-level bound symbol of the new
    trace outputs the name at or before the first bound symbol whose tensors carry it.

    A re-run composite (``ltorch.split``) computes its outputs' sizes anew in its subsymbols
    (``i748``), while the old size (``i311``) stays bound at the top level by a later ``shape`` of
    the new tensor, which the backward of a ``reshape`` takes as its shape: renaming ``i311`` to
    ``i748`` in that reshape's output would leave the backward, which has no ``split``, a size
    defined nowhere."""
    wanted = {name for name in sizes if name in state.produced}
    if not wanted:
        return set()
    def carried(tensors) -> set[str]:
        return {s.name for t in tensors if isinstance(t, TensorProxy) for s in t._shape
                if isinstance(s, NumberProxy) and s.name in wanted}

    defined: set[str] = set()
    for b in state.bsyms:
        used = carried(b.flat_proxy_args)  # (arguments come before the outputs, as in the checker)
        outs = {o.name for o in b.flat_proxy_outs if o.name in wanted} - used
        defined |= outs
        wanted -= used | outs | carried((*b.flat_proxy_outs, *_nested_outputs((b,))))
        if not wanted:
            break
    return defined


def renames(candidates: dict, inputs: set, kept: set) -> dict:
    """old name -> final replacement, following chains of candidates.

    An input's sizes are definitions, never renamed (a re-run elementwise op may give its output
    the other operand's equal size). Nor is a number the processor re-ran (``kept``: step 2 kept
    its name): tensors carry it and its producer rightly, and equal sizes of other operands that
    re-run metas put in its place (``q @ k.mT``'s grads give ``q``'s head size ``k``'s name)
    would otherwise rename it, and the other name to it, crosswise."""
    renamed = {}
    for was, now in candidates.items():
        if was in inputs or was in kept:
            continue
        for _ in range(len(candidates)):
            if now.name in inputs or now.name not in candidates:
                break
            now = candidates[now.name]
        if now.name != was:
            renamed[was] = now
    return renamed


def tensors_of(trace, names: set) -> dict:
    """name -> tensor for the tensors named in ``names`` that the trace's bound symbols output,
    top-level names first (subsymbols may reuse them), then those of subsymbols at every depth;
    the walk stops once every name is found."""
    tensors: dict = {}
    missing = set(names)
    for b in trace.bound_symbols:
        for o in b.flat_proxy_outs:
            if o.name in missing and isinstance(o, TensorProxy):
                tensors[o.name] = o
                missing.discard(o.name)
    for b in trace.bound_symbols:
        if not missing:
            break
        _collect_tensors(b.subsymbols, tensors, missing)
    return tensors


def _nested_outputs(bsyms):
    """The proxies the subsymbols of ``bsyms`` output, at every depth."""
    for b in bsyms:
        for sub in b.subsymbols:
            yield from _outputs(sub.output)
            if sub.subsymbols:
                yield from _nested_outputs((sub,))


def _collect_tensors(bsyms, into: dict, missing: set) -> None:
    for b in bsyms:
        for o in b.flat_proxy_outs:
            if o.name in missing and isinstance(o, TensorProxy):
                into[o.name] = o
                missing.discard(o.name)
    if not missing:
        return
    for o in _nested_outputs(bsyms):
        if isinstance(o, TensorProxy) and o.name in missing:
            into[o.name] = o
            missing.discard(o.name)
            if not missing:
                return


def rename_sizes_copying_shared(new_trace, old_trace, renamed: dict) -> None:
    """``renamed`` applied to the sizes of the new trace's tensors: in place for tensors only the
    new trace holds, through copies swapped in for those the old trace holds too.

    Every tensor a trace uses is an input or an output of a bound symbol or subsymbol (a
    subsymbol's arguments are its parent's or earlier subsymbols' outputs), inputs' sizes are
    never renamed: walking outputs finds them all."""
    found = _tensors_carrying(new_trace.bound_symbols, renamed)
    if not found:
        return
    shared = _held_by(old_trace, found)
    copies: dict = {}  # name -> copy
    for key, p in found.items():
        new_shape = tuple(renamed.get(s.name, s) if isinstance(s, NumberProxy) else s for s in p._shape)
        if key in shared:
            p = copy_with_own_tags(p)
            copies[p.name] = p
        set_shape(p, new_shape)
    if copies:
        _swap_in_copies(new_trace.bound_symbols, copies)


def _tensors_carrying(bsyms, renamed: dict) -> dict[int, TensorProxy]:
    """id -> tensor, for the tensors ``bsyms`` and their subsymbols output whose shapes name a
    size in ``renamed``."""
    found: dict[int, TensorProxy] = {}

    def consider(p) -> None:
        if isinstance(p, TensorProxy) and id(p) not in found:
            for size in p._shape:
                if isinstance(size, NumberProxy) and size.name in renamed:
                    found[id(p)] = p
                    break

    for b in bsyms:
        for p in b.flat_proxy_outs:
            consider(p)
    for p in _nested_outputs(bsyms):
        consider(p)
    return found


def _held_by(trace, found: dict) -> set[int]:
    """The ids in ``found`` of tensors ``trace`` holds too (inputs and outputs at every depth)."""
    shared = {id(p) for p in tree_iter((trace.args, trace.kwargs)) if id(p) in found}
    for b in trace.bound_symbols:
        shared.update(id(p) for p in b.flat_proxy_outs if id(p) in found)
    shared.update(id(p) for p in _nested_outputs(trace.bound_symbols) if id(p) in found)
    return shared


def _swap_in_copies(bsyms: list, copies: dict) -> None:
    """Replaces, in place, the bound symbols of ``bsyms`` that use a tensor named in ``copies``
    by ones that use the copy."""
    swap = {variableify(q): q for q in copies.values()}  # (a Variable is its proxy's name)
    for i, b in enumerate(bsyms):
        if (any(p.name in copies for p in b.flat_proxy_args) or any(p.name in copies for p in b.flat_proxy_outs)
                or any(p.name in copies for p in _nested_outputs((b,)))):
            bsyms[i] = b.from_bsym_swap_proxies(swap, skip_subsymbols=False)
