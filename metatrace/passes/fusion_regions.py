"""Keeps size arithmetic and shape reads out of fusion regions, so that under symbolic values a
fusion executor fuses the same tensor ops it fuses under constant values.

A fusion executor fuses runs of bound symbols it can fuse (``torch_compile_ex``'s default
"consecutive" partition; nvFuser's dataflow partition likewise stops at an op it cannot take). A
number op (``i43 = operator.add(i42, 3)``) or a ``shape`` read (``(_, _, i744) = shape(t746)``)
between two tensor ops ends the run there. Under constant values neither is in the trace; under
symbolic values they sit where the user's code computed them (each layer's ``split``, RoPE's
slices, the mask's ``arange`` in litgpt), and the regions of stock's one would be dozens. Before
each fusion pass, :func:`sizes_before_regions`

1. lifts the sizes a ``shape`` read re-binds: a size already bound needs no read, and one that
   an earlier bound symbol computed in its subsymbols, with number ops from numbers defined
   before the read (``split``'s ``i744 = prims.sub(i737, query_size)``), is computed by those
   number ops, run by the python executor, instead (a size read off data or an inner tensor
   keeps its read);
2. hoists every number op and shape read right after the bound symbol that defines the last of
   its arguments: the unpacking of the inputs, for almost all of them.

Nothing is computed differently: the lifted ops are the subsymbols' own, and a number op only
moves earlier, after all it reads. Two walks: one to lift, one to hoist. The region's own copy
of its bound symbols also needs :func:`without_number_outputs` (``make_compiled`` names every
output of a region's subsymbols, and a ``shape`` read of a static size outputs an int).
"""

from __future__ import annotations

import functools
from numbers import Number

from thunder.core.compile_data import using_symbolic_values
from thunder.core.proxies import NumberProxy, Proxy, TensorProxy
from thunder.core.pytree import tree_iter, tree_map
from thunder.core.trace import TraceProvenance
from thunder.core import prims
from thunder.executors.torch_compile import TorchCompileExecutor
from thunder.extend import FusionExecutor

from metatrace.passes.hoist_producers import is_number_op
from metatrace.passes.trace_facts import with_bound_symbols
from metatrace.patching import Patch, attribute


def sizes_before_regions(trace):
    """``trace`` with the sizes ``shape`` reads re-bind computed where their arguments are, and
    every number op right after what it reads (a new trace; ``trace`` itself when nothing moves)."""
    # a size is defined once a bound symbol outputs it: thunder's producer map (which the fusion
    # pass builds regions with) has no entry for a size an input's shape carries
    arguments = [p for p in tree_iter((trace.args, trace.kwargs)) if isinstance(p, Proxy)]
    bsyms, lifted = lift_shape_reads(list(trace.bound_symbols), arguments)
    bsyms, hoisted = hoist_number_ops(bsyms)
    if not (lifted or hoisted):
        return trace
    return with_bound_symbols(
        trace, bsyms, f"bound sizes early with {lifted} number ops and shape reads, hoisted {hoisted} number ops before fusion"
    )


def lift_shape_reads(bsyms: list, arguments: list) -> tuple[list, int]:
    """(bound symbols, number of sizes lifted): each ``shape`` read's sizes bound as early as
    possible instead: by a read of the trace argument whose shape carries them (``input_ids``'s
    for an embedding's ``(batch_size, kv_length, _)``), by the number ops that computed them in
    earlier bound symbols' subsymbols (``split``'s for its outputs, ``arange``'s for a later
    ``ge`` of two of them) where those ops' arguments can be bound so, or by a read of the
    earliest tensor carrying them. A read keeps the sizes it cannot lift (the others become
    values)."""
    computed = _SubsymbolNumberOps(bsyms)
    defined = {p.name for p in arguments}
    owners = _Owners(arguments)
    result, lifted = [], 0
    for i, b in enumerate(bsyms):
        if _is_shape_read(b) and b.flat_proxy_args:
            ops, b = _lift(b, computed.before(i), owners, defined)
            result.extend(ops)
            lifted += len(ops)
            if b is None:
                continue
        result.append(b)
        defined.update(o.name for o in b.flat_proxy_outs)
        owners.add(b.flat_proxy_outs)
    return result, lifted


