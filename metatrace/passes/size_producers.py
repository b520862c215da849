"""Traces after interpretation keep every size symbol defined.

Two thunder passes lose the definitions of size symbols that recorded arithmetic gave:

- dead-code elimination keeps a bound symbol only if an *argument* of a kept one uses its
  output, and a size symbol is often used only inside a tensor's shape: a kept ``pad``'s output
  ``f32[i48, ...]`` kept nothing that defines ``i48``. The wrapped ``dce`` puts back, in trace
  order, the producers of every size symbol that the kept bound symbols' tensors carry (and,
  transitively, of the numbers those producers use).
- executor passes (``transform_for_execution``) call the executors' symbols again, which reruns
  the metas: with recording off they made fresh, undefined sizes (``t154: f32[i118, ...]``).
  Recording stays on through them, so those sizes are computed (or folded to existing
  symbols) in the execution trace too.

- those passes (thunder's ``TraceSubstitutionProcessor``s) also re-run the number ops, whose
  new outputs replace the old ones in arguments through the processor's swap map, but not inside
  tensor shapes: a re-run number op outputs its old proxy again instead, and sizes whose
  definition is really gone are renamed, through copies where an earlier trace holds the same
  tensor (tensor proxies are shared between traces: ``thunder.last_traces`` must stay valid).

- the forward/backward split puts a number op in the forward only if the forward *uses* its
  output as an argument, so the producer of a forward tensor's size can land in the backward:
  the forward gets those producers back the same way.

Each pass is linear in the trace's length: one walk to index it, one to rebuild it.

thunder imports ``dce`` by name in several modules; each binding is swapped and restored.
"""

from __future__ import annotations

import copy
import functools
import sys

import thunder.core.prims as prims
import thunder.core.transform_common as transform_common
import thunder.executors.passes as passes
import thunder.transforms.autodiff as autodiff
from thunder.core.compile_data import using_symbolic_values
from thunder.core.proxies import CollectionProxy, NumberProxy, Proxy, TensorProxy, variableify
from thunder.core.pytree import tree_iter

from metatrace.proxies.renames import _numel_of_current_shape, rename_sizes
from metatrace.proxies.renames import proxy_outputs as _outputs  # (one walker of output proxies for both modules)
from metatrace.metas.runtime import INTERPRETING
from thunder.core.trace_interpreter import TraceSubstitutionProcessor

from metatrace.patching import Patch, attribute


def _sizes_of(bsym):
    """The size symbols of the tensors ``bsym`` takes and returns."""
    for p in bsym.flat_proxy_args:
        if isinstance(p, TensorProxy):
            yield from (s for s in p._shape if isinstance(s, NumberProxy))
    for p in bsym.flat_proxy_outs:
        if isinstance(p, TensorProxy):
            yield from (s for s in p._shape if isinstance(s, NumberProxy))


def _binds_inputs(bsym) -> bool:
    """Unpacking, ``shape`` and ``get_grad`` bind what they output, sizes included (see checker)."""
    name = bsym.sym.name
    return name.startswith("unpack") or name in ("shape", "get_grad")


