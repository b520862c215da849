"""Which tensor proxies of a trace view one storage (eager's views), for the in-place rule of
``metatrace.grad.inplace_writes``.

Lifetime: one :class:`ViewFamilies` per ``TraceCtx`` (weakly keyed), filled while thunder
interprets the function, when every tensor keeps one proxy until thunder's functionalization;
it dies with the trace. Proxies are held by identity (``==`` on a proxy records a comparison).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from metatrace.state.weak_tables import WeakTable


@dataclass(eq=False)
class ViewFamilies:
    # id(view proxy) -> the root proxy it views (a root is absent: it is its own root)
    root_of: dict = field(default_factory=dict)
    # id(root proxy) -> the views of it seen so far (the root itself not included)
    views_of: dict = field(default_factory=dict)
    # the proxies an in-place write made require grad (an input among them gets its flag back
    # before the prologue checks the caller's tensor by it: metas.proxy_edits.restore_input_flags)
    raised: list = field(default_factory=list)

    def add_view(self, base, view) -> None:
        root = self.root_of.get(id(base), base)
        if view is root or id(view) in self.root_of:
            return
        self.root_of[id(view)] = root
        self.views_of.setdefault(id(root), []).append(view)

    def family(self, t) -> list:
        """``t``'s root and every view of it seen so far (``t`` among them)."""
        root = self.root_of.get(id(t), t)
        return [root, *self.views_of.get(id(root), ())]


VIEW_FAMILIES = WeakTable(ViewFamilies)  # TraceCtx -> ViewFamilies