class _Owners:
    """size name -> (the earliest tensor carrying it, whether that is a trace argument)."""

    def __init__(self, arguments: list):
        self.of: dict[str, tuple] = {}
        self.add(arguments, argument=True)

    def add(self, proxies, argument: bool = False) -> None:
        for p in proxies:
            if isinstance(p, TensorProxy):
                for size in p._shape:
                    if isinstance(size, NumberProxy):
                        self.of.setdefault(size.name, (p, argument))


class _SubsymbolNumberOps:
    """name -> the first number op among the subsymbols (at any depth) of ``bsyms[:i]`` that
    computes it; indexed as far as asked (each bound symbol once)."""

    def __init__(self, bsyms: list):
        self.bsyms, self.indexed, self.found = bsyms, 0, {}

    def before(self, i: int) -> dict:
        while self.indexed < i:
            todo = list(reversed(self.bsyms[self.indexed].subsymbols))
            while todo:
                s = todo.pop()
                if is_number_op(s):
                    for o in s.flat_proxy_outs:
                        self.found.setdefault(o.name, s)
                else:
                    todo.extend(reversed(s.subsymbols))
            self.indexed += 1
        return self.found


def _lift(read, computed: dict, owners: _Owners, defined: set[str]):
    """(bound symbols binding ``read``'s sizes earlier, the read of the sizes left or None)."""
    ops: list = []
    tensor = read.flat_proxy_args[0]

    def read_of(owner):
        """A read of ``owner`` binding every size of it not bound yet (``name`` among them)."""
        output = tuple(size if isinstance(size, NumberProxy) and size.name not in defined else _value(size)
                       for size in owner._shape)
        ops.append(read.sym.bind(owner, output=output))
        defined.update(size.name for size in output if isinstance(size, NumberProxy))

    def resolve(name: str) -> bool:
        if name in defined:
            return True
        owner, is_argument = owners.of.get(name, (None, False))
        if owner is not None and is_argument:
            read_of(owner)
            return True
        op = computed.get(name)
        if op is not None and all(resolve(a.name) for a in op.flat_proxy_args):
            executable = _python_executor_form(op)
            if executable is not None:
                ops.append(executable)
                defined.update(o.name for o in op.flat_proxy_outs)
                return True
        if owner is not None and owner.name != tensor.name:
            read_of(owner)
            return True
        return False

    outs = read.flat_proxy_outs
    left = {o.name for o in outs if not resolve(o.name)}
    if not left:
        return ops, None
    if len(left) == len(outs):
        return ops, read
    output = tree_map(lambda o: o if not isinstance(o, Proxy) or o.name in left else _value(o), read.output)
    return ops, read.from_bsym(output=output)


def _value(size):
    return size.value if isinstance(size, NumberProxy) else size


def _python_executor_form(op):
    """``op`` (a number prim from a subsymbol) as the python executor runs it, or None."""
    from thunder.executors.pythonex import ex

    if op.sym.executor is ex:
        return op
    impl = ex.implmap.get(op.sym.id)
    if impl is None or impl.symbol is None or (impl.checker is not None and not impl.checker(*op.args, **op.kwargs)):
        return None
    return op.from_bsym(sym=impl.symbol, subsymbols=[])


def _is_shape_read(bsym) -> bool:
    return bsym.sym.name == "shape"


def hoist_number_ops(bsyms: list) -> tuple[list, int]:
    """(bound symbols, number moved): each number op and ``shape`` read right after the bound
    symbol defining the last of its arguments (one it reads that moves too counts as where that
    one goes)."""
    definer: dict[str, int] = {}  # name -> index of the bound symbol (not a moved number op) after which it exists
    after: dict[int, list] = {}
    anchored = [None] * len(bsyms)  # number op i -> the index it goes after, None: stays
    for i, b in enumerate(bsyms):
        anchor = None
        if is_number_op(b) or _is_shape_read(b):
            anchor = max((definer.get(a.name, -1) for a in b.flat_proxy_args), default=-1)
            if anchor >= i - 1:
                anchor = None  # where it is already (or reads something defined later: left alone)
        if anchor is None:
            where = i
        else:
            anchored[i] = anchor
            after.setdefault(anchor, []).append(b)
            where = anchor
        for o in b.flat_proxy_outs:
            definer.setdefault(o.name, where)
    moved = sum(a is not None for a in anchored)
    if not moved:
        return bsyms, 0
    result = list(after.get(-1, ()))
    for i, b in enumerate(bsyms):
        if anchored[i] is None:
            result.append(b)
            result.extend(after.get(i, ()))
    return result, moved


