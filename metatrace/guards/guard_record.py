"""The guard record and the leaf tests shared by :mod:`metatrace.guards.collect` (collecting),
:mod:`metatrace.guards.projection`, :mod:`metatrace.guards.program_builder` and
:mod:`metatrace.guards.simplify`: a leaf module, so that none imports another to know what a guard is."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from thunder.core.proxies import NumberProxy, Proxy

from metatrace.metas.concretizations import Reason
from metatrace.metas.relations import Relation


@dataclass(frozen=True)
class Guard:
    """``lhs <op> rhs`` must hold for a cache entry to be reused. ``op``: a :class:`Relation`
    (given its name, ``"lt"``, it becomes the member); ``why``: what concretized it (its kind
    decides how the guard is treated); ``where``: the thunder (or user) source line that did, as
    ``file:line in function``."""

    op: Relation
    lhs: Any
    rhs: Any
    why: Reason
    where: str = ""

    def __post_init__(self):
        if type(self.op) is not Relation:
            object.__setattr__(self, "op", Relation(self.op))

    def key(self) -> tuple:
        return (self.op, _key(self.lhs), _key(self.rhs))


def _key(x) -> Any:
    return ("proxy", x.name) if isinstance(x, Proxy) else ("value", type(x).__name__, x)


def is_leaf(p: NumberProxy) -> bool:
    """An input number or an input tensor's size: the prologue can unpack it."""
    return p.history is not None


def is_static_value(p: NumberProxy) -> bool:
    """An intermediate thunder marked static: computed from static inputs only (thunder's
    ``resolve_constraints``), whose values its prologue checks, so the value is a constant."""
    return p.is_static_constrained() and not is_leaf(p) and p.value is not None
