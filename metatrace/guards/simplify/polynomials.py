"""Polynomials over int atoms (:class:`Poly`) and the nodes they do not absorb (:class:`Node`):
the data of guard expressions, and the integer ring the polynomials form.

``+``, ``-``, ``*``, ``//`` and ``%`` on polynomials (and ints, read as constants) are pure: a new
polynomial, nothing recorded. A sum or product folds the identities its terms can show
(thunder's floor division, trunc division minus its sign fix, is ``a // b``; ``n * (a // n)`` is
``a - a % n``); multiplying by an int scales (it shows no identity its operand did not). What a
division needs not to raise (``b != 0``) is not the ring's concern: the operation that divides
states it (:func:`metatrace.guards.simplify.expressions.build`), and every ``//`` or ``%`` node a
fold makes has a divisor an operation built before it already divided by. The operations on every
expression are in :mod:`metatrace.guards.simplify.expressions`."""

from __future__ import annotations

from metatrace.guards.simplify.rendering import render
from metatrace.metas.algebra_ops import NumberKind, Op


class _Keyed:
    """An expression compared and hashed by its canonical ``key`` (made once, in ``__init__``): a
    :class:`Node`'s key starts with 0, 1 or 2 and a :class:`Poly`'s with 3, so none equals the other."""

    __slots__ = ()

    def __eq__(self, other):
        return isinstance(other, _Keyed) and self.key == other.key

    def __hash__(self):
        return self._hash

    def __repr__(self):
        return render(self)[0]


class Node(_Keyed):
    """A leaf, a constant that is not an int, or an operation the polynomials do not absorb.

    ``op``: an :class:`Op` (a name of one, as the table writes it, is read as its member);
    ``typ``: a :class:`NumberKind`, ``INT`` (ints and bools: such a node only appears inside a
    :class:`Poly`), ``FLOAT`` or ``OTHER``."""

    __slots__ = ("op", "args", "typ", "key", "_hash")

    def __init__(self, op: Op | str, args: tuple, typ: NumberKind | str):
        # members whatever the caller passed (a str enum's key orders and hashes as its value);
        # the type tests spare the lookups on the algebra's own calls, which pass members
        op = op if type(op) is Op else Op.of(op)
        typ = typ if type(typ) is NumberKind else NumberKind.of(typ)
        self.op, self.args, self.typ = op, args, typ
        if op is Op.LEAF:
            self.key = (0, args[1], args[0])  # (name, index): ordered by input position
        elif op is Op.CONST:
            self.key = (1, type(args[0]).__name__, repr(args[0]))
        else:
            self.key = (2, op, tuple(a.key for a in args))
        self._hash = hash(self.key)


class Poly(_Keyed):
    """sum(coefficient * product of int atoms) + constant, integer coefficients, canonical order."""

    __slots__ = ("terms", "key", "_hash")
    typ = NumberKind.INT

    def __init__(self, terms: dict):
        items = [(m, c) for m, c in terms.items() if c]
        items.sort(key=lambda mc: (not mc[0], tuple(n.key for n in mc[0])))
        self.terms: tuple = tuple(items)
        self.key = (3, tuple((tuple(n.key for n in m), c) for m, c in items))
        self._hash = hash(self.key)

    def __add__(self, other: Poly | int) -> Poly:
        other = _as_poly(other)
        return NotImplemented if other is None else _sum(self, other, 1)

    __radd__ = __add__

    def __sub__(self, other: Poly | int) -> Poly:
        other = _as_poly(other)
        return NotImplemented if other is None else _sum(self, other, -1)

    def __rsub__(self, other: int) -> Poly:
        other = _as_poly(other)
        return NotImplemented if other is None else _sum(other, self, -1)

    def __neg__(self) -> Poly:
        return self * -1

    def __mul__(self, other: Poly | int) -> Poly:
        if isinstance(other, int):  # scaling
            return Poly({m: c * other for m, c in self.terms})
        return _product(self, other) if isinstance(other, Poly) else NotImplemented

    __rmul__ = __mul__

    def __floordiv__(self, other: Poly | int) -> Poly:
        other = _as_poly(other)
        return NotImplemented if other is None else int_division(Op.FLOORDIV, self, other)

    def __mod__(self, other: Poly | int) -> Poly:
        other = _as_poly(other)
        return NotImplemented if other is None else int_division(Op.MOD, self, other)

    @property
    def const(self) -> int:
        return self.terms[-1][1] if self.terms and not self.terms[-1][0] else 0

    def is_const(self) -> bool:
        return not self.terms or (len(self.terms) == 1 and not self.terms[0][0])

    def atom(self) -> Node | None:
        """The node if this is ``1 * node``."""
        if len(self.terms) == 1 and len(self.terms[0][0]) == 1 and self.terms[0][1] == 1:
            return self.terms[0][0][0]
        return None

    def linear(self) -> Poly:
        return Poly({m: c for m, c in self.terms if m})