def without_number_outputs(bsyms: list) -> list:
    """Copies of a region's bound symbols whose (and whose subsymbols') number outputs are None:
    ``make_compiled`` names every output, and a ``shape`` read of a static size outputs an int."""
    return [_no_numbers(b, subsymbols=[_no_numbers(s) for s in b.subsymbols]) for b in bsyms]


def _no_numbers(bsym, subsymbols=None):
    changed = any(isinstance(o, Number) for o in bsym.flat_outs)
    if subsymbols is not None and any(a is not b for a, b in zip(subsymbols, bsym.subsymbols)):
        changed = True
    if not changed:
        return bsym
    kwargs = {"subsymbols": subsymbols} if subsymbols is not None else {}
    return bsym.from_bsym(output=tree_map(lambda o: None if isinstance(o, Number) else o, bsym.output), **kwargs)


def _fusion_pass(original):
    @functools.wraps(original)
    def fusion_pass(self, trace):
        if not using_symbolic_values():
            return original(self, trace)
        before = sizes_before_regions(trace)
        fused = original(self, before)
        if before is not trace:
            done = before.get_provenance().pss.rsplit("metatrace: ", 1)[-1]
            fused.set_provenance(TraceProvenance(f"{fused.get_provenance().pss} (metatrace first: {done})"))
        return fused

    return fusion_pass


def bound_symbols_to_compile(bsyms: list) -> list:
    """What torch.compile's region builder (``make_compiled``) is given of a region's bound
    symbols: under symbolic values, :func:`without_number_outputs` of them. A step of metatrace's
    one wrapper of ``make_compiled``, :mod:`metatrace.entry_cache`."""
    return without_number_outputs(bsyms) if using_symbolic_values() else bsyms


def _writes_in_place(bsym) -> bool:
    """Whether ``bsym`` is an in-place write (``prims.copy_``), which a torch.compile region does
    not take: inductor returns an input for ``zeros + s`` (its no-op removal, in plain
    ``torch.compile`` too), so a region writing that sum into a fresh buffer returned the caller's
    ``s`` itself; a write through a transposed view into one of two equal buffers read back zeros.
    Run by the torch executor between regions, the write lands in the buffer the trace names."""
    return bsym.sym.id == prims.PrimIDs.COPY_


def _can_fuse(original):
    @functools.wraps(original)
    def can_fuse(self, bsym):
        if isinstance(self, FusionExecutor) and using_symbolic_values() and (_is_shape_read(bsym) or not any(isinstance(p, TensorProxy) for p in bsym.flat_proxy_outs)):
            return False  # a number op or a shape read: the python executor runs it, outside any region
        if isinstance(self, TorchCompileExecutor) and _writes_in_place(bsym):
            return False  # (see _writes_in_place)
        return original(self, bsym)

    return can_fuse


def patches() -> list[Patch]:
    """The fusion pass of every fusion executor class thunder registered (torch.compile's three
    executors share one class; nvFuser's where installed), and ``can_fuse`` wherever one of those
    classes or their base defines it."""
    from thunder.extend import get_all_executors

    classes = list(dict.fromkeys(type(ex) for ex in get_all_executors() if isinstance(ex, FusionExecutor)))
    rows = [attribute(cls, "fusion_pass", _fusion_pass, "size arithmetic stays out of regions", wrap=True)
            for cls in classes if "fusion_pass" in vars(cls)]
    # (thunder defines can_fuse on Executor, the base of operator executors too: the wrapper
    # changes nothing for those, which no pass asks)
    owners = dict.fromkeys(next(c for c in cls.__mro__ if "can_fuse" in vars(c)) for cls in classes)
    rows += [attribute(cls, "can_fuse", _can_fuse, "number ops are no region's", wrap=True) for cls in owners]
    return rows
