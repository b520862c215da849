"""The decision procedure: a cache entry's guards reduced to a small set that accepts exactly the
same leaf values (equalities solved and substituted, one range per leaf, implied relations
dropped), and that set written out as :class:`SimpleGuard` objects."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, NamedTuple

from thunder.core.proxies import FloatProxy, IntegerProxy, NumberProxy

from metatrace.guards.guard_record import Guard, is_leaf as _default_is_leaf, is_static_value
from metatrace.guards.simplify.bounds import INF, bounds
from metatrace.guards.simplify.expressions import (
    FROM_PRIM,
    ZERO,
    Expr,
    Node,
    Poly,
    wrap_node,
    build,
    const,
    node_const,
    patom,
    pconst,
)
from metatrace.guards.simplify.traversal import collect_leaf_nodes, leaves_of, substitute
from metatrace.guards.simplify.relations import RAW, Rel, add_relation, collect_covered, never_relation, canonical, relation
from metatrace.guards.simplify.rendering import side_text, python_check, render
from metatrace.metas.algebra_ops import NumberKind, Op
from metatrace.metas.relations import Relation

# Relations between different linear forms with the same terms (``i < a.shape[2]`` and
# ``i <= a.shape[2]``) are merged into the tightest only when True; ranges of single leaves always are.
MERGE_RELATIONS = True


@dataclass(frozen=True)
class SimpleGuard:
    """One simplified guard. ``parts`` alternate expressions and comparison symbols
    (``(2, "<=", T, "<=", 127)``); ``text``: as ``explain`` shows it; ``leaves``: the names of
    the leaf proxies it reads. A guard ``lhs <relation> rhs`` (three parts) has its
    ``relation``, its left side as shown (``subject``) and its right side's ``value`` where that
    is a constant (``n > 1``); a range (five parts) or a truth test (one) has None."""

    parts: tuple
    text: str
    leaves: tuple
    relation: Relation | None = None
    subject: str | None = None
    value: Any = None

    def python(self, param: Callable[[str], str], const: Callable[[Any], str]) -> str:
        """Python source of the check: ``param(leaf name)`` is the parameter holding that leaf,
        ``const(value)`` names a constant that has no literal."""
        return python_check(self.parts, param, const)


def _make(parts: tuple, show: Callable[[str], str]) -> SimpleGuard:
    shown = [p if isinstance(p, str) else side_text(render(p, show)) for p in parts]
    leaves: set = set()
    for p in parts:
        if not isinstance(p, str):
            leaves_of(p, leaves)
    if len(parts) != 3:
        return SimpleGuard(parts, " ".join(shown), tuple(sorted(leaves)))
    return SimpleGuard(parts, " ".join(shown), tuple(sorted(leaves)), Relation.of_symbol(parts[1]), shown[0],
                       node_const(parts[2]))




class _Builder:
    """Guard operands as expressions over the leaves, through their producers. ``conditions``:
    what the operations built need not to raise (:class:`metatrace.guards.simplify.expressions.Built`),
    in the order they were built."""

    def __init__(self, producers, order, is_leaf, static_leaves):
        self.producers = producers
        self.index = {name: i for i, name in enumerate(order)}
        self.is_leaf = is_leaf
        self.static_leaves = static_leaves
        self.memo: dict[str, Expr] = {}
        self.conditions: list[Expr] = []

    def expr(self, x) -> Expr:
        if not isinstance(x, NumberProxy):
            return const(x)
        e = self.memo.get(x.name)
        if e is None:
            if self.is_leaf(x) and self.static_leaves and x.is_static_constrained() and x.value is not None:
                e = const(x.value)  # thunder's prologue checks a static input's value itself
            elif self.is_leaf(x):
                typ = (NumberKind.INT if isinstance(x, IntegerProxy) else NumberKind.FLOAT if isinstance(x, FloatProxy)
                       else NumberKind.OTHER)
                self.index.setdefault(x.name, len(self.index))
                e = wrap_node(Node(Op.LEAF, (x.name, self.index[x.name]), typ))
            elif is_static_value(x):
                e = const(x.value)
            else:
                bsym = self.producers[x.name]
                built = build(FROM_PRIM[bsym.sym.id], [self.expr(a) for a in bsym.flat_args])
                e = built.expr
                self.conditions += built.conditions
            self.memo[x.name] = e
        return e


def simplify(
    guards: Iterable[Guard],
    producers: dict[str, Any],
    leaves: Iterable = (),
    names: dict[str, str] | None = None,
    sizes: Iterable[str] = (),
    is_leaf: Callable[[NumberProxy], bool] = _default_is_leaf,
    static_leaves: bool = True,
) -> list[SimpleGuard]:
    """The guards of one cache entry as a small set that accepts exactly the same leaf values.

    ``guards``: normalized guards whose operands project through ``producers`` (as for
    :func:`metatrace.guards.projection.project`, with the same ``is_leaf``). ``leaves``: leaf proxies or
    names in input order (when an equality relates two leaves the earlier one stays);
    ``names``: display names (``T``, ``idx.shape[1]``); ``sizes``: names of the leaves that are
    tensor sizes (known ``>= 0``); ``static_leaves``: a leaf thunder marked static is its value
    (thunder's own prologue checks it, as for the guards dropped for having only static leaves).
    Compile the result with ``GuardProgram(id, simple,
    [g.text for g in simple], leaves, producers)``.
    """
    names = names or {}
    builder = _Builder(producers, [getattr(p, "name", p) for p in leaves], is_leaf, static_leaves)
    rels: list[Rel] = []
    for i, g in enumerate(guards):
        add_relation(rels, relation(g.op, builder.expr(g.lhs), builder.expr(g.rhs)), i)
    for e in builder.conditions:
        add_relation(rels, relation(Relation.NE, e, ZERO), len(rels) + 1_000_000, implicit=True)
    return _reduce(rels, set(sizes), lambda n: names.get(n, n))


def _leaf_of(n: Node | None) -> str | None:
    return n.args[0] if n is not None and n.op is Op.LEAF and n.typ is NumberKind.INT else None


def _dedupe(rels: list[Rel]) -> list[Rel]:
    seen: dict = {}
    out = []
    for r in rels:
        k = r.key()
        if k in seen:
            seen[k].implicit = seen[k].implicit and r.implicit
            continue
        seen[k] = r
        out.append(r)
    return out


def _apply(rels: list[Rel], sub: dict[str, Expr], keep: Rel) -> list[Rel]:
    """Every relation but ``keep`` with the substitution applied, folded again."""
    memo: dict = {}
    out = []
    for r in rels:
        if r is keep:
            out.append(r)
            continue
        if r.solved:
            new = Rel(Relation.EQ, substitute(r.poly, sub, memo), solved=r.solved)
        elif r.op == RAW:
            new = relation(Relation.of_symbol(r.rop), substitute(r.lhs, sub, memo), substitute(r.rhs, sub, memo))
        else:
            new = canonical(r.op, substitute(r.poly, sub, memo))
            if isinstance(new, Rel) and new.op is Relation.GE:
                new.strict = r.strict and new.poly.linear() == r.poly.linear()
        add_relation(out, new, r.order, r.implicit)
    return out


def _solve(r: Rel) -> tuple[Node, Poly] | None:
    """(leaf, value) if ``r`` is an equality that can be solved for a leaf: the latest input's."""
    if r.op is not Relation.EQ or r.solved:
        return None
    best = None
    for m, c in r.poly.terms:
        if len(m) == 1 and abs(c) == 1 and _leaf_of(m[0]) is not None:
            rest = Poly({mm: cc for mm, cc in r.poly.terms if mm != m})
            if m[0].args[0] in leaves_of(rest):
                continue
            if best is None or m[0].key > best[0].key:
                best = (m[0], rest * -c)  # c * x + rest == 0  ->  x == -rest / c
    return best


def _eliminate(rels: list[Rel]) -> list[Rel]:
    """Solve equalities for leaves and substitute them everywhere else, until none is left."""
    while True:
        for r in rels:
            s = _solve(r)
            if s is not None:
                leaf, value = s
                r.solved, r.poly = leaf.args[0], patom(leaf) - value
                rels = _dedupe(_apply(rels, {leaf.args[0]: value}, keep=r))
                break
        else:
            return rels


def _reduce(rels: list[Rel], sizes: set[str], show) -> list[SimpleGuard]:
    leaf_nodes: dict[str, Node] = {}
    for r in rels:
        for e in r.exprs():
            collect_leaf_nodes(e, leaf_nodes)
    rels = _dedupe(rels)
    for _ in range(1000):
        rels = _eliminate(rels)
        found = _ranges(rels, sizes)
        rels = found.rels
        if found.pinned is None:
            break
        rels.append(found.pinned)  # a range of one value: an equality, solved in the next round
    return _output(rels, found.ranges, found.strict, sizes, leaf_nodes, show)


def _group(r: Rel) -> tuple[Poly, int, int] | None:
    """(L, s, c) with r's poly ``s * L + c``: L linear with a positive first coefficient, s = ±1."""
    if r.op == RAW or r.solved:
        return None
    lin = r.poly.linear()
    s = 1 if lin.terms[0][1] > 0 else -1
    return (lin * s, s, r.poly.const)


class Ranges(NamedTuple):
    """What :func:`_ranges` finds."""

    ranges: dict[str, tuple]  # leaf name -> (lo, hi), ±INF where unbounded
    rels: list[Rel]  # the other relations, plus the ``!=`` inside a range
    # an equality when a range holds one value: then ``rels`` are the relations unchanged but
    # for that leaf's
    pinned: Rel | None
    strict: dict[str, list]  # leaf name -> [lower bound written strict, upper bound written strict]


def _ranges(rels: list[Rel], sizes: set[str]) -> Ranges:
    """One range per leaf from the relations on that leaf alone (``!=`` at an end tightens it)."""
    lo: dict[str, float] = {}
    hi: dict[str, float] = {}
    strict: dict[str, list] = {}  # name -> [lower bound strict, upper bound strict]
    points: dict[str, dict] = {}  # name -> {excluded value: (all implicit, order)}
    leaf: dict[str, Node] = {}
    rest = []
    for r in rels:
        g = _group(r)
        name = _leaf_of(g[0].atom()) if g is not None and r.op is not Relation.EQ else None
        if name is None:
            rest.append(r)
            continue
        _, s, c = g
        leaf[name] = g[0].atom()
        if r.op is Relation.GE:  # x >= -c  or  -x + c >= 0: x <= c
            flags = strict.setdefault(name, [False, False])
            if s > 0:
                if -c > lo.get(name, -INF) or (-c == lo[name] and not r.strict):
                    lo[name], flags[0] = -c, r.strict
            else:
                if c < hi.get(name, INF) or (c == hi[name] and not r.strict):
                    hi[name], flags[1] = c, r.strict
        else:
            implicit, order = points.setdefault(name, {}).get(-c * s, (True, r.order))
            points[name][-c * s] = (implicit and r.implicit, min(order, r.order))
    ranges: dict[str, tuple] = {name: (0, INF) for name in sizes}
    for name, node in sorted(leaf.items(), key=lambda kv: kv[1].key):
        a, b = max(lo.get(name, -INF), 0 if name in sizes else -INF), hi.get(name, INF)
        excluded = points.get(name, {})
        flags = strict.setdefault(name, [False, False])
        if a != lo.get(name, -INF):
            flags[0] = False
        while a in excluded:
            a, flags[0] = a + 1, False
        while b in excluded:
            b, flags[1] = b - 1, False
        if a > b:
            return Ranges(ranges, [never_relation()], None, strict)
        if a == b:
            others = [r for r in rels if r.op is Relation.EQ or _leaf_of(g[0].atom() if (g := _group(r)) else None) != name]
            return Ranges(ranges, others, Rel(Relation.EQ, patom(node) - pconst(a), order=-1), strict)
        ranges[name] = (a, b)
        for k, (implicit, order) in excluded.items():
            if a < k < b:
                rest.append(Rel(Relation.NE, patom(node) - pconst(k), implicit=implicit, order=order))
    return Ranges(ranges, rest, None, strict)


def _output(rels: list[Rel], ranges: dict, strict: dict, sizes: set[str], leaf_nodes: dict, show) -> list[SimpleGuard]:
    kept: list[Rel] = []
    groups: dict = {}
    for r in rels:
        g = _group(r)
        if g is not None:
            L, s, c = g
            b_lo, b_hi = bounds(L, ranges)
            if r.op is Relation.GE and (b_lo >= -c if s > 0 else b_hi <= c):
                continue  # the ranges imply it
            if r.op is Relation.NE and not b_lo <= -c * s <= b_hi:
                continue  # the ranges decide it
            if r.op is Relation.EQ and b_lo == b_hi == -c * s:
                continue
            groups.setdefault(L.key, []).append((r, s, c))
        kept.append(r)
    # relations on one linear form: a "!=" outside the bounds goes; bounds merge when asked
    drop = set()
    for members in groups.values():
        low = max((-c for r, s, c in members if r.op is Relation.GE and s > 0), default=-INF)
        high = min((c for r, s, c in members if r.op is Relation.GE and s < 0), default=INF)
        for r, s, c in members:
            if r.op is Relation.NE and not low <= -c * s <= high:
                drop.add(id(r))
            if MERGE_RELATIONS and r.op is Relation.GE and (-c < low if s > 0 else c > high):
                drop.add(id(r))
    kept = [r for r in kept if id(r) not in drop]
    # an operation's condition goes where a kept guard checks it by raising
    covered: set = set()
    for r in kept:
        if not r.implicit:
            for e in r.exprs():
                collect_covered(e, covered)
    kept = [r for r in kept if not (r.implicit and r.key() in covered)]

    out: list[tuple] = []
    for name, (a, b) in ranges.items():
        node = leaf_nodes.get(name)
        a_shown = a if a > (0 if name in sizes else -INF) else None
        b_shown = b if b < INF else None
        if node is None or (a_shown is None and b_shown is None):
            continue
        x = patom(node)
        if a_shown is not None and b_shown is not None:
            parts = (pconst(a), Relation.LE.symbol, x, Relation.LE.symbol, pconst(b))
        elif a_shown is not None:  # as written: flag > 5, T >= 2
            strictly = strict.get(name, (False,))[0]
            parts = (x, Relation.GT.symbol, pconst(a - 1)) if strictly else (x, Relation.GE.symbol, pconst(a))
        else:
            strictly = strict.get(name, (False, False))[1]
            parts = (x, Relation.LT.symbol, pconst(b + 1)) if strictly else (x, Relation.LE.symbol, pconst(b))
        out.append(((1, node.key), parts))
    for r in kept:
        if r.solved:
            out.append(((0, leaf_nodes[r.solved].key), _solved_parts(r, leaf_nodes[r.solved])))
        else:
            out.append(((2, r.order), _parts(r, sizes)))
    out.sort(key=lambda x: x[0])
    return [_make(parts, show) for _, parts in out]


def _first(p: Poly, sizes: set[str]) -> tuple:
    """Which side of a relation goes left: the one with an input number (``i <= a.shape[2]``),
    else with the earliest input (``T < mask.shape[2]``)."""
    keys = [(n.op is not Op.LEAF or n.args[0] in sizes, n.key) for m, _ in p.terms for n in m]
    return min(keys) if keys else (True, (9,))


def _solved_parts(r: Rel, leaf: Node) -> tuple:
    x = patom(leaf)
    value = x - r.poly  # poly is x - value
    other = value.atom()
    if other is not None and other.op is Op.LEAF and other.key < leaf.key:
        return (value, Relation.EQ.symbol, x)  # B == k.shape[0]: the earlier input on the left
    return (x, Relation.EQ.symbol, value)


# Conditions shown as a truth test (``isfinite(p)``), not ``isfinite(p) != 0``.
_TRUTH_TESTS = frozenset({Op.ISFINITE, Op.ISINT})


def _parts(r: Rel, sizes: set[str]) -> tuple:
    if r.op == RAW:
        return (r.lhs, r.rop, r.rhs)
    p = r.poly
    pos = Poly({m: c for m, c in p.terms if m and c > 0})
    neg = Poly({m: -c for m, c in p.terms if m and c < 0})
    c = p.const
    rel = r.op
    if rel is Relation.NE and c == 0 and not neg.terms and (a := pos.atom()) is not None and a.op in _TRUTH_TESTS:
        return (pos,)
    if not neg.terms:  # pos + c op 0  ->  pos op -c
        return (pos, rel.symbol, pconst(-c))
    if not pos.terms:  # -neg + c op 0  ->  neg op' c
        return (neg, rel.swapped().symbol, pconst(c))
    if rel is Relation.GE and c == -1:
        c, rel = 0, Relation.GT
    if c > 0:  # a constant goes right: j <= i + 10
        return (neg, rel.swapped().symbol, pos + c)
    if c < 0:
        return (pos, rel.symbol, neg - c)
    if _first(neg, sizes) < _first(pos, sizes):
        return (neg, rel.swapped().symbol, pos)
    return (pos, rel.symbol, neg)