Expr = Poly | Node


def pconst(c: int) -> Poly:
    return Poly({(): int(c)})


ZERO, ONE = pconst(0), pconst(1)


def patom(n: Node) -> Poly:
    return Poly({(n,): 1})


def node_const(e: Expr):
    """The Python value of a constant expression, else None."""
    if isinstance(e, Poly):
        return e.const if e.is_const() else None
    return e.args[0] if e.op is Op.CONST else None


def const(v) -> Expr:
    if type(v) in (int, bool):
        return pconst(v)
    return Node(Op.CONST, (v,), NumberKind.FLOAT if type(v) is float else NumberKind.OTHER)


def wrap_node(n: Node) -> Expr:
    return patom(n) if n.typ is NumberKind.INT else n


def _as_poly(x) -> Poly | None:
    """An operand of the ring: a polynomial, or an int as a constant; None for anything else."""
    return x if isinstance(x, Poly) else pconst(x) if isinstance(x, int) else None


def _sum(a: Poly, b: Poly, k: int) -> Poly:
    """a + k * b"""
    d = dict(a.terms)
    for m, c in b.terms:
        d[m] = d.get(m, 0) + k * c
    return _folded(d)


def _product(a: Poly, b: Poly) -> Poly:
    d: dict = {}
    for m1, c1 in a.terms:
        for m2, c2 in b.terms:
            m = tuple(sorted(m1 + m2, key=lambda n: n.key))
            d[m] = d.get(m, 0) + c1 * c2
    return _folded(d)


def _signbit(p: Poly) -> Poly:
    """``signbit(p)`` as the algebra builds it (a constant's is its value)."""
    return pconst(p.const < 0) if p.is_const() else patom(Node(Op.SIGNBIT, (p,), NumberKind.INT))


def _signs_differ(a: Poly, b: Poly) -> Poly:
    """``signbit(a) != signbit(b)`` as the algebra builds it: constants compared, operands ordered."""
    x, y = sorted((_signbit(a), _signbit(b)), key=lambda e: e.key)
    if (x.is_const() and y.is_const()) or x == y:
        return pconst(x != y)
    return patom(Node(Op.NE, (x, y), NumberKind.INT))


def _floorfix_args(n: Node):
    """(a, b) if ``n`` is thunder's sign fix of int floor division:
    ``(signbit(a) != signbit(b)) & (int(fmod(a, b)) != 0)``, which trunc division minus it makes ``a // b``."""
    if n.op is not Op.BITAND:
        return None
    atom = lambda e: e.atom() if isinstance(e, Poly) else None  # noqa: E731
    for first, second in ((0, 1), (1, 0)):
        x, y = atom(n.args[first]), n.args[second]
        if x is None or x.op is not Op.NE:
            continue
        lhs, rhs = x.args
        inner = atom(lhs) if rhs == ZERO else atom(rhs) if lhs == ZERO else None
        if inner is None or inner.op is not Op.INT or not isinstance(inner.args[0], Node) or inner.args[0].op is not Op.FMOD:
            continue
        a, b = inner.args[0].args
        if isinstance(a, Poly) and isinstance(b, Poly) and y == _signs_differ(a, b):
            return a, b
    return None