def _parameters(trace) -> dict:
    """The trace function's own parameters: the proxies directly in its args and kwargs (a
    backward's nested ``saved_for_backward`` members exist only once an unpack binds them)."""
    params = {}
    for p in (*(trace.args or ()), *(trace.kwargs or {}).values()):
        if isinstance(p, Proxy) and not isinstance(p, CollectionProxy):
            params.setdefault(p.name, p)
    return params


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
    bsyms = list(after.bound_symbols)
    n = len(bsyms)
    params = _parameters(after)
    # name -> index in ``after`` of its first definition (-1: a parameter no unpack binds)
    position = {}
    # Inputs (nested ones too) with their sizes: defined throughout, as the strict checker sees it.
    inputs = set()
    for p in tree_iter((after.args, after.kwargs)):
        if isinstance(p, Proxy):
            inputs.add(p.name)
            if isinstance(p, TensorProxy):
                inputs.update(s.name for s in p._shape if isinstance(s, NumberProxy))
    defined = set(inputs)  # grows in trace order, as in the checker
    owners = {}  # size name -> (tensor, index of the tensor's definition)
    first_use = {}  # name -> index of the first bound symbol using it (argument or size)
    first_argument_use = {}  # name -> index of the first bound symbol taking it as an argument
    wanted = []  # sizes used where nothing defines them yet (the checker's orphans)
    for i, b in enumerate(bsyms):
        binder = _binds_inputs(b)
        for a in b.flat_proxy_args:
            first_use.setdefault(a.name, i)
            first_argument_use.setdefault(a.name, i)
            if isinstance(a, TensorProxy):
                for s in a._shape:
                    if isinstance(s, NumberProxy):
                        first_use.setdefault(s.name, i)
                        if s.name not in defined:
                            wanted.append(s.name)
        outs = b.flat_proxy_outs
        for o in outs:
            position.setdefault(o.name, i)
            defined.add(o.name)
        for o in outs:
            if isinstance(o, TensorProxy):
                for s in o._shape:
                    if isinstance(s, NumberProxy):
                        first_use.setdefault(s.name, i)
                        owners.setdefault(s.name, (o, i))
                        if binder:
                            defined.add(s.name)
                        elif s.name not in defined:
                            wanted.append(s.name)
                            defined.add(s.name)  # once
    for p in params.values():
        at = position.setdefault(p.name, -1)
        if isinstance(p, TensorProxy):
            for s in p._shape:
                if isinstance(s, NumberProxy) and owners.get(s.name, (None, n))[1] > at:
                    owners[s.name] = (p, at)
    # (a size some bound symbol of ``after`` outputs, only too late, is hoist_size_producers' job)
    wanted = [name for name in wanted if name not in position]
    if not wanted:
        return after

    # A size's producer is an op that computes it. A ``shape`` binding re-binds sizes of a tensor
    # that must already exist, and an unpack binds inputs: never the definition of a tensor's
    # size, but what an argument of a restored producer may need (a binding that names a size
    # its tensor no longer carries; a number the backward unpacks from ``saved_for_backward``).
    producers, binders, unpackers = {}, {}, {}
    for b in before.bound_symbols:
        if b.sym.id == prims.PrimIDs.SHAPE or b.sym.name == "shape":
            table = binders
        elif b.sym.name.startswith("unpack"):
            table = unpackers
        else:
            table = producers
        for out in b.flat_proxy_outs:
            table.setdefault(out.name, b)
    restored: set[int] = set()
    todo = [(name, False) for name in wanted]
    while todo:
        name, is_argument = todo.pop()
        producer = producers.get(name)
        if producer is None and is_argument:
            producer = binders.get(name) or unpackers.get(name)
        if producer is None or id(producer) in restored:
            continue
        restored.add(id(producer))
        todo.extend((a.name, True) for a in producer.flat_proxy_args
                    if isinstance(a, (NumberProxy, CollectionProxy)) and a.name not in position)
    if not restored:
        return after

    binder_ids = {id(b) for b in binders.values()}
    unpacker_ids = {id(b) for b in unpackers.values()}
    executed = any(b.sym.executor is not None for b in bsyms)
    shape_symbol = _python_executor_shape() if executed else prims.shape
    placed: dict[str, int] = {}  # name -> anchor of a restored definition
    bound: dict[str, int] = {}  # size name -> earliest anchor of a restored binding
    inserts: dict[int, list] = {}  # anchor -> bound symbols to put right after after[anchor]
    for producer in before.bound_symbols:
        if id(producer) not in restored:
            continue
        anchor, unbound = -1, []
        for a in producer.flat_proxy_args:
            if not isinstance(a, (NumberProxy, CollectionProxy, TensorProxy)):
                continue
            if (at := position.get(a.name)) is not None or (at := placed.get(a.name)) is not None:
                anchor = max(anchor, at)
            elif (owner := owners.get(a.name)) is not None and not isinstance(a, TensorProxy):
                anchor = max(anchor, owner[1])
                unbound.append(a.name)
            else:
                break
        else:
            # (what a restored binding or unpacking outputs that is bound already is dropped below)
            outs = [o for o in producer.flat_proxy_outs if _unbound_at(o.name, anchor, position, placed, bound)]
            if not outs:
                continue
            # (a binding or unpacking only has to come before the arguments it binds: a size it
            # re-binds may sit in earlier shapes)
            uses = first_argument_use if id(producer) in binder_ids or id(producer) in unpacker_ids else first_use
            first_user = min(uses.get(o.name, n - 1) for o in outs)
            if anchor + 1 > first_user:
                continue
            here = inserts.setdefault(anchor, [])
            for name in unbound:
                if bound.get(name, n) <= anchor:
                    continue
                tensor = owners[name][0]
                output = tuple(
                    s if not isinstance(s, NumberProxy) or _unbound_at(s.name, anchor, position, placed, bound)
                    else s.value
                    for s in tensor._shape
                )
                here.append(shape_symbol.bind(tensor, output=output))
                for s in output:
                    if isinstance(s, NumberProxy):
                        bound[s.name] = min(bound.get(s.name, n), anchor)
            if id(producer) in binder_ids:
                # only what is not bound yet (see above)
                output = tuple(
                    o if not isinstance(o, NumberProxy) or _unbound_at(o.name, anchor, position, placed, bound)
                    else o.value
                    for o in producer.output
                )
                producer = producer.from_bsym(output=output)
                for o in output:
                    if isinstance(o, NumberProxy):
                        bound[o.name] = min(bound.get(o.name, n), anchor)
            elif producer.sym.name.startswith("unpack"):
                # what after already binds stays bound there only: unused outputs are None
                output = type(producer.output)(
                    None if isinstance(o, Proxy) and (o.name in position or o.name in placed) else o
                    for o in producer.output
                )
                producer = producer.from_bsym(output=output)
            here.append(producer)
            for o in outs:
                placed.setdefault(o.name, anchor)
    if not inserts:
        return after
    result = list(inserts.get(-1, ()))
    for i, b in enumerate(bsyms):
        result.append(b)
        result.extend(inserts.get(i, ()))
    after.bound_symbols = result
    return after


