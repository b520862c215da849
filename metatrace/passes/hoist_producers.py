"""Moves number ops that define sizes of earlier tensors up, before the first such tensor.

thunder's grad transform puts each rule's forward part first and its backward part (where the
split of the rule's ops sends number ops that no forward *argument* uses) after it, so the
producer of a forward tensor's size (``i16 = add(i15, x2)`` for ``pad``'s output) can come after
the tensor. ``hoist_size_producers`` runs in three walks:

1. ``index_number_ops``: each name's first use and definer, which bound symbols are number ops,
   and how early each number op could go once the number ops it depends on move up;
2. ``plan_moves``: backwards, each number op's deadline (the first bound symbol using its outputs,
   or an earlier moved number op using them), and whether it moves;
3. ``rebuild``: the moved number ops right before their deadlines.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from thunder.core.proxies import NumberProxy, TensorProxy

from metatrace.passes.trace_facts import sizes_of, with_bound_symbols


def hoist_size_producers(trace):
    """Moves number ops that define sizes of earlier tensors up, before the first such tensor.

    The producer moves with the number ops it depends on in between, if every other argument is
    defined before the tensor; otherwise it stays where it is (unless a moved number op needs it:
    then it goes just before that one).

    One walk to index the trace, one backwards to find each number op's deadline (the first
    bound symbol using its outputs, or an earlier moved number op using them), one to rebuild.
    """
    index = index_number_ops(list(trace.bound_symbols))
    moves, deadline = plan_moves(index)
    if not any(moves):
        return trace
    return with_bound_symbols(trace, rebuild(index.bsyms, moves, deadline), f"hoisted {sum(map(bool, moves))} size producers")


@dataclass
class NumberOpIndex:
    bsyms: list
    first_use: dict[str, int] = field(default_factory=dict)  # name -> index of its first user
    definer: dict[str, int] = field(default_factory=dict)  # name -> index of its first definition
    is_number_op: list[bool] = field(default_factory=list)
    # earliest[i]: the index after which number op i can go once the number ops it depends on
    # move up as far as they can (-1: anywhere)
    earliest: list[int] = field(default_factory=list)


def index_number_ops(bsyms: list) -> NumberOpIndex:
    n = len(bsyms)
    index = NumberOpIndex(bsyms, is_number_op=[False] * n, earliest=[-1] * n)
    for i, b in enumerate(bsyms):
        for name in _used_names(b):
            index.first_use.setdefault(name, i)
        if is_number_op(b):
            index.is_number_op[i] = True
            index.earliest[i] = _earliest(index, b)
        for o in b.flat_proxy_outs:
            index.definer.setdefault(o.name, i)
    return index


def _earliest(index: NumberOpIndex, b) -> int:
    """The index after which number op ``b`` can go, from its arguments' definers."""
    e = -1
    for a in b.flat_proxy_args:
        j = index.definer.get(a.name)
        if j is not None:
            e = max(e, index.earliest[j] if index.is_number_op[j] else j)
    return e


def plan_moves(index: NumberOpIndex) -> tuple[list[bool], list[int]]:
    """(moves, deadline): whether bound symbol i moves, and the bound symbol it goes right
    before."""
    bsyms, n = index.bsyms, len(index.bsyms)
    deadline = list(range(n))
    moves = [False] * n
    needed_by = [n] * n  # the earliest deadline of a moved number op that uses number op i
    for i in range(n - 1, -1, -1):
        if not index.is_number_op[i]:
            continue
        own = min((index.first_use.get(o.name, n) for o in bsyms[i].flat_proxy_outs), default=n)
        target = min(i, own, needed_by[i])
        if target <= index.earliest[i]:
            # it cannot go before its own first user: only as far as moved ops using it need
            # (always possible: each of those can go after everything it depends on)
            target = min(i, needed_by[i])
        if target == i and needed_by[i] > i:
            continue
        moves[i] = True
        deadline[i] = target
        for a in bsyms[i].flat_proxy_args:
            j = index.definer.get(a.name)
            if j is not None and j >= target and index.is_number_op[j]:
                needed_by[j] = min(needed_by[j], target)
    return moves, deadline


def rebuild(bsyms: list, moves: list[bool], deadline: list[int]) -> list:
    moved: dict[int, list] = {}
    for i, b in enumerate(bsyms):
        if moves[i]:
            moved.setdefault(deadline[i], []).append(b)
    result = []
    for i, b in enumerate(bsyms):
        result.extend(moved.get(i, ()))
        if not moves[i]:
            result.append(b)
    return result


def _used_names(bsym):
    """Names ``bsym`` uses: its arguments, and the sizes of the tensors it takes and returns."""
    for a in bsym.flat_proxy_args:
        yield a.name
    for s in sizes_of(bsym):
        yield s.name


def is_number_op(bsym) -> bool:
    """Whether ``bsym`` computes numbers from numbers only (not a ``shape`` or an unpacking)."""
    outs = bsym.flat_proxy_outs
    return (
        bool(outs)
        and all(isinstance(o, NumberProxy) for o in outs)
        and all(not isinstance(a, TensorProxy) for a in bsym.flat_proxy_args)
        and bsym.sym.name != "shape"
        and not bsym.sym.name.startswith("unpack")
    )