def _folded(d: dict) -> Poly:
    """Identities a sum of terms can show: trunc division minus its sign fix is floor division,
    ``n * (a // n)`` is ``a - a % n``."""
    d = {m: c for m, c in d.items() if c}
    changed = True
    while changed:
        changed = False
        for m, c in list(d.items()):
            for i, n in enumerate(m):
                rest = m[:i] + m[i + 1:]
                ab = _floorfix_args(n)
                if ab is not None:
                    twin = tuple(sorted(rest + (Node(Op.DIV, ab, NumberKind.INT),), key=lambda x: x.key))
                    if d.get(twin) == -c:
                        del d[m], d[twin]
                        _merge(d, Poly({rest: -c}) * (ab[0] // ab[1]))
                        changed = True
                        break
                if n.op is Op.FLOORDIV and isinstance(n.args[1], Poly):
                    div = n.args[1]
                    if len(div.terms) == 1 and div.terms[0][0] and c % div.terms[0][1] == 0:
                        dm, dc = div.terms[0]
                        left = list(rest)
                        if all(x in left and (left.remove(x) or True) for x in dm):
                            a = n.args[0]
                            del d[m]
                            # c * rest * (a // div) = (c / dc) * rest' * (a - a % div)
                            _merge(d, Poly({tuple(left): c // dc}) * (a - a % div))
                            changed = True
                            break
            if changed:
                break
    return Poly(d)


def _merge(d: dict, p: Poly) -> None:
    for m, c in p.terms:
        d[m] = d.get(m, 0) + c
        if not d[m]:
            del d[m]


def _split(p: Poly, c: int) -> tuple[Poly, Poly]:
    """p = c * q + r with every coefficient of r in [0, c)  (c > 0)."""
    q, r = {}, {}
    for m, k in p.terms:
        q[m], r[m] = divmod(k, c)
    return Poly(q), Poly(r)


def _multiple(a: Poly, b: Poly) -> int | None:
    """k if a == k * b."""
    if not b.terms:
        return None
    (bm, bc), ratio = b.terms[0], None
    for m, c in a.terms:
        if m == bm:
            if c % bc:
                return None
            ratio = c // bc
    ratio = ratio or 0
    return ratio if a == b * ratio else None


# Python's floor division and its remainder (``div``, thunder's, truncates)
_FLOOR_DIVISIONS = frozenset({Op.FLOORDIV, Op.MOD})


def int_division(op: Op, a: Poly, b: Poly) -> Poly:
    """``a // b``, ``a % b`` or ``a div b`` (``op``: ``Op.FLOORDIV``, ``Op.MOD``, ``Op.DIV``: trunc
    division, thunder's on ints), folded where the divisor allows; by 0 an opaque node (it raises)."""
    op = op if type(op) is Op else Op.of(op)
    c = b.const if b.is_const() else None
    if c is not None and c != 0:
        if c < 0:
            if op is Op.FLOORDIV:
                return int_division(op, -a, pconst(-c))
            if op is Op.MOD:
                return -int_division(op, -a, pconst(-c))
            return -int_division(op, a, pconst(-c))  # trunc division is odd
        if c == 1:
            return ZERO if op is Op.MOD else a
        if op in _FLOOR_DIVISIONS:
            q, r = _split(a, c)
            if r.is_const():
                return q + r.const // c if op is Op.FLOORDIV else pconst(r.const % c)
            inner = patom(Node(op, (r, b), NumberKind.INT))
            return q + inner if op is Op.FLOORDIV else inner
    if c is None:
        k = _multiple(a, b)
        if k is not None:
            return pconst(0 if op is Op.MOD else k)
        # (only for Python's // and %: thunder's floor division is trunc division minus a sign
        # fix, which _floorfix_args recognizes as a whole; simplifying its "/" alone would hide it)
        q = _monomial_quotient(a, b) if op in _FLOOR_DIVISIONS else None
        if q is not None:  # exact: (x * w) // w is x, (x * w) % w is 0 (w != 0 is required)
            return ZERO if op is Op.MOD else q
    return patom(Node(op, (a, b), NumberKind.INT))


def _monomial_quotient(a: Poly, b: Poly) -> Poly | None:
    """a / b when b is one term ``k * m`` and every term of a is a multiple of it, else None."""
    if len(b.terms) != 1 or not b.terms[0][0]:
        return None
    (bm, bc), = b.terms
    q: dict = {}
    for m, c in a.terms:
        rest = list(m)
        for n in bm:
            if n not in rest:
                return None
            rest.remove(n)
        if c % bc:
            return None
        q[tuple(rest)] = q.get(tuple(rest), 0) + c // bc
    return Poly(q)
