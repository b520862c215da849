"""A tensor saved for the backward keeps the value it had when the forward computed it.

thunder's grad transform saves forward tensors by reference, and its forward still writes
in-place operators into their buffers (``copy_(result, dst)``), so a saved tensor that the
forward overwrites later reaches the backward with the new values: ``x.clone().sqrt_()`` saved
the clone, which then held ``sqrt(x)``, and the gradient was ``1 / (2 * sqrt(sqrt(x)))``;
``x.clone().mul_(x)`` and ``tanh_`` were wrong the same way (stock thunder too).

Right after the grad transform (a step of its one wrapper, ``metatrace.passes.grad_transform``),
every forward tensor the backward reads that may share storage with a later ``copy_``'s
destination is cloned right where it is defined, and the backward reads the clone: before the
executor passes, so a fusion region that both defines and overwrites the tensor (the whole forward
under ``torch_compile_ex``) clones it in between. After the split (step 4 of its one wrapper,
``metatrace.passes.size_producers``) the same rule runs over the forward's saved tensors, for
what the split itself moves. Storage is shared, conservatively, along view-creating operators, thunder's
``update_aliases`` and ``copy_`` itself (union-find over proxy names, one pass over the forward:
linear in its bound symbols). Each name in thunder's traces has one value (the in-place update
gives the updated tensor a new name), so the value at the definition is the one the backward's
formulas mean. Where eager raises instead ("a variable needed for gradient computation has
been modified by an inplace operation"), the result is the gradient eager would compute without
the in-place write.
"""

from __future__ import annotations

from thunder.core import prims
from thunder.core.proxies import TensorProxy, variableify
from thunder.core.symbol import BoundSymbolTag
from thunder.core.trace import TraceProvenance, from_trace, tracectx
from thunder.core.update_aliases import _is_view_creation_op
from thunder.executors import torchex
import thunder.torch as ltorch


class _Aliases:
    """Union-find over proxy names."""

    def __init__(self):
        self.parent: dict[str, str] = {}

    def find(self, name: str) -> str:
        parent = self.parent
        root = name
        while parent.get(root, root) != root:
            root = parent[root]
        while name != root:  # path compression
            parent[name], name = root, parent.get(name, name)
        return root

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[ra] = rb


def _tensor_names(xs) -> list[str]:
    return [p.name for p in xs if isinstance(p, TensorProxy)]


def _walk(bsym):
    """A bound symbol and its subsymbols, depth first (fusion regions and composites)."""
    yield bsym
    for sub in bsym.subsymbols:
        yield from _walk(sub)


def _is_copy(bsym) -> bool:
    return bsym.sym.id in (prims.PrimIDs.COPY_, "copy_") or bsym.sym.name == "copy_"


def _record_aliases(bsym, aliases: _Aliases, written: list[str]) -> None:
    """Unions what ``bsym`` may alias; appends the destinations it writes to ``written``."""
    for b in _walk(bsym):
        if _is_copy(b):
            dst = b.args[1] if len(b.args) > 1 else b.kwargs.get("copy_to")
            if isinstance(dst, TensorProxy):
                written.append(dst.name)
                for out in _tensor_names(b.flat_outs):
                    aliases.union(out, dst.name)
        elif b.sym.name == "update_aliases" or _is_view_creation_op(b):
            names = _tensor_names(b.flat_args) + _tensor_names(b.flat_outs)
            for other in names[1:]:
                aliases.union(names[0], other)


def _write_positions(indexed_bsyms):
    """(aliases, position of each tensor's definition, position of the last write into each alias
    class) over ``(position, bound symbol)`` pairs; one walk."""
    aliases = _Aliases()
    defined_at: dict[str, int] = {}
    written_after: list[tuple[int, str]] = []  # (position, destination)
    for i, bsym in indexed_bsyms:
        written: list[str] = []
        _record_aliases(bsym, aliases, written)
        written_after.extend((i, name) for name in written)
        for name in _tensor_names(bsym.flat_outs):
            defined_at.setdefault(name, i)
    last_write: dict[str, int] = {}
    for i, name in written_after:
        last_write[aliases.find(name)] = i
    return aliases, defined_at, last_write