def _unbound_at(name: str, anchor: int, position: dict, placed: dict, bound: dict) -> bool:
    """Whether nothing binds ``name`` at or before ``anchor`` (a size to bind there)."""
    for table in (position, placed, bound):
        at = table.get(name)
        if at is not None and at <= anchor:
            return False
    return True


def _python_executor_shape():
    from thunder.executors.pythonex import shape

    return shape


def hoist_size_producers(trace):
    """Moves number ops that define sizes of earlier tensors up, before the first such tensor.

    thunder's grad transform puts each rule's forward part first and its backward part (where
    the split of the rule's ops sends number ops that no forward *argument* uses) after it, so
    the producer of a forward tensor's size (``i16 = add(i15, x2)`` for ``pad``'s output) comes
    after the tensor. The producer moves with the number ops it depends on in between, if every
    other argument is defined before the tensor; otherwise it stays where it is (unless a moved
    number op needs it: then it goes just before that one).

    One walk to index the trace, one backwards to find each number op's deadline (the first
    bound symbol using its outputs, or an earlier moved number op using them), one to rebuild.
    """
    bsyms = list(trace.bound_symbols)
    n = len(bsyms)
    first_use: dict[str, int] = {}
    definer: dict[str, int] = {}
    is_number_op = [False] * n
    # earliest[i]: the index after which number op i can go once the number ops it depends on
    # move up as far as they can (-1: anywhere)
    earliest = [-1] * n
    for i, b in enumerate(bsyms):
        for name in _used_names(b):
            first_use.setdefault(name, i)
        if _is_number_op(b):
            is_number_op[i] = True
            e = -1
            for a in b.flat_proxy_args:
                j = definer.get(a.name)
                if j is not None:
                    e = max(e, earliest[j] if is_number_op[j] else j)
            earliest[i] = e
        for o in b.flat_proxy_outs:
            definer.setdefault(o.name, i)
    deadline = list(range(n))  # a moved number op goes right before bsyms[deadline[i]]
    moves = [False] * n
    needed_by = [n] * n  # the earliest deadline of a moved number op that uses number op i
    for i in range(n - 1, -1, -1):
        if not is_number_op[i]:
            continue
        own = min((first_use.get(o.name, n) for o in bsyms[i].flat_proxy_outs), default=n)
        target = min(i, own, needed_by[i])
        if target <= earliest[i]:
            # it cannot go before its own first user: only as far as moved ops using it need
            # (always possible: each of those can go after everything it depends on)
            target = min(i, needed_by[i])
        if target == i and needed_by[i] > i:
            continue
        moves[i] = True
        deadline[i] = target
        for a in bsyms[i].flat_proxy_args:
            j = definer.get(a.name)
            if j is not None and j >= target and is_number_op[j]:
                needed_by[j] = min(needed_by[j], target)
    if not any(moves):
        return trace
    moved: dict[int, list] = {}
    for i in range(n):
        if moves[i]:
            moved.setdefault(deadline[i], []).append(bsyms[i])
    result = []
    for i, b in enumerate(bsyms):
        result.extend(moved.get(i, ()))
        if not moves[i]:
            result.append(b)
    trace.bound_symbols = result
    return trace


