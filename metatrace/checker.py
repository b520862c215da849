"""A strict trace checker: every symbol used has a definition.

thunder's ``thunder.dev_utils.check_trace`` checks that every proxy argument of a top-level
bound symbol was produced earlier. This checker runs it, and additionally requires, through
subsymbols at every depth:

- every NumberProxy and TensorProxy argument has a definition (a fusion region's subsymbols
  included: a tensor its code reads that nothing defines fails at run time);
- every size symbol inside a TensorProxy's shape (arguments and outputs) has a definition.

A definition is a trace input (with the size symbols of input tensors), an output of an unpack
bound symbol (which binds inputs; ``get_grad`` in a joint forward-backward trace is one: it reads
a cotangent from outside), or an output of an earlier bound symbol or subsymbol.
"""

from __future__ import annotations

from metatrace.errors import MetatraceError

from collections.abc import Iterable
from dataclasses import dataclass

from thunder.core.proxies import NumberProxy, Proxy, TensorProxy
from thunder.core.pytree import tree_iter
from thunder.core.trace import TraceCtx


@dataclass(frozen=True)
class Orphan:
    symbol: str  # the undefined proxy's name
    where: str  # the bound symbol that uses it (first line of its printed form)
    role: str  # "argument", "tensor argument" or "size of <tensor>"

    def __str__(self) -> str:
        return f"{self.symbol} ({self.role}) has no definition before: {self.where}"


class TraceCheckError(MetatraceError, AssertionError):
    def __init__(self, orphans: list[Orphan]):
        self.orphans = orphans
        shown = "\n  ".join(str(o) for o in orphans[:20])
        more = f"\n  ... and {len(orphans) - 20} more" if len(orphans) > 20 else ""
        super().__init__(f"{len(orphans)} undefined symbol use(s):\n  {shown}{more}")


def _sizes(t: TensorProxy) -> list[NumberProxy]:
    return [s for s in t._shape if isinstance(s, NumberProxy)]


def _proxies(x) -> Iterable[Proxy]:
    return (p for p in tree_iter(x) if isinstance(p, Proxy))


def _define(defined: set[str], p: Proxy) -> None:
    defined.add(p.name)
    if isinstance(p, TensorProxy):
        defined.update(s.name for s in _sizes(p))


def _where(bsym) -> str:
    try:
        lines = bsym.python(indent=0, print_depth=1)
        return (lines[0] if lines else str(bsym.sym.name)).strip()
    except Exception:  # printing must never hide the finding itself
        return f"{bsym.sym.name}(...)"


def find_orphans(trace) -> list[Orphan]:
    """Every use of an undefined NumberProxy or size symbol in ``trace``, in trace order."""
    defined: set[str] = set()
    for p in _proxies((trace.args, trace.kwargs)):
        _define(defined, p)
    orphans: list[Orphan] = []
    _walk(trace.bound_symbols, defined, orphans)
    return orphans


def undefined_in(bsyms, defined: set[str]) -> list[str]:
    """Numbers and sizes ``bsyms`` (a fusion region's, say) use undefined when ``defined`` is
    defined before them, by the checker's rules; ``defined`` is left as it was."""
    orphans: list[Orphan] = []
    _walk(bsyms, set(defined), orphans)
    return [o.symbol for o in orphans if o.role != "tensor argument"]


def _walk(bsyms, defined: set[str], orphans: list[Orphan]) -> None:
    for bsym in bsyms:
        if bsym.sym.name.startswith("unpack") or bsym.sym.name in ("shape", "get_grad"):
            # Unpacking binds inputs: what it outputs, sizes included, is defined by it. In the
            # grad transform's joint trace get_grad is such an input: it reads the cotangent
            # the backward will receive (and unpack) from outside.
            for p in _proxies(bsym.output):
                _define(defined, p)
            continue
        where = None
        for p in _proxies((bsym.args, bsym.kwargs)):
            if isinstance(p, NumberProxy) and p.name not in defined:
                orphans.append(Orphan(p.name, where := where or _where(bsym), "argument"))
            elif isinstance(p, TensorProxy):
                if p.name not in defined:
                    orphans.append(Orphan(p.name, where := where or _where(bsym), "tensor argument"))
                for s in _sizes(p):
                    if s.name not in defined:
                        orphans.append(Orphan(s.name, where := where or _where(bsym), f"size of argument {p.name}"))
        _walk(bsym.subsymbols, defined, orphans)
        outs = list(_proxies(bsym.output))
        defined.update(p.name for p in outs)
        for p in outs:
            if isinstance(p, TensorProxy):
                for s in _sizes(p):
                    if s.name not in defined:
                        orphans.append(Orphan(s.name, where := where or _where(bsym), f"size of output {p.name}"))
                        defined.add(s.name)  # report each orphan once


def check_trace(trace, *, thunder_checks: bool = True) -> None:
    """Raises TraceCheckError listing every undefined symbol use (and thunder's own checks' errors)."""
    if not isinstance(trace, TraceCtx):
        raise TypeError(f"check_trace expects a thunder trace (a TraceCtx, e.g. thunder.last_traces(jfn)[-1]), "
                        f"got {type(trace).__name__}: {trace!r:.80}")
    if thunder_checks:
        _thunder_check_trace(trace)
    orphans = find_orphans(trace)
    if orphans:
        raise TraceCheckError(orphans)


def _thunder_check_trace(trace) -> None:
    """thunder's own check, also outside a compile: it re-runs every bound symbol, and factory
    functions (``ltorch.ones``) read the jit's cache info, which only a compile sets."""
    import thunder
    from thunder.dev_utils.check_trace import check_trace as thunder_check_trace

    if thunder._cache_info_ctx.get(None) is not None:
        thunder_check_trace(trace)
        return
    import torch

    # what thunder's populate_cache_info records first, read by factory functions
    token = thunder._cache_info_ctx.set(
        {"default_dtype": torch.get_default_dtype(), "default_device": torch.get_default_device()}
    )
    try:
        thunder_check_trace(trace)
    finally:
        thunder._cache_info_ctx.reset(token)
