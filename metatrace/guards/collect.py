"""Collecting guards: every concretization of a symbolic number while tracing becomes a guard.

The guards become prologue checks in :mod:`metatrace.guards.projection` (onto the inputs) and
:mod:`metatrace.guards.program_builder` (the prologue's guard program); this module collects them and holds
the errors and exact values they are made of.

While thunder interprets a function under ``cache="symbolic values"`` a :class:`GuardCollector`
receives, from the runtime (rewritten metas) and from the safety net on NumberProxy's dunder
methods (``metatrace.proxies.number_concretizations``), each relation a branch or check decided
(``flag > 5`` was True) and each value baked in (``d == 1`` used as a dimension). When the prologue is built
(thunder's ``propagate_constraints``), each guard becomes a prologue constraint:

- its operands are projected back to the inputs through their producers (the recorded ops and
  thunder's own number ops, at any subsymbol depth); all guards of the entry are written out as
  Python expressions of the inputs in one function (:class:`GuardProgram`), which the prologue
  calls as ``metatrace_guards(program_id, *inputs)``; it raises when a relation does not hold,
  which thunder counts as a cache miss;
- an operand whose chain cannot be replayed (a value with no recorded producer, or a producer
  the python executor cannot run) pins every number input and tensor size to its current value:
  slower, never wrong.
"""

from __future__ import annotations

from metatrace.errors import MetatraceError

import math
import os
import sys
from dataclasses import dataclass, field, replace
from typing import Any

import thunder
import thunder.core.prims as prims
from thunder.core.proxies import NumberProxy

from metatrace.guards.guard_record import Guard, is_leaf
from metatrace.metas.concretizations import BRANCH, FLOAT_RANGE, Reason, ReasonKind, baked_in
from metatrace.metas import unbacked
from metatrace.metas.relations import Relation
from metatrace.metas.torch_ops import data_dependent_ops


class GuardFailure(MetatraceError):
    """Raised by a prologue guard that does not hold: thunder treats it as a cache miss."""


# Symbols whose number outputs are values read from tensor data: they have no trace-time value.
_READS_TENSOR_DATA = frozenset({"item", "tolist"}) | data_dependent_ops.NAMES

# Frames of these files are plumbing between a concretization and the code that asked for it.
_PLUMBING = ("/metatrace/", "/thunder/core/proxies.py", "/thunder/core/langctxs.py", "/thunder/core/symbol.py",
             "/thunder/core/interpreter.py", "/thunder/core/jit_ext.py", "/thunder/core/baseutils.py",
             "/contextlib.py", "/functools.py")


def concretization_site(limit: int = 40) -> str:
    """``file:line in function`` of the innermost frame outside metatrace and thunder's plumbing:
    the thunder rule, clang function or meta that read the value. Walks at most ``limit`` frames."""
    frame = sys._getframe(2)
    while frame is not None and limit:
        path = frame.f_code.co_filename
        if path.endswith("/thunder/core/interpreter.py"):
            # a lookaside of thunder's interpreter: the decision is in the user's interpreted code
            return interpreted_line() or "user code"
        if not any(part in path for part in _PLUMBING):
            short = path.split("site-packages/")[-1]
            return f"{short}:{frame.f_lineno} in {frame.f_code.co_name}"
        frame, limit = frame.f_back, limit - 1
    return ""


_THUNDER_DIR = os.path.dirname(thunder.__file__) + os.sep
# metatrace's own interpreted helpers (``map``'s, ``max``'s Python versions) are not the user's line
_OWN_DIRS = (_THUNDER_DIR, os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep)


def _with_user_line(site: str) -> str:
    """``site``, and the user's line that reached it when the site is thunder's: ``for row in
    t`` over a tensor whose length is read from data decides in thunder's ``tensor_split``, and
    the user wants the loop's line too (transformers' eager MoE experts)."""
    user = interpreted_line()
    if not user or not site.startswith("thunder/") or user == site:
        return site
    return f"{site}, called from {user}"