def _overwritten(tensors, aliases, defined_at, last_write) -> list:
    """The tensors among ``tensors`` that a write after their definition may overwrite."""
    if not last_write:
        return []
    return [t for t in tensors
            if isinstance(t, TensorProxy) and last_write.get(aliases.find(t.name), -1) > defined_at.get(t.name, -1)]


def clone_overwritten_saved(forward):
    """``forward`` (a split forward trace) with each saved tensor that a later ``copy_`` may
    overwrite cloned at its definition and the clone saved; ``forward`` itself when none is."""
    *body, ret = forward.bound_symbols
    if ret.sym.id != prims.PrimIDs.RETURN or len(ret.args) < 2:
        return forward
    saved_tensors, saved_other = ret.args[1]
    if not saved_tensors:
        return forward
    aliases, defined_at, last_write = _write_positions(enumerate(body))
    overwritten = _overwritten(saved_tensors, aliases, defined_at, last_write)
    if not overwritten:
        return forward
    return _with_clones(forward, body, ret, saved_tensors, saved_other, overwritten, defined_at)


def _with_clones(forward, body, ret, saved_tensors, saved_other, overwritten, defined_at):
    by_position: dict[int, list[TensorProxy]] = {}
    for t in overwritten:
        by_position.setdefault(defined_at.get(t.name, -1), []).append(t)
    clones: dict[str, TensorProxy] = {}
    new = from_trace(forward)
    with tracectx(new):
        for t in by_position.get(-1, ()):  # trace arguments: cloned first
            clones[t.name] = torchex.clone(t)
        for i, bsym in enumerate(body):
            new.bound_symbols.append(bsym)
            for t in by_position.get(i, ()):
                clones[t.name] = torchex.clone(t)
    saved = tuple(clones.get(t.name, t) if isinstance(t, TensorProxy) else t for t in saved_tensors)
    new.bound_symbols.append(ret.from_bsym(args=(ret.args[0], (saved, saved_other))))
    new.set_provenance(TraceProvenance("metatrace: saved tensors a later in-place write overwrites are cloned"))
    return new


def clone_overwritten_backward_reads(joint):
    """``joint`` (the grad transform's joint trace) with each forward tensor a backward bound
    symbol reads, that a later forward ``copy_`` may overwrite, cloned at its definition and the
    clone read instead; ``joint`` itself when none is. Linear in its bound symbols."""
    forward_part = [(i, b) for i, b in enumerate(joint.bound_symbols) if BoundSymbolTag.BACKWARD not in b.tags]
    read = {p.name: p for b in joint.bound_symbols if BoundSymbolTag.BACKWARD in b.tags
            for p in b.flat_proxy_args if isinstance(p, TensorProxy)}
    aliases, defined_at, last_write = _write_positions(forward_part)
    overwritten = {t.name: t for t in _overwritten(read.values(), aliases, defined_at, last_write)}
    if not overwritten:
        return joint
    by_position: dict[int, list[TensorProxy]] = {}
    for name, t in overwritten.items():
        by_position.setdefault(defined_at.get(name, -1), []).append(t)
    new = from_trace(joint)
    clones: dict = {}
    with tracectx(new):
        for t in by_position.get(-1, ()):  # trace arguments: cloned first
            clones[variableify(t)] = ltorch.clone(t)
        for i, bsym in enumerate(joint.bound_symbols):
            if clones and BoundSymbolTag.BACKWARD in bsym.tags:
                bsym = bsym.from_bsym_swap_proxies(clones)
            new.bound_symbols.append(bsym)
            for t in by_position.get(i, ()):
                clones[variableify(t)] = ltorch.clone(t)
    new.set_provenance(TraceProvenance("metatrace: forward tensors the backward reads that a later in-place write overwrites are cloned"))
    return new
