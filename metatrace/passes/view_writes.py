"""Gradients through in-place writes into views: the written view's base and its other views
read the write, in the autograd graph too.

thunder keeps one proxy per tensor through an in-place write and, in ``insert_alias_updates``,
only swaps the written tensor for the write's output in later uses; the write's base and the
base's other views keep proxies from before it. Their values are right at run time (they share
storage), but the grad transform sees no path from the written value to them
(``update_aliases``' rule passes each gradient to its own tensor). So in

    b = torch.zeros(4, 3); d = b.view(3, 4); d.copy_(s.reshape(3, 4)); return b

``s`` got no gradient through ``b`` (stock thunder too). Eager regenerates them: ``b`` gets a
``CopySlices`` and every view of ``b`` a new ``grad_fn`` from it.

This pass, run on the computation trace just before thunder's ``insert_alias_updates``, does
the same with ordinary ops, where it matters for gradients (the write's output requires grad):

1. a view symbol (``metatrace.grad.inplace_writes.view_outputs``) notes its output's root tensor and
   the view ops from the root to it (its chain);
2. after an in-place write into a tensor of a family (a root and the views of it), the root's new
   value is the old one with the written view's positions replaced: the chain replayed on an index
   tensor (0, 1, ... in the root's shape) gives those positions, ``scatter`` puts the
   written values there;
3. every other tensor of the family used later is its chain replayed on the root's new value;
4. later bound symbols (the return among them) use the new proxies.

A chain the index tensor cannot replay (a view that changes the dtype: ``real``, ``imag``,
``view_as_real``, ``view(dtype)``) raises a MetatraceError naming the op where a gradient would
be lost. The ops are built in a compile step whose decisions on symbolic sizes (none is expected:
the shapes are the trace's own) go to the guard program the prologue reserved for the grad
transform (``guards.grad_program``), which checks them with the transform's own.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import thunder
import thunder.core.prims as prims
import thunder.torch as ltorch
from thunder.core import dtypes
from thunder.core.proxies import TensorProxy, variableify
from thunder.core.pytree import tree_iter
from thunder.core.trace import TraceProvenance, from_trace, tracectx
from thunder.core.update_aliases import _is_inplace_op

from metatrace.errors import MetatraceError
from metatrace.grad.inplace_writes import view_outputs
from metatrace.guards.collect import GuardCollector
from metatrace.guards.grad_program import pending_grad_program
from metatrace.patching import Patch, attribute
from metatrace.state.compile_context import compile_step

# View symbols whose output has another dtype than their input: an index tensor cannot stand in.
_DTYPE_CHANGING = {"torch.real", "torch.imag", "torch.view_as_real", "Tensor.values", "Tensor.indices"}


@dataclass(frozen=True)
class _Chain:
    root: TensorProxy
    steps: tuple  # (bound symbol, index of the output among its flat tensor outputs), root first


def regenerate_views(trace):
    """The trace with the bases and views of in-place-written tensors recomputed after each write
    whose output requires grad; ``trace`` itself when there is none."""
    bsyms = trace.bound_symbols
    if not any(_is_inplace_op(b) for b in bsyms):
        return trace
    families = _Families(_last_uses(bsyms), {p.name for p in _flat_tensors((trace.args, trace.kwargs))})
    new_trace = from_trace(trace)
    out, changed = [], False
    pending = pending_grad_program()
    collector = pending.collector if pending is not None else GuardCollector()
    with tracectx(new_trace), compile_step(collector, functional=True):
        for i, bsym in enumerate(bsyms):
            bsym = bsym.from_bsym_swap_proxies(families.swap, skip_output=True) if families.swap else bsym
            out.append(bsym)
            if views := view_outputs(bsym.sym.id, bsym.args, bsym.output):
                families.note_view(bsym, views)
            elif _is_inplace_op(bsym) and (written := _written(bsym)) is not None and written[1].requires_grad:
                new_trace.push_scope([])
                families.after_write(*written, i)
                emitted = new_trace.pop_scope()
                out.extend(emitted)
                changed = changed or bool(emitted)
    if pending is None and collector.guards:
        raise MetatraceError(
            f"recomputing the views of an in-place write took a decision on a symbolic size: {collector.guards[0]}")
    if not changed:
        return trace
    new_trace.bound_symbols = out
    new_trace.set_provenance(TraceProvenance("Views of in-place writes regenerated (metatrace)"))
    return new_trace


def _last_uses(bsyms) -> dict[str, int]:
    last: dict[str, int] = {}
    for i, b in enumerate(bsyms):
        for p in b.flat_proxy_args:
            last[p.name] = i
    return last


def _written(bsym):
    """(destination, the write's output) of an in-place bound symbol, or None."""
    copy = bsym if bsym.sym.id is prims.PrimIDs.COPY_ else (bsym.subsymbols[-1] if bsym.subsymbols else None)
    if copy is None or copy.sym.id is not prims.PrimIDs.COPY_:
        return None
    outs = [o for o in bsym.flat_proxy_outs if isinstance(o, TensorProxy)]
    destination = copy.args[1] if bsym is copy else bsym.flat_proxy_args[0]
    if len(outs) != 1 or not isinstance(destination, TensorProxy):
        return None
    return destination, outs[0]


class _Families:
    """The roots and views of the trace as the pass has rewritten it so far."""

    def __init__(self, last_use: dict[str, int], inputs: set[str]):
        self.last_use = last_use
        self.inputs = inputs
        self.chains: dict[str, _Chain] = {}  # view name -> its chain from its root
        self.views: dict[str, list] = {}  # root name -> its views
        self.origin: dict[str, str] = {}  # a proxy made here -> the name of the one it stands for
        self.swap: dict = {}  # for later bound symbols: Variable -> proxy

    def note_view(self, bsym, views: list) -> None:
        base = bsym.args[0]
        chain = self.chains.get(base.name)
        root, steps = (chain.root, chain.steps) if chain is not None else (base, ())
        outputs = _flat_tensors(bsym.output)
        for o in views:
            if o.name != base.name and o.name not in self.chains:
                self.chains[o.name] = _Chain(root, (*steps, (bsym, next(k for k, x in enumerate(outputs) if x is o))))
                self.views.setdefault(root.name, []).append(o)

    def _used_after(self, p, i: int) -> bool:
        return self.last_use.get(self.origin.get(p.name, p.name), -1) > i

    def after_write(self, destination: TensorProxy, value: TensorProxy, i: int) -> None:
        """Steps 2-4 for a write of ``value`` into ``destination`` (bound symbol ``i``)."""
        chain = self.chains.get(destination.name)
        root = chain.root if chain is not None else destination
        others = [v for v in self.views.get(root.name, ()) if v is not destination and self._used_after(v, i)]
        if chain is None and not others:
            return  # a write into a tensor without views: thunder's swap suffices
        if chain is None:
            new_root = value
        else:
            new_root = _scatter(root, chain, value)
            if root.name in self.inputs:
                # the caller's tensor is written: later writes into the family go to its storage
                new_root = prims.copy_(new_root, root, grad_enabled=True)
            self._replace(root, new_root)
        regenerated = []
        for v in others:
            new_v = _replay(new_root, self.chains[v.name])
            self.chains[new_v.name] = _Chain(new_root, self.chains[v.name].steps)
            self._replace(v, new_v)
            regenerated.append(new_v)
        if chain is not None:
            self.chains[value.name] = _Chain(new_root, chain.steps)
            regenerated.append(value)
        self.views[new_root.name] = regenerated

    def _replace(self, old: TensorProxy, new: TensorProxy) -> None:
        self.origin[new.name] = self.origin.get(old.name, old.name)
        for k, v in list(self.swap.items()):
            if v is old:  # a proxy swapped for ``old`` earlier stands for ``new`` now
                self.swap[k] = new
        self.swap[variableify(old)] = new


def _replay(root: TensorProxy, chain: _Chain) -> TensorProxy:
    """``chain``'s view ops applied to ``root`` in place of the chain's own root."""
    x = root
    for bsym, k in chain.steps:
        if bsym.sym.id in _DTYPE_CHANGING or any(isinstance(a, dtypes.dtype) for a in bsym.flat_args):
            raise MetatraceError(
                f"an in-place write through a {bsym.sym.name} view whose base is used after it, under grad: "
                "metatrace cannot replay that view to carry the gradient (it changes the dtype)")
        result = bsym.sym(x, *bsym.args[1:], **bsym.kwargs)
        x = _flat_tensors(result)[k]
    return x


def _flat_tensors(result) -> list:
    return [o for o in tree_iter(result) if isinstance(o, TensorProxy)]


def _scatter(root: TensorProxy, chain: _Chain, value: TensorProxy) -> TensorProxy:
    """``root`` with the positions ``chain`` views replaced by ``value``."""
    # 0, 1, ... in root's shape, by a running sum of ones: ``arange(numel)`` decided ``numel != 0``
    # (a guard) and for 0 thunder's iota gives a 0-d tensor, which the reshape refused
    ones = ltorch.full(root.shape, 1, device=root.device, dtype=dtypes.int64)
    positions = ltorch.reshape(ltorch.cumsum(ltorch.reshape(ones, (-1,)), 0) - 1, root.shape)
    written = ltorch.reshape(_replay(positions, chain), (-1,))
    # (scatter, not index_copy: thunder's index_copy rule takes len() of the index, pinning its size)
    flat = ltorch.scatter(ltorch.reshape(root, (-1,)), 0, written, ltorch.reshape(value, (-1,)))
    return ltorch.reshape(flat, root.shape)


def _insert_alias_updates(original):
    @functools.wraps(original)
    def insert_alias_updates(computation_trace, alias_tensor_indices):
        return original(regenerate_views(computation_trace), alias_tensor_indices)

    return insert_alias_updates


def patches() -> list[Patch]:
    return [attribute(thunder, "insert_alias_updates", _insert_alias_updates,
                      "the bases and views of an in-place write read it, in the autograd graph too", wrap=True)]