def interpreted_line(outside: tuple[str, ...] | None = None) -> str:
    """The line of user code thunder's interpreter is running, or ''. thunder interprets some of
    its own helpers too (``getitem_impl`` for ``t[i]``), metatrace its Python versions of builtins:
    the innermost frame outside both (or outside the directories ``outside``)."""
    from thunder.core.interpreter import get_interpreterruntimectx

    try:
        frames = get_interpreterruntimectx().frame_stack
    except (LookupError, AttributeError):
        return ""
    for frame in reversed(frames):
        path = frame.code.co_filename
        if path.startswith(_OWN_DIRS if outside is None else outside):
            continue
        line = frame.positions.lineno if frame.positions else "?"
        return f"{path}:{line} in {frame.code.co_name}"
    return ""


class DataDependentError(MetatraceError, RuntimeError):
    """A decision or a size depends on a value read from tensor data (``item``, ``tolist``): it has
    no meaning at trace time, so no cache entry can be built on it (torch.compile raises its
    data-dependent guard error in the same place)."""

    def __init__(self, guard: "Guard", value, source, where: str):
        self.guard, self.value, self.source, self.where = guard, value, source, where
        read = ("an op whose output has no value" if source is None
                else f"{source.sym.name}({', '.join(getattr(a, 'name', repr(a)) for a in source.flat_args)})")
        what = guard.why.kind.value if guard.why.kind is ReasonKind.BRANCH else f"{guard.why.kind.value} ({guard.why})"
        super().__init__(
            f"{what} depends on {value.name}, which is computed from {read}: a value read from tensor data has "
            f"no trace-time value under cache=\"symbolic values\""
            + (f" (at {where})" if where else "")
            + ". Compute on the tensor instead (torch.where, masks), or move the decision out of the jitted function."
        )


class ExactValue:
    """A float or complex baked into a trace, compared as the very same value: NaN matches NaN
    (``nan == nan`` never holds, so the entry would reject the call it was traced for) and -0.0
    does not match 0.0 (``-0.0 == 0.0`` holds, and ``torch.tensor([v])`` baked in the sign)."""

    __slots__ = ("value",)

    def __init__(self, value: float | complex):
        self.value = value

    def __eq__(self, other) -> bool:
        other = other.value if isinstance(other, ExactValue) else other
        try:
            a, b = complex(self.value), complex(other)
        except (TypeError, OverflowError, ValueError):
            return False
        return all(
            (x == y and math.copysign(1.0, x) == math.copysign(1.0, y)) or (x != x and y != y)
            for x, y in ((a.real, b.real), (a.imag, b.imag))
        )

    def __ne__(self, other) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash((type(self.value), repr(self.value)))

    def __repr__(self) -> str:
        return repr(self.value)


def exact(value: Any) -> Any:
    """``value`` as an equality guard compares it: an ``ExactValue`` where ``==`` is not identity
    (NaN, a signed zero, any complex), else the value itself (simplifiable)."""
    if (type(value) is float and (math.isnan(value) or value == 0.0)) or type(value) is complex:
        return ExactValue(value)
    return value


def is_nan(x: Any) -> bool:
    v = x.value if isinstance(x, NumberProxy) else x
    return isinstance(v, (float, complex)) and v != v


