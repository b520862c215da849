"""Carries thunder's input renames into tensor shapes.

After interpretation thunder renames input proxies (the interpreter's ``i3`` becomes the
argument ``i``) with ``_apply_trace_proxy_rename``, which swaps proxies in bound symbols' arguments
and outputs but not the size symbols inside an output tensor's shape. Once recorded arithmetic
folds ``stop - 0`` to ``stop``, a slice's output size *is* the input symbol, so the first
computation trace would show the stale name with no definition. The wrapper below renames size
symbols too; tensor proxies are shared between traces, so this is done in place, once.
Under symbolic values a TensorProxy's ``numel`` is a closure over the shape it was built with,
so it is replaced by one that reads the renamed shape (else the grad transform's
``a.numel`` brought the stale names back, into backward traces). The renamed copy of a tensor,
made when the interpreter stored it in a variable, takes the tensor's ``requires_grad`` as it is
at the end (an in-place write may have changed it since).
"""

from __future__ import annotations

import functools

import thunder.core.jit_ext as jit_ext
from thunder.core.proxies import NumberProxy, Proxy, TensorProxy

from metatrace.metas.proxy_edits import set_requires_grad, set_shape
from metatrace.patching import Patch, attribute

def proxy_outputs(x):
    """The proxies in a bound symbol's output, without pytree (subsymbols' flat outputs are not
    computed yet, and flattening them all costs more than the passes that walk them)."""
    if isinstance(x, Proxy):
        yield x
    elif isinstance(x, (tuple, list)):
        for y in x:
            yield from proxy_outputs(y)
    elif isinstance(x, dict):
        for y in x.values():
            yield from proxy_outputs(y)


def _rename_sizes(bsyms, renames: dict[str, object], seen: set[int]) -> None:
    for bsym in bsyms:
        for p in proxy_outputs(bsym.output):
            if isinstance(p, TensorProxy) and id(p) not in seen:
                seen.add(id(p))
                shape = p._shape
                if any(isinstance(s, NumberProxy) and s.name in renames for s in shape):
                    set_shape(p, (renames.get(s.name, s) if isinstance(s, NumberProxy) else s for s in shape))
        if bsym.subsymbols:
            _rename_sizes(bsym.subsymbols, renames, seen)


def rename_sizes(bsyms, renames: dict[str, object]) -> None:
    """Size symbols named in ``renames`` replaced, in place, in the shapes of ``bsyms``' outputs."""
    _rename_sizes(bsyms, renames, set())


# thunder prints an unused output of a bound symbol as ``_`` (``(_, q, _) = shape(t5)``), so a
# proxy renamed after a user's ``_`` variable (``_, q, _ = x.shape``) is overwritten by the next
# such line of the generated program before its use: ``view(t, (_, q, -1))`` then read another
# size (a wrong shape, or silently wrong data where it fits). Such renames are not applied.
_PRINTER_NAMES = frozenset({"_"})


def _apply_trace_proxy_rename(original):
    @functools.wraps(original)
    def apply_trace_proxy_rename(trace, rename_proxy_swapmap=None, name=None):
        swapmap = rename_proxy_swapmap if rename_proxy_swapmap is not None else jit_ext.get_jit_ctx()._proxy_swapmap
        if any(getattr(new, "name", None) in _PRINTER_NAMES for new in swapmap.values()):
            swapmap = {v: new for v, new in swapmap.items() if getattr(new, "name", None) not in _PRINTER_NAMES}
        new_trace = original(trace, swapmap, name)
        # Only renamed numbers can sit in a shape; most functions rename tensors only.
        renames = {v.proxy.name: new for v, new in swapmap.items() if isinstance(v.proxy, NumberProxy)}
        # A renamed input tensor may come with other size symbols than the interpreter gave it
        # (thunder's input proxies): what was computed from the old ones follows the new ones.
        for v, new in swapmap.items():
            if isinstance(v.proxy, TensorProxy) and isinstance(new, TensorProxy):
                # The renamed copy was made when the tensor was stored in a variable; an in-place
                # write after that may have made the tensor require grad (metatrace.grad.inplace_writes).
                if new._requires_grad != v.proxy._requires_grad:
                    set_requires_grad(new, v.proxy._requires_grad)
                for was, now in zip(v.proxy._shape, new._shape):
                    if isinstance(was, NumberProxy) and isinstance(now, NumberProxy) and was.name != now.name:
                        renames.setdefault(was.name, now)
        if renames:
            _rename_sizes(new_trace.bound_symbols, renames, set())
        return new_trace

    return apply_trace_proxy_rename


def patches() -> list[Patch]:
    return [attribute(jit_ext, "_apply_trace_proxy_rename", _apply_trace_proxy_rename,
                      "renaming proxies also renames the size symbols inside tensor shapes", wrap=True)]
