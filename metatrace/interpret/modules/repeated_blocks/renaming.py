"""What the first block of a list recorded, renamed for a sibling (``repeated_blocks``): every
proxy the first block made gets a fresh one, every provenance record rooted at the first block is
rebuilt on the sibling's, the first block's arguments become the sibling's.

A proxy the first block made is renamed: a tensor or number it read from its own state (a
parameter, ``self.eps``) gets the sibling's provenance, so the prologue unpacks the sibling's;
an intermediate gets a fresh name (and a tensor its sizes renamed). A proxy that existed before
the first block ran (a size of the input, a number read from the model's config), or one it read
first through a path outside itself (the same value for every sibling), is kept.
"""

from __future__ import annotations

from typing import Any

from thunder.core.interpreter import ProvenanceRecord
from thunder.core.jit_ext import _infer_name_postfix_from_provenance
from thunder.core.proxies import CollectionProxy, Proxy, TensorProxy

from metatrace.metas import proxy_edits


class NotRenamable(Exception):
    """The first block recorded something the renaming does not know how to copy."""


class Renaming:
    def __init__(self, trace, names_before: set, root: ProvenanceRecord, sibling_root: ProvenanceRecord,
                 arguments: list[tuple[Proxy, Proxy]]):
        self.trace = trace
        self.names_before = names_before
        self.records: dict[int, ProvenanceRecord] = {id(root): sibling_root}
        # the first block's proxy name -> the sibling's proxy
        self.proxies: dict[str, Proxy] = {old.name: new for old, new in arguments}
        self._bsyms: dict[int, Any] = {}

    def record(self, pr: Any) -> Any:
        """``pr`` with the first block's record replaced by the sibling's wherever it occurs."""
        if not isinstance(pr, ProvenanceRecord):
            return pr
        done = self.records.get(id(pr))
        if done is not None:
            return done
        inputs = [self.record(i) for i in pr.inputs]
        if all(a is b for a, b in zip(inputs, pr.inputs)):
            new = pr
        else:
            new = ProvenanceRecord(pr.inst, inputs, pr.output_idx, pr.output_key, pr.value)
            proxy_edits.clear_record_flags(new, new.ext_flag)
            proxy_edits.add_record_flag(new, pr.ext_flag)
        self.records[id(pr)] = new
        return new

    def proxy(self, p: Proxy) -> Proxy:
        new = self.proxies.get(p.name)
        if new is not None:
            return new
        if p.name in self.names_before:
            return p
        if isinstance(p, CollectionProxy):
            raise NotRenamable(f"a collection proxy {p.name} made inside the block")
        history = getattr(p, "history", None)
        new_history = self.record(history)
        if isinstance(history, ProvenanceRecord) and new_history is history:
            self.proxies[p.name] = p  # read through a path outside the block: the same for the sibling
            return p
        shape = tuple(self.value(s) for s in p._shape) if isinstance(p, TensorProxy) else None
        new = proxy_edits.renamed_copy(p, self._name(p, new_history), new_history, shape)
        self.proxies[p.name] = new
        return new

    def new_name(self, name: str) -> str:
        """The sibling's name for the first block's proxy ``name`` (once that proxy was renamed)."""
        new = self.proxies.get(name)
        return name if new is None else new.name

    def _name(self, p: Proxy, history: Any) -> str:
        if isinstance(p, TensorProxy) and isinstance(history, ProvenanceRecord):
            postfix = _infer_name_postfix_from_provenance(history)
            if postfix and not self.trace.has_name(f"t{postfix}"):
                name = f"t{postfix}"
                self.trace.add_name(name)
                return name
        return self.trace.make_name(prefix=p.prefix)

    def value(self, x: Any) -> Any:
        """``x`` (an argument, an output, a guard's side) with its proxies renamed."""
        if isinstance(x, Proxy):
            return self.proxy(x)
        kind = type(x)
        if kind is tuple or kind is list:
            return kind(self.value(i) for i in x)
        if kind is dict:
            return {k: self.value(v) for k, v in x.items()}
        if kind is slice:
            return slice(self.value(x.start), self.value(x.stop), self.value(x.step))
        return x

    def bsym(self, bsym) -> Any:
        """``bsym`` (with its subsymbols) over the sibling's proxies; once per bound symbol."""
        done = self._bsyms.get(id(bsym))
        if done is not None:
            return done
        todo = [bsym]
        while todo:
            b = todo.pop()
            for p in (*b.flat_proxy_args, *b.flat_proxy_outs):
                self.proxy(p)
            todo.extend(b.subsymbols)
        new = self._copy(bsym)
        self._bsyms[id(bsym)] = new
        return new

    def _copy(self, b):
        # (not thunder's ``from_bsym_swap_proxies``: it follows chains, and a sibling's argument is
        # often the first block's output, which the map also renames)
        return b.from_bsym(args=self.value(b.args), kwargs=self.value(b.kwargs), output=self.value(b.output),
                           subsymbols=[self._copy(s) for s in b.subsymbols])