def _used_names(bsym):
    """Names ``bsym`` uses: its arguments, and the sizes of the tensors it takes and returns."""
    for a in bsym.flat_proxy_args:
        yield a.name
    for s in _sizes_of(bsym):
        yield s.name


def _is_number_op(bsym) -> bool:
    outs = bsym.flat_proxy_outs
    return (
        bool(outs)
        and all(isinstance(o, NumberProxy) for o in outs)
        and all(not isinstance(a, TensorProxy) for a in bsym.flat_proxy_args)
        and bsym.sym.name != "shape"
        and not bsym.sym.name.startswith("unpack")
    )


def _dce(original):
    @functools.wraps(original)
    def dce(trace, needed_proxies=None):
        result = original(trace, needed_proxies)
        if not using_symbolic_values():
            return result
        return restore_size_producers(trace, result)

    return dce


def _split_into_forward_and_backward(original):
    @functools.wraps(original)
    def split_into_forward_and_backward(joint_trace):
        forward, backward = original(joint_trace)
        if using_symbolic_values():
            forward = restore_size_producers(joint_trace, forward)
        return forward, backward

    return split_into_forward_and_backward


def _recording(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        token = INTERPRETING.set(True) if using_symbolic_values() else None
        try:
            return fn(*args, **kwargs)
        finally:
            if token is not None:
                INTERPRETING.reset(token)

    return wrapper


def _processor_call(original):
    @functools.wraps(original)
    def processor_call(self):
        result = original(self)
        if using_symbolic_values() and self.swap_map:
            keep_size_names(self)
        return result

    return processor_call


def keep_size_names(processor) -> None:
    """Keeps every size symbol of the processor's new trace defined, old traces untouched.

    A processor re-runs bound symbols: a re-run number op outputs a new proxy (``i85`` for
    ``i71``) that replaces the old one in later arguments (the processor's swap map), but not in
    tensor shapes, and a re-run tensor op may give its output other size symbols than the old
    output had. Tensor proxies are shared between traces, so renaming sizes in place would make
    earlier traces (``thunder.last_traces``) use names they never define. Instead:

    - a re-run number op outputs its old proxy again (``i71 = operator.sub(i2, 2)``): the sizes
      that name it stay defined, and nothing in the old trace changes;
    - a number replaced by one that already existed (a re-run op folded to an operand) and a
      size of a swapped tensor that the re-run op computed anew (it lived in the old symbol's
      subsymbols, or the processor's new ops computed it again) is renamed to its replacement
      in the tensors that still carry it: in place in tensors this processor made, through
      copies swapped in where the old trace holds the same tensor. Never renamed: an input or
      an input tensor's size (a re-run ``transpose`` in a grad rule gives ``h``'s place to the
      equal ``i43`` of a padded cotangent: no reason to rename ``h`` in the forward), and a
      number whose op step 1 re-ran under its old name.
    """
    old_trace, new_trace = processor.trace, processor.new_trace
    swaps = processor.swap_map
    bsyms = new_trace.bound_symbols
    produced = {}
    computed = set()  # numbers a bound symbol computes (not one that binds existing sizes)
    for b in bsyms:
        binder = _binds_inputs(b)
        for o in b.flat_proxy_outs:
            produced.setdefault(o.name, o)
            if not binder:
                computed.add(o.name)
    inputs = set()
    for x in tree_iter((old_trace.args, old_trace.kwargs, new_trace.args, new_trace.kwargs)):
        if isinstance(x, Proxy):
            inputs.add(x.name)
            if isinstance(x, TensorProxy):
                inputs.update(s.name for s in x._shape if isinstance(s, NumberProxy))

    # 1. re-run number ops output their old proxies (a re-run ``shape`` returns the sizes its
    #    tensor carries now: those are no new names, and other tensors hold them too)
    back = {}
    for old, new in swaps.items():
        was = old.proxy
        if (isinstance(was, NumberProxy) and isinstance(new, NumberProxy) and was.name != new.name
                and new.name in computed and produced.get(new.name) is new
                and was.name not in produced and was.name not in inputs):
            back[new.name] = was
    if back:
        for was in back.values():
            # The runtime folds ``was + k`` through the chain of constant offsets ``was`` was
            # recorded with (``_mt_offset``: its base and offset), whose base lives in the old
            # trace's scope: in the new trace that fold would name a number nothing there binds.
            was.__dict__.pop("_mt_offset", None)
        swap = {variableify(produced[name]): was for name, was in back.items()}
        for i, b in enumerate(bsyms):
            if any(p.name in back for p in b.flat_proxy_outs) or any(p.name in back for p in b.flat_proxy_args):
                bsyms[i] = b.from_bsym_swap_proxies(swap, skip_subsymbols=False)
        for name, was in back.items():
            del produced[name]
            produced[was.name] = was
        # fresh tensors (computed from the new numbers) carry them in their shapes
        rename_sizes(bsyms, back)

    # 2. sizes of swapped tensors whose definition is gone
    old_tensors: dict = {}
    for b in old_trace.bound_symbols:  # top-level names first: subsymbols may reuse them
        for o in b.flat_proxy_outs:
            if isinstance(o, TensorProxy):
                old_tensors.setdefault(o.name, o)
    for b in old_trace.bound_symbols:
        _collect_tensors(b.subsymbols, old_tensors)
    candidates: dict = {}
    for old, new in swaps.items():
        was = old.proxy
        if isinstance(was, NumberProxy) and isinstance(new, NumberProxy):
            # a number replaced by one that was already there (a re-run op folded to an operand,
            # a re-run ``shape``): no old name to give back
            if was.name != new.name and new.name not in back:
                candidates[was.name] = new
    for old, new in swaps.items():
        if isinstance(new, TensorProxy) and (before := old_tensors.get(old.proxy.name)) is not None:
            for was, now in zip(before._shape, new._shape):
                if isinstance(was, NumberProxy) and isinstance(now, NumberProxy) and was.name != now.name:
                    candidates.setdefault(was.name, now)
    if not candidates:
        return
    # An input's sizes are definitions, never renamed (a re-run elementwise op may give its output
    # the other operand's equal size). Nor is a number this processor re-ran (step 1 kept its
    # name): tensors carry it and its producer rightly, and equal sizes of other operands that
    # re-run metas put in its place (``q @ k.mT``'s grads give ``q``'s head size ``k``'s name)
    # would otherwise rename it, and the other name to it, crosswise.
    kept = {was.name for was in back.values()}
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
    if renamed:
        _rename_sizes_copying_shared(new_trace, old_trace, renamed)


def _nested_outputs(bsyms):
    """The proxies the subsymbols of ``bsyms`` output, at every depth."""
    for b in bsyms:
        for sub in b.subsymbols:
            yield from _outputs(sub.output)
            if sub.subsymbols:
                yield from _nested_outputs((sub,))


def _collect_tensors(bsyms, into: dict) -> None:
    for b in bsyms:
        for o in b.flat_proxy_outs:
            if isinstance(o, TensorProxy):
                into.setdefault(o.name, o)
    for o in _nested_outputs(bsyms):
        if isinstance(o, TensorProxy):
            into.setdefault(o.name, o)


def _rename_sizes_copying_shared(new_trace, old_trace, renamed: dict) -> None:
    """``renamed`` applied to the sizes of the new trace's tensors: in place for tensors only the
    new trace holds, through copies swapped in for those the old trace holds too.

    Every tensor a trace uses is an input or an output of a bound symbol or subsymbol (a
    subsymbol's arguments are its parent's or earlier subsymbols' outputs), inputs' sizes are
    never renamed: walking outputs finds them all."""
    bsyms = new_trace.bound_symbols
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
    if not found:
        return
    shared = {id(p) for p in tree_iter((old_trace.args, old_trace.kwargs)) if id(p) in found}
    for b in old_trace.bound_symbols:
        shared.update(id(p) for p in b.flat_proxy_outs if id(p) in found)
    shared.update(id(p) for p in _nested_outputs(old_trace.bound_symbols) if id(p) in found)
    copies: dict = {}  # name -> copy
    for key, p in found.items():
        new_shape = tuple(renamed.get(s.name, s) if isinstance(s, NumberProxy) else s for s in p._shape)
        if key in shared:
            p = copy.copy(p)
            p._tags = set(p._tags)
            copies[p.name] = p
        p._shape = new_shape
        if callable(p._numel):
            p._numel = _numel_of_current_shape(p)
    if not copies:
        return
    swap = {variableify(q): q for q in copies.values()}  # (a Variable is its proxy's name)
    for i, b in enumerate(bsyms):
        if (any(p.name in copies for p in b.flat_proxy_args) or any(p.name in copies for p in b.flat_proxy_outs)
                or any(p.name in copies for p in _nested_outputs((b,)))):
            bsyms[i] = b.from_bsym_swap_proxies(swap, skip_subsymbols=False)


_PASSES_WHY = "executor passes and the forward/backward split keep (and re-bind) size producers"


def patches() -> list[Patch]:
    """One wrapper per pass, bound wherever a thunder module imported it (``from ... import dce``)."""
    wrappers = {
        id(original): wrap(original)
        for original, wrap in (
            (transform_common.dce, _dce),
            (passes.transform_for_execution, _recording),
            (passes._transform_for_operator_executor_execution, _recording),
            (autodiff.split_into_forward_and_backward, _split_into_forward_and_backward),
        )
    }
    rows = [attribute(TraceSubstitutionProcessor, "__call__", _processor_call, "as the passes", wrap=True)]
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "thunder" or name.startswith("thunder.")):
            continue
        for attr in ("dce", "transform_for_execution", "_transform_for_operator_executor_execution",
                     "split_into_forward_and_backward"):
            value = module.__dict__.get(attr)
            if value is not None and id(value) in wrappers:
                rows.append(attribute(module, attr, wrappers[id(value)], _PASSES_WHY))
    return rows
