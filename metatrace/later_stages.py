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
  tensor shapes: the sizes are renamed the same way (as ``metatrace.renames`` does for the
  interpreter's renames).

- the forward/backward split puts a number op in the forward only if the forward *uses* its
  output as an argument, so the producer of a forward tensor's size can land in the backward:
  the forward gets those producers back the same way.

thunder imports ``dce`` by name in several modules; each binding is swapped and restored.
"""

from __future__ import annotations

import functools
import sys

import thunder.core.prims as prims
import thunder.core.transform_common as transform_common
import thunder.executors.passes as passes
import thunder.transforms.autodiff as autodiff
from thunder.core.compile_data import using_symbolic_values
from thunder.core.proxies import NumberProxy, TensorProxy
from thunder.core.pytree import tree_iter

from metatrace.renames import rename_sizes
from metatrace.runtime import INTERPRETING
from thunder.core.trace_interpreter import TraceSubstitutionProcessor

_original_processor_call = TraceSubstitutionProcessor.__call__
_original_split = autodiff.split_into_forward_and_backward

_original_dce = transform_common.dce
_original_transform_for_execution = passes.transform_for_execution
_original_operator_pass = passes._transform_for_operator_executor_execution
_swapped: list = []


def _sizes_of(bsym):
    for p in tree_iter((bsym.args, bsym.kwargs, bsym.output)):
        if isinstance(p, TensorProxy):
            yield from (s for s in p._shape if isinstance(s, NumberProxy))


def restore_size_producers(before, after):
    """``after`` (a DCE of ``before``) with the producers of its tensors' size symbols put back."""
    kept = {id(b) for b in after.bound_symbols}
    defined = {p.name for p in tree_iter((after.args, after.kwargs)) if hasattr(p, "name")}
    for p in tree_iter((after.args, after.kwargs)):
        if isinstance(p, TensorProxy):
            defined.update(s.name for s in p._shape if isinstance(s, NumberProxy))
    producers = {}
    for b in before.bound_symbols:
        if b.sym.id == prims.PrimIDs.SHAPE or b.sym.name == "shape" or b.sym.name.startswith("unpack"):
            continue  # they re-bind sizes of tensors that must already exist; never a definition
        for out in b.flat_proxy_outs:
            producers.setdefault(out.name, b)
    for b in after.bound_symbols:
        defined.update(out.name for out in b.flat_proxy_outs)
    wanted = [s for b in after.bound_symbols for s in _sizes_of(b) if s.name not in defined]
    restored: set[int] = set()
    while wanted:
        s = wanted.pop()
        producer = producers.get(s.name)
        if producer is None or id(producer) in kept or id(producer) in restored:
            continue
        restored.add(id(producer))
        wanted.extend(a for a in producer.flat_proxy_args if isinstance(a, NumberProxy) and a.name not in defined)
    if not restored:
        return after
    inputs = {p.name for p in tree_iter((after.args, after.kwargs)) if hasattr(p, "name")}
    bsyms = list(after.bound_symbols)
    # Forward order, each as early as its arguments allow: a producer feeding another restored
    # one lands before it. One whose arguments are not all defined before its first user
    # cannot be placed: it stays out (an orphan size beats a trace that cannot run).
    # An argument that is a size of an existing tensor (an input's, or an earlier output's) is
    # bound with ``prims.shape`` first: a size is a Python local only once something unpacks it.
    # In a trace already claimed by executors the binding must be one the python executor runs.
    executed = any(b.sym.executor is not None for b in after.bound_symbols)
    shape_symbol = _python_executor_shape() if executed else prims.shape
    owners = {s.name: (t, -1) for t in tree_iter((after.args, after.kwargs)) if isinstance(t, TensorProxy)
              for s in t._shape if isinstance(s, NumberProxy)}
    for producer in (b for b in before.bound_symbols if id(b) in restored):
        position = {o.name: i for i, b in enumerate(bsyms) for o in b.flat_proxy_outs}
        for i, b in enumerate(bsyms):
            for o in b.flat_proxy_outs:
                if isinstance(o, TensorProxy):
                    for size in o._shape:
                        if isinstance(size, NumberProxy):
                            owners.setdefault(size.name, (o, i))
        args = [a.name for a in producer.flat_proxy_args if isinstance(a, NumberProxy)]
        unbound = [a for a in args if a not in position and a not in inputs]
        if any(a not in owners for a in unbound):
            continue
        # (an input tensor is bound where the trace unpacks it, if it does)
        binds = {id(owners[a][0]): (owners[a][0], position.get(owners[a][0].name, owners[a][1])) for a in unbound}
        earliest = max([position[a] + 1 for a in args if a in position] + [i + 1 for _, i in binds.values()], default=0)
        outs = {o.name for o in producer.flat_proxy_outs}
        first_user = next((i for i, b in enumerate(bsyms) if _uses(b, outs)), len(bsyms) - 1)
        if earliest <= first_user:
            bsyms.insert(earliest, producer)
            for tensor, _ in binds.values():
                bsyms.insert(earliest, shape_symbol.bind(tensor, output=tensor._shape))
    after.bound_symbols = bsyms
    return after


def _python_executor_shape():
    from thunder.executors.pythonex import shape

    return shape


def hoist_size_producers(trace):
    """Moves number ops that define sizes of earlier tensors up, before the first such tensor.

    thunder's grad transform puts each rule's forward part first and its backward part (where
    the split of the rule's ops sends number ops that no forward *argument* uses) after it, so
    the producer of a forward tensor's size (``i16 = add(i15, x2)`` for ``pad``'s output) comes
    after the tensor. The producer moves with the number ops it depends on in between, if every
    other argument is defined before the tensor; otherwise it stays where it is.
    """
    bsyms = list(trace.bound_symbols)
    moved = False
    for producer in [b for b in bsyms if _is_number_op(b)]:
        at = next(k for k, b in enumerate(bsyms) if b is producer)
        outs = {o.name for o in producer.flat_proxy_outs}
        user = next((k for k, b in enumerate(bsyms[:at]) if _uses(b, outs)), None)
        if user is None:
            continue
        chain = _chain_between(bsyms, user, at)
        if chain is None:
            continue
        ids = {id(b) for b in chain}
        bsyms = bsyms[:user] + chain + [b for b in bsyms[user:] if id(b) not in ids]
        moved = True
    if moved:
        trace.bound_symbols = bsyms
    return trace


def _chain_between(bsyms: list, user: int, at: int) -> list | None:
    """``bsyms[at]`` with the number ops in ``bsyms[user:at]`` it depends on, in order; None if it
    depends on anything else defined there."""
    defined_in_between = {o.name: b for b in bsyms[user:at] for o in b.flat_proxy_outs}
    chain, todo = {id(bsyms[at]): bsyms[at]}, [bsyms[at]]
    while todo:
        b = todo.pop()
        for a in b.flat_proxy_args:
            dep = defined_in_between.get(a.name)
            if dep is None or id(dep) in chain:
                continue
            if not _is_number_op(dep):
                return None
            chain[id(dep)] = dep
            todo.append(dep)
    return [b for b in bsyms[user:at + 1] if id(b) in chain]


def _is_number_op(bsym) -> bool:
    outs = bsym.flat_proxy_outs
    return (
        bool(outs)
        and all(isinstance(o, NumberProxy) for o in outs)
        and all(not isinstance(a, TensorProxy) for a in bsym.flat_proxy_args)
        and bsym.sym.name != "shape"
        and not bsym.sym.name.startswith("unpack")
    )


def _uses(bsym, names: set[str]) -> bool:
    if any(a.name in names for a in bsym.flat_proxy_args):
        return True
    return any(s.name in names for s in _sizes_of(bsym))


@functools.wraps(_original_dce)
def dce(trace, needed_proxies=None):
    result = _original_dce(trace, needed_proxies)
    if not using_symbolic_values():
        return result
    return restore_size_producers(trace, result)


@functools.wraps(_original_split)
def split_into_forward_and_backward(joint_trace):
    forward, backward = _original_split(joint_trace)
    if using_symbolic_values():
        forward = restore_size_producers(joint_trace, forward)
    return forward, backward


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


transform_for_execution = _recording(_original_transform_for_execution)
transform_for_operator_executor_execution = _recording(_original_operator_pass)


@functools.wraps(_original_processor_call)
def processor_call(self):
    result = _original_processor_call(self)
    if using_symbolic_values():
        renamed = _renamed_numbers(self)
        if renamed:
            rename_sizes(self.new_trace.bound_symbols, renamed)
    return result


def _renamed_numbers(processor) -> dict:
    """Old number name -> its replacement: numbers swapped directly, and the sizes of swapped
    tensors (a re-run op's output may carry new size symbols; tensors computed from the old
    output still carry the old ones)."""
    renamed = {}
    old_tensors: dict = {}

    def collect(bsyms):  # decomposed symbols' subsymbols are processed (and swapped) too
        for b in bsyms:
            for o in b.flat_proxy_outs:
                if isinstance(o, TensorProxy):
                    old_tensors.setdefault(o.name, o)
            collect(b.subsymbols)

    collect(processor.trace.bound_symbols)
    # An input's sizes are definitions, never renamed (a re-run elementwise op may give its
    # output the other operand's equal size: that is no reason to rename the input's).
    input_sizes = {s.name for t in tree_iter((processor.trace.args, processor.trace.kwargs))
                   if isinstance(t, TensorProxy) for s in t._shape if isinstance(s, NumberProxy)}
    for old, new in processor.swap_map.items():
        if isinstance(old.proxy, NumberProxy) and isinstance(new, NumberProxy) and old.proxy.name != new.name:
            renamed[old.proxy.name] = new
        elif isinstance(new, TensorProxy) and (before := old_tensors.get(old.proxy.name)) is not None:
            for was, now in zip(before._shape, new._shape):
                if (isinstance(was, NumberProxy) and isinstance(now, NumberProxy) and was.name != now.name
                        and was.name not in input_sizes):
                    renamed.setdefault(was.name, now)
    return renamed


def install() -> None:
    TraceSubstitutionProcessor.__call__ = processor_call
    replacements = {
        id(_original_dce): dce,
        id(_original_transform_for_execution): transform_for_execution,
        id(_original_operator_pass): transform_for_operator_executor_execution,
        id(_original_split): split_into_forward_and_backward,
    }
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "thunder" or name.startswith("thunder.")):
            continue
        for attr in ("dce", "transform_for_execution", "_transform_for_operator_executor_execution",
                     "split_into_forward_and_backward"):
            value = module.__dict__.get(attr)
            if value is not None and id(value) in replacements:
                _swapped.append((module, attr, value))
                setattr(module, attr, replacements[id(value)])


def uninstall() -> None:
    TraceSubstitutionProcessor.__call__ = _original_processor_call
    while _swapped:
        module, attr, value = _swapped.pop()
        setattr(module, attr, value)