@dataclass
class GuardCollector:
    """Receives the concretizations of one trace (see metatrace.metas.concretizations)."""

    guards: list[Guard] = field(default_factory=list)
    _seen: set = field(default_factory=set)
    # Producers of the numbers the runtime recorded, including ones later pruned from the trace.
    recorded: dict[str, Any] = field(default_factory=dict)
    _data_sources: dict[str, Any] = field(default_factory=dict)
    # An integer beyond 2**53 was converted to float: the guards are checked as recorded
    # (metatrace.proxies.float_numbers.guard_exact_float).
    inexact_float: bool = False

    def relation(self, op: Relation | str, lhs: Any, rhs: Any, value: bool | None) -> None:
        op = Relation(op)
        if value is None:  # no value decides it: an operand was read from tensor data
            self._raise_data_dependent(Guard(op, lhs, rhs, BRANCH))
            raise unbacked.undecided(op, lhs, rhs)  # never decided, even with no data source found
        if not value and op.ordered:
            nan = next((side for side in (lhs, rhs) if is_nan(side)), None)
            if nan is not None:
                # An ordered comparison with NaN is False, and its negation (``f <= 0.5`` for
                # ``not f > 0.5``) is False too: the guard is ``f != f`` (f is NaN), which is
                # exactly where every ordered comparison of f is False.
                self._add(Guard(Relation.NE, nan, nan, BRANCH))
                return
        if not value:
            op = op.negated()
        self._add(Guard(op, lhs, rhs, BRANCH))

    def float_range(self, x: Any, bound: int) -> None:
        """``-bound <= x <= bound`` (it holds for the call traced): what ``float(x)`` needs to be
        exact. Left out where it cannot be projected (``ReasonKind.FLOAT_RANGE``)."""
        self._add(Guard(Relation.LE, x, bound, FLOAT_RANGE))
        self._add(Guard(Relation.GE, x, -bound, FLOAT_RANGE))

    def bake_in(self, x: Any, value: Any, why: str | Reason) -> None:
        self._add(Guard(Relation.EQ, x, exact(value), baked_in(why)))

    def produced(self, bsym) -> None:
        for out in bsym.flat_proxy_outs:
            self.recorded.setdefault(out.name, bsym)

    def producer_of(self, name: str):
        return self.recorded.get(name)

    def add_stamped(self, guard: Guard) -> None:
        """A guard of a stamped block (``interpret.modules.repeated_blocks``): the first block's
        guard renamed, where it was checked already; once, as every guard."""
        key = guard.key()
        if key not in self._seen:
            self._seen.add(key)
            self.guards.append(guard)

    def _add(self, guard: Guard) -> None:
        if not isinstance(guard.lhs, NumberProxy) and not isinstance(guard.rhs, NumberProxy):
            return
        key = guard.key()
        if key not in self._seen:
            where = concretization_site()
            self._raise_data_dependent(guard, where)
            self._seen.add(key)
            self.guards.append(replace(guard, where=where))

    def _raise_data_dependent(self, guard: Guard, where: str | None = None) -> None:
        """Raises DataDependentError when a side of ``guard`` is computed from tensor data (or has
        no trace-time value at all): the prologue could not check it, and no value decides it."""
        for side in (guard.lhs, guard.rhs):
            if not isinstance(side, NumberProxy):
                continue
            source = self.tensor_data_source(side)
            if source is not None or side.value is None:
                raise DataDependentError(guard, side, source, _with_user_line(concretization_site()) if where is None else where)

    def tensor_data_source(self, x: NumberProxy):
        """The bound symbol that read ``x`` (or a number it is computed from) out of tensor data
        (``item``, ``tolist``), or None. Memoized: producers never change once made."""
        cache = self._data_sources
        todo, path = [x], []
        while todo:
            p = todo.pop()
            if p.name in cache:
                if cache[p.name] is not None:
                    for q in path:
                        cache[q] = cache[p.name]
                    return cache[p.name]
                continue
            path.append(p.name)
            bsym = self.recorded.get(p.name)
            if bsym is None or is_leaf(p):
                cache[p.name] = None
                continue
            if bsym.sym.id == prims.PrimIDs.ITEM or bsym.sym.name in _READS_TENSOR_DATA:
                for q in path:
                    cache[q] = bsym
                return bsym
            cache[p.name] = None  # provisional: a cycle cannot make it data-dependent
            todo.extend(a for a in bsym.flat_proxy_args if isinstance(a, NumberProxy))
        return None
