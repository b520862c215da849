"""Guard simplification: the guards of one cache entry as a small canonical set over the inputs.

What the metas concretize reads badly and costs time when checked as recorded:
``((x.shape[1] * 4) * 2) * 2 == ((x.shape[1] * 4) * 2) * 2``, ``x.shape[0] + (max(0, x.shape[0] - 1)
* 0) >= 0``, ``T > 1`` next to ``T != 0`` and ``T >= 0``. Like torch.compile's ShapeEnv (sympy
expressions over input symbols, value ranges per symbol, replacements from equalities), every
guard side is rebuilt from its producer chain as a canonical expression over the *leaves* (input
numbers and input tensor sizes), and the set is reduced without changing which leaf values it
accepts:

- expressions fold constants and identities and are polynomials with integer coefficients
  (``(x*4)*2*2`` is ``16 * x``, ``x - x`` is 0, ``max(0, x - 1) * 0`` is 0), with floor division
  and remainder by constants normalized (``(x - 2) // 2 + 1`` is ``x // 2``), thunder's int floor
  division (trunc division minus a sign fix) recognized as ``//``, ``n * (a // n)`` as
  ``a - a % n``, and conversions of integral values dropped (``int(float(T) / 1.0)`` is ``T``);
- a relation is ``P >= 0``, ``P == 0`` or ``P != 0`` with P's coefficients divided by their gcd:
  tautologies (``T * 16 == T * 16``) and duplicates disappear;
- an equality that can be solved for a leaf replaces that leaf everywhere else (``B ==
  k.shape[0]``: the other guards speak of ``B`` only); the equality itself stays;
- one range per leaf (``2 <= T <= 127`` from ``T > 1``, ``T < 128``, ``T != 0``, ``T >= 0``);
  ``!=`` stays only where the range does not decide it; a relation that the ranges imply
  (``16 * x.shape[1] >= 0``) is dropped. Tensor sizes are known to be ``>= 0``;
- a division whose divisor could be 0 makes the original guard raise there (a miss): when the
  division folds away (``(4 * n) % n == 0``), ``n != 0`` is kept unless implied (likewise
  ``isfinite(p)`` for ``int(p)`` of a float input);
- a leaf thunder marked static (a module attribute) is its value: thunder's prologue checks it.

Relations between two different bounds of one multi-term form (``i < a.shape[2]`` next to
``i <= a.shape[2]``) are both kept unless ``MERGE_RELATIONS``; single leaves always get one range.

Never weaker: the result accepts exactly the leaf values the original guards accept (counting a
guard that raises as failed). One assumption, as in any shape arithmetic done in floating point:
integers that the guards convert to float are exact in a double (below 2**53 in magnitude).

API: :func:`simplify` returns :class:`SimpleGuard` objects: ``text`` for ``explain`` and
``python(param, const)`` for :class:`metatrace.guards.collect.GuardProgram`.
"""

from __future__ import annotations

import contextvars
import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import thunder.core.dtypes as dtypes
from thunder.core.proxies import FloatProxy, IntegerProxy, NumberProxy

from metatrace.guards.record import Guard, is_leaf as _default_is_leaf, is_static_value
from metatrace.metas import number_ops
from metatrace.metas.number_ops import MIRROR, RELATIONS, SYMBOLS

# Relations between different linear forms with the same terms (``i < a.shape[2]`` and
# ``i <= a.shape[2]``) are merged into the tightest only when True; ranges of single leaves always are.
MERGE_RELATIONS = True

INF = math.inf

# ---------------------------------------------------------------------------------------------
# Expressions: Poly (int-valued: a polynomial over atoms) and Node (an atom, or a float value)
# ---------------------------------------------------------------------------------------------


class Node:
    """A leaf, a constant that is not an int, or an operation the polynomials do not absorb.

    ``typ``: ``"int"`` (ints and bools: such a node only appears inside a :class:`Poly`),
    ``"float"`` or ``"other"``."""

    __slots__ = ("op", "args", "typ", "key", "_hash")

    def __init__(self, op: str, args: tuple, typ: str):
        self.op, self.args, self.typ = op, args, typ
        if op == "leaf":
            self.key = (0, args[1], args[0])  # (name, index): ordered by input position
        elif op == "const":
            self.key = (1, type(args[0]).__name__, repr(args[0]))
        else:
            self.key = (2, op, tuple(a.key for a in args))
        self._hash = hash(self.key)

    def __eq__(self, other):
        return isinstance(other, Node) and self.key == other.key

    def __hash__(self):
        return self._hash

    def __repr__(self):
        return render(self)[0]


class Poly:
    """sum(coefficient * product of int atoms) + constant, integer coefficients, canonical order."""

    __slots__ = ("terms", "key", "_hash")
    typ = "int"

    def __init__(self, terms: dict):
        items = [(m, c) for m, c in terms.items() if c]
        items.sort(key=lambda mc: (not mc[0], tuple(n.key for n in mc[0])))
        self.terms: tuple = tuple(items)
        self.key = (3, tuple((tuple(n.key for n in m), c) for m, c in items))
        self._hash = hash(self.key)

    def __eq__(self, other):
        return isinstance(other, Poly) and self.key == other.key

    def __hash__(self):
        return self._hash

    def __repr__(self):
        return render(self)[0]

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


def padd(a: Poly, b: Poly, k: int = 1) -> Poly:
    """a + k * b"""
    d = dict(a.terms)
    for m, c in b.terms:
        d[m] = d.get(m, 0) + k * c
    return _fold_poly(d)


def pscale(a: Poly, k: int) -> Poly:
    return Poly({m: c * k for m, c in a.terms})


def pmul(a: Poly, b: Poly) -> Poly:
    d: dict = {}
    for m1, c1 in a.terms:
        for m2, c2 in b.terms:
            m = tuple(sorted(m1 + m2, key=lambda n: n.key))
            d[m] = d.get(m, 0) + c1 * c2
    return _fold_poly(d)


def _node_const(e: Expr):
    """The Python value of a constant expression, else None."""
    if isinstance(e, Poly):
        return e.const if e.is_const() else None
    return e.args[0] if e.op == "const" else None


def const(v) -> Expr:
    if type(v) in (int, bool):
        return pconst(v)
    return Node("const", (v,), "float" if type(v) is float else "other")


def _wrap(n: Node) -> Expr:
    return patom(n) if n.typ == "int" else n


def _floorfix_args(n: Node):
    """(a, b) if ``n`` is thunder's sign fix of int floor division:
    ``(signbit(a) != signbit(b)) & (int(fmod(a, b)) != 0)``, which trunc division minus it makes ``a // b``."""
    if n.op != "&":
        return None
    atom = lambda e: e.atom() if isinstance(e, Poly) else None  # noqa: E731
    for first, second in ((0, 1), (1, 0)):
        x, y = atom(n.args[first]), n.args[second]
        if x is None or x.op != "!=":
            continue
        lhs, rhs = x.args
        inner = atom(lhs) if rhs == ZERO else atom(rhs) if lhs == ZERO else None
        if inner is None or inner.op != "int" or not isinstance(inner.args[0], Node) or inner.args[0].op != "fmod":
            continue
        a, b = inner.args[0].args
        if isinstance(a, Poly) and isinstance(b, Poly) and y == build("!=", [build("signbit", [a]), build("signbit", [b])]):
            return a, b
    return None


def _fold_poly(d: dict) -> Poly:
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
                    twin = tuple(sorted(rest + (Node("div", ab, "int"),), key=lambda x: x.key))
                    if d.get(twin) == -c:
                        del d[m], d[twin]
                        _merge(d, pmul(Poly({rest: -c}), build("//", list(ab))))
                        changed = True
                        break
                if n.op == "//" and isinstance(n.args[1], Poly):
                    div = n.args[1]
                    if len(div.terms) == 1 and div.terms[0][0] and c % div.terms[0][1] == 0:
                        dm, dc = div.terms[0]
                        left = list(rest)
                        if all(x in left and (left.remove(x) or True) for x in dm):
                            a = n.args[0]
                            del d[m]
                            # c * rest * (a // div) = (c / dc) * rest' * (a - a % div)
                            _merge(d, pmul(Poly({tuple(left): c // dc}), padd(a, build("%", [a, div]), -1)))
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


# ---------------------------------------------------------------------------------------------
# Building expressions: constant folding and identities, per operation
# ---------------------------------------------------------------------------------------------

# What the prologue runs (as GuardProgram compiles them): used to fold constants.
_EVAL: dict[str, Callable] = {op: row.evaluate for op, row in number_ops.BY_OP.items()}
# The producers the prologue replays, as operations of this algebra.
_FROM_PRIM = {sym_id: row.op for sym_id, row in number_ops.REPLAYABLE.items()}
_COMPARE = tuple(SYMBOLS.values())  # the comparison operations: "==", "!=", "<", ...
_MIRROR = {SYMBOLS[rel]: SYMBOLS[mirror] for rel, mirror in MIRROR.items()}  # "<" -> ">": operands swapped
_DIVIDING = ("//", "%", "div", "fmod")


def _target(to) -> type | None:
    """The Python type ``convert(x, to)`` produces."""
    if isinstance(to, type):
        return to
    try:
        return dtypes.dtype_to_numbertype(to)
    except Exception:
        return None


def _is_float_of_int(e: Expr) -> bool:
    return isinstance(e, Node) and e.op == "float" and isinstance(e.args[0], Poly)


def as_float(e: Expr) -> Expr:
    """``float(e)`` as a value: the same number (the 2**53 assumption)."""
    if isinstance(e, Node):
        return e
    if e.is_const():
        return const(float(e.const))
    return Node("float", (e,), "float")


def _int_of(e: Expr) -> Poly | None:
    """An int polynomial with the value of ``e`` if there is one: ``float(P)`` is P, 2.0 is 2."""
    if isinstance(e, Poly):
        return e
    if _is_float_of_int(e):
        return e.args[0]
    v = _node_const(e)
    if type(v) is float and math.isfinite(v) and v == int(v):
        return pconst(int(v))
    return None


# What an operation needs not to raise, seen while building (``e``: ``e != 0`` must hold): a
# division's divisor, ``isfinite(x)`` for ``int(x)`` of a float. The original guard raises
# (fails) where one does not hold, so it must still be checked where the operation folded away.
_CONDITIONS: contextvars.ContextVar[list | None] = contextvars.ContextVar("metatrace_conditions", default=None)


def _require(e: Expr) -> None:
    conditions = _CONDITIONS.get()
    if conditions is not None and not _node_const(e):  # a constant 0 too: then it never holds
        conditions.append(e)


def _float_source(e: Expr) -> bool:
    """A value that can be inf or nan: one computed from a float input or a non-finite constant
    (floats computed from ints are finite, the 2**53 assumption)."""
    if isinstance(e, Poly):
        return False
    if e.op == "leaf":
        return e.typ != "int"
    if e.op == "const":
        return not (type(e.args[0]) in (int, bool) or (type(e.args[0]) is float and math.isfinite(e.args[0])))
    return any(_float_source(a) for a in (e.args[:1] if e.op == "convert" else e.args))


def build(op: str, args: list) -> Expr:
    """The expression ``op(*args)``, folded."""
    values = [_node_const(a) for a in args]
    if op != "convert" and all(v is not None for v in values) and op in _EVAL:
        try:
            return const(_EVAL[op](*values))
        except Exception:
            pass  # keeps the raising operation
    if op in _DIVIDING:
        _require(args[1])
    if op == "**":  # 0 ** -1 raises
        _require(build("|", [build("!=", [args[0], ZERO]), build(">=", [args[1], ZERO])]))
    if op in ("&", "|", "^"):  # a float operand raises TypeError
        for x in args:
            if x.typ != "int":
                _require(ZERO if _surely_float(x) else build("isint", [x]))
    if op in ("int", "ceil", "floor", "trunc", "fmod") and _float_source(args[0]):
        _require(build("isfinite", [args[0]]))
    ints = all(isinstance(a, Poly) for a in args)
    a = args[0]
    b = args[1] if len(args) > 1 else None

    if op == "+":
        if ints:
            return padd(a, b)
        return _float_arith(op, a, b)
    if op == "-":
        if ints:
            return padd(a, b, -1)
        return _float_arith(op, a, b)
    if op == "*":
        if ints:
            return pmul(a, b)
        return _float_arith(op, a, b)
    if op == "neg":
        if isinstance(a, Poly):
            return pscale(a, -1)
        if _is_float_of_int(a):
            return as_float(pscale(a.args[0], -1))
        return Node("neg", (a,), a.typ)
    if op in ("//", "%", "div") and ints:
        return _int_division(op, a, b)
    if op == "div":
        if _node_const(b) in (1, 1.0) and a.typ != "other":
            return as_float(a)
        return Node("div", (a, b), "float")
    if op in ("max", "min") and ints:
        d = padd(a, b, -1)
        if d.is_const():
            return a if (d.const >= 0) == (op == "max") else b
        return patom(Node(op, tuple(sorted((a, b), key=lambda x: x.key)), "int"))
    if op == "abs" and ints:
        return patom(Node("abs", (a,), "int"))
    if op == "**":
        if ints and b.is_const() and 0 <= b.const <= 8:
            out = ONE
            for _ in range(b.const):
                out = pmul(out, a)
            return out
        return Node("**", (a, b), "other")  # can raise (0 ** -1): never folded into a polynomial
    if op in ("ceil", "floor", "trunc"):
        p = _int_of(a)
        if p is not None and (isinstance(a, Poly) or _is_float_of_int(a)):
            return p
        return patom(Node(op, (a,), "int"))
    if op == "convert":
        to = _target(_node_const(b))
        if to is None:
            return _opaque(op, args)
        return build(to.__name__, [a]) if to in (int, float, bool) else _opaque(op, args)
    if op == "int":
        if isinstance(a, Poly):
            return a
        if _is_float_of_int(a):
            return a.args[0]
        if a.op in ("ceil", "floor", "trunc"):
            return patom(a)
        return patom(Node("int", (a,), "int"))
    if op == "float":
        if isinstance(a, Poly):
            return as_float(a)
        return a if a.typ == "float" else Node("float", (a,), "float")
    if op == "bool":
        return build("!=", [a, ZERO])
    if op == "signbit" and a.typ != "other":
        return patom(Node("signbit", (a,), "int"))
    if op == "isint":
        return ONE if isinstance(a, Poly) else ZERO if _surely_float(a) else patom(Node("isint", (a,), "int"))
    if op == "isfinite":
        return patom(Node("isfinite", (a,), "int"))
    if op in _COMPARE:
        if a.key > b.key:
            a, b, op = b, a, _MIRROR[op]
        if a == b and a.typ == "int":
            return pconst(op in ("==", "<=", ">="))
        return patom(Node(op, (a, b), "int"))
    if op in ("&", "|", "^") and ints:
        a, b = sorted((a, b), key=lambda x: x.key)  # a constant sorts last
        if b == ZERO:
            return ZERO if op == "&" else a
        if a == b:
            return ZERO if op == "^" else a
        if b == ONE and _is_bool(a) and op in ("&", "|"):
            return a if op == "&" else ONE
        return patom(Node(op, (a, b), "int"))
    return _opaque(op, args)


def _surely_float(e: Expr) -> bool:
    """Whether ``e`` is a float whatever the leaves (``max(-1, p)`` may be the int -1)."""
    if isinstance(e, Poly) or e.typ != "float":
        return False
    if e.op in ("leaf", "const", "float", "fmod"):
        return True
    if e.op in ("max", "min"):
        return all(_surely_float(a) for a in e.args)
    return any(_surely_float(a) for a in e.args)  # + - * / // % neg abs: float if an operand is


def _is_bool(p: Poly) -> bool:
    n = p.atom()
    return n is not None and (n.op in _COMPARE or n.op in ("signbit", "isfinite", "isint"))


def _opaque(op: str, args: list) -> Expr:
    typ = "other" if any(a.typ == "other" for a in args) else "float" if any(a.typ == "float" for a in args) else "int"
    if op in ("fmod", "float"):
        typ = "float" if typ != "other" else typ
    return _wrap(Node(op, tuple(args), typ))


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
    return ratio if a == pscale(b, ratio) else None


def _int_division(op: str, a: Poly, b: Poly) -> Poly:
    c = b.const if b.is_const() else None
    if c is not None and c != 0:
        if c < 0:
            if op == "//":
                return _int_division(op, pscale(a, -1), pconst(-c))
            if op == "%":
                return pscale(_int_division(op, pscale(a, -1), pconst(-c)), -1)
            return pscale(_int_division(op, a, pconst(-c)), -1)  # trunc division is odd
        if c == 1:
            return ZERO if op == "%" else a
        if op in ("//", "%"):
            q, r = _split(a, c)
            if r.is_const():
                return _const_rem(op, q, r, c)
            inner = patom(Node(op, (r, b), "int"))
            return padd(q, inner) if op == "//" else inner
    if c is None:
        k = _multiple(a, b)
        if k is not None:
            return pconst(0 if op == "%" else k)
        # (only for Python's // and %: thunder's floor division is trunc division minus a sign
        # fix, which _floorfix_args recognizes as a whole; simplifying its "/" alone would hide it)
        q = _monomial_quotient(a, b) if op in ("//", "%") else None
        if q is not None:  # exact: (x * w) // w is x, (x * w) % w is 0 (w != 0 is required)
            return ZERO if op == "%" else q
    return patom(Node(op, (a, b), "int"))


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


def _const_rem(op: str, q: Poly, r: Poly, c: int) -> Poly:
    return padd(q, pconst(r.const // c)) if op == "//" else pconst(r.const % c)


def _float_arith(op: str, a: Expr, b: Expr) -> Expr:
    """+, -, * with a float operand: identities, and exact integer arithmetic under ``float``."""
    va, vb = _node_const(a), _node_const(b)
    if op in ("+", "-") and vb == 0 and a.typ != "other":
        return as_float(a)
    if op == "+" and va == 0 and b.typ != "other":
        return as_float(b)
    if op == "*" and vb == 1 and a.typ != "other":
        return as_float(a)
    if op == "*" and va == 1 and b.typ != "other":
        return as_float(b)
    pa, pb = _int_of(a), _int_of(b)
    if pa is not None and pb is not None:
        return as_float(build(op, [pa, pb]))  # the 2**53 assumption: float(p) op float(q) is float(p op q)
    if op in ("+", "*"):
        a, b = sorted((a, b), key=lambda x: x.key)
    return Node(op, (a, b), "other" if "other" in (a.typ, b.typ) else "float")


# ---------------------------------------------------------------------------------------------
# Interval bounds of int expressions
# ---------------------------------------------------------------------------------------------


def _imul(a: tuple, b: tuple) -> tuple:
    if a == (0, 0) or b == (0, 0):
        return (0, 0)
    prods = [x * y if x and y else 0 for x in a for y in b]
    return (min(prods), max(prods))


def bounds(e: Expr, ranges: dict[str, tuple]) -> tuple:
    """(lo, hi) of an int expression given leaf ranges; ±inf where unknown."""
    if isinstance(e, Poly):
        lo = hi = 0
        for m, c in e.terms:
            iv = (c, c)
            for n in m:
                iv = _imul(iv, _node_bounds(n, ranges))
            lo, hi = lo + iv[0], hi + iv[1]
        return lo, hi
    return _node_bounds(e, ranges) if e.typ == "int" else (-INF, INF)


def _node_bounds(n: Node, ranges) -> tuple:
    if n.op == "leaf":
        return ranges.get(n.args[0], (-INF, INF))
    if n.op in _COMPARE or n.op in ("signbit", "isfinite", "isint"):
        return (0, 1)
    args = [bounds(a, ranges) if isinstance(a, (Poly, Node)) else (-INF, INF) for a in n.args]
    if n.op in ("max", "min"):
        f = max if n.op == "max" else min
        return (f(args[0][0], args[1][0]), f(args[0][1], args[1][1]))
    if n.op == "abs":
        lo, hi = args[0]
        if lo >= 0:
            return (lo, hi)
        if hi <= 0:
            return (-hi, -lo)
        return (0, max(-lo, hi))
    if n.op == "//" and args[1][0] > 0:
        (lo, hi), (dlo, dhi) = args
        cands = [x / y for x in (lo, hi) for y in (dlo, dhi) if not (math.isinf(x) and math.isinf(y))]
        return (math.floor(min(cands)) if lo > -INF else -INF, math.floor(max(cands)) if hi < INF else INF)
    if n.op == "%" and args[1][0] > 0:
        return (0, args[1][1] - 1)
    if n.op in ("&", "|", "^") and all(0 <= lo and hi <= 1 for lo, hi in args):
        return (0, 1)
    return (-INF, INF)


# ---------------------------------------------------------------------------------------------
# Rendering: readable text and the Python the prologue runs
# ---------------------------------------------------------------------------------------------

# Binary operators whose left operand may be an operation of the same precedence unparenthesized
# (``a - b + c``); the others need parentheses there (``(a * b) % n``, ``(a < b) < c``).
_LEFT_ASSOCIATIVE = frozenset({"+", "-", "*", "&", "|", "^"})


def _is_name(spelling: str) -> bool:
    return spelling[0].isalpha() or spelling[0] == "_"


def render(e: Expr, leaf: Callable[[str], str] | None = None, constant: Callable[[Any], str] | None = None,
           python: bool = False) -> tuple[str, int]:
    """(text, precedence) of ``e``; ``python``: source for GuardProgram (leaf -> parameter)."""
    leaf = leaf or (lambda name: name)
    constant = constant or repr

    def paren(x: Expr, min_prec: int) -> str:
        text, prec = go(x)
        return text if prec >= min_prec else f"({text})"

    def literal(v) -> tuple[str, int]:
        if type(v) is int or (type(v) is float and math.isfinite(v)):
            return repr(v), (100 if math.copysign(1, v) > 0 else 80)  # -0.0 is a negation too
        return (constant(v) if python else repr(v)), 100

    def go(x: Expr) -> tuple[str, int]:
        if isinstance(x, Poly):
            return poly(x)
        op, args = x.op, x.args
        if op == "leaf":
            return leaf(args[0]), 100
        if op == "const":
            return literal(args[0])
        if op == "convert":
            target = constant(args[1].args[0]) if python else getattr(args[1].args[0], "__name__", str(args[1].args[0]))
            return f"{'_convert(' if python else 'convert('}{go(args[0])[0]}, {target})", 100
        row = number_ops.BY_OP.get(op)
        spelling = op if row is None else row.python if python else row.shown
        if "{" in spelling:  # a template: type({0}) in (int, bool)
            return spelling.format(*(go(a)[0] for a in args)), row.prec
        if not _is_name(spelling):  # an operator
            p = row.prec
            if len(args) == 1:
                return f"{spelling}{paren(args[0], p)}", p
            left = p if op in _LEFT_ASSOCIATIVE else p + 1  # (a * b) % n, not a * b % n
            right = p if op == "**" else p + 1  # ** groups to the right
            return f"{paren(args[0], left)} {spelling} {paren(args[1], right)}", p
        return f"{spelling}({', '.join(go(a)[0] for a in args)})", 100

    def term(m: tuple, c: int) -> tuple[str, int, bool]:
        """|c| * m: (text, precedence, whether it is a product)"""
        if not m:
            return str(abs(c)), 100, False
        if len(m) == 1 and abs(c) == 1:
            return (*go(m[0]), False)
        factors = [paren(n, 71) for n in m]
        return " * ".join(([str(abs(c))] if abs(c) != 1 else []) + factors), 70, True

    def poly(p: Poly) -> tuple[str, int]:
        if not p.terms:
            return "0", 100
        text, prec = "", 100
        for i, (m, c) in enumerate(p.terms):
            body, bp, product = term(m, c)
            if i == 0:
                if c < 0:  # -x * y is (-x) * y: the same value; -(a // b) needs its parentheses
                    text, prec = ("-" + body, 70) if product else (f"-{body if bp >= 80 else f'({body})'}", 80)
                else:
                    text, prec = body, bp
                if len(p.terms) > 1 and prec < 60:
                    text = f"({text})"
            else:
                text += (" - " if c < 0 else " + ") + (body if bp > 60 else f"({body})")
        return text, (60 if len(p.terms) > 1 else prec)

    return go(e)


# ---------------------------------------------------------------------------------------------
# Relations
# ---------------------------------------------------------------------------------------------


@dataclass
class _Rel:
    """A canonical relation. ``op`` "ge"/"eq"/"ne": ``poly op 0``, poly's non-constant
    coefficients coprime (and the first positive for eq/ne); "raw": ``lhs rop rhs``."""

    op: str
    poly: Poly | None = None
    lhs: Expr | None = None
    rop: str = ""
    rhs: Expr | None = None
    implicit: bool = False  # a divisor's ``!= 0``: dropped where a kept guard divides by it
    order: int = 0
    solved: str | None = None  # "eq" solved for this leaf (substituted everywhere else)
    strict: bool = False  # a "ge" written as > or < (flag > 5 shows as it was written)

    def key(self):
        if self.op == "raw":
            return ("raw", self.lhs.key, self.rop, self.rhs.key)
        return (self.op, self.poly.key)

    def exprs(self) -> list[Expr]:
        return [self.poly] if self.op != "raw" else [self.lhs, self.rhs]


_TO_GE = {"ge": (1, 0), "gt": (1, -1), "le": (-1, 0), "lt": (-1, -1)}
_SYM = SYMBOLS  # relation name -> symbol: "lt" -> "<"
_FROM_SYM = RELATIONS  # "<" -> "lt"


def canonical(op: str, p: Poly) -> _Rel | bool:
    """``p op 0`` as a canonical relation, or True/False when it always/never holds."""
    strict = op in ("gt", "lt")
    if op in _TO_GE:
        sign, shift = _TO_GE[op]
        p, op = padd(pscale(p, sign), pconst(shift)), "ge"
    lin, c = p.linear(), p.const
    if not lin.terms:
        return {"ge": c >= 0, "eq": c == 0, "ne": c != 0}[op]
    g = math.gcd(*(k for _, k in lin.terms))
    if op == "ge":
        return _Rel("ge", padd(Poly({m: k // g for m, k in lin.terms}), pconst(c // g)), strict=strict and g == 1)
    if c % g:
        return op == "ne"
    sign = 1 if lin.terms[0][1] > 0 else -1
    return _Rel(op, Poly({m: sign * k // g for m, k in p.terms}))


def relation(op: str, lhs: Expr, rhs: Expr) -> _Rel | bool:
    """``lhs op rhs`` (op: eq, ne, lt, le, gt, ge) as a canonical relation."""
    pl, pr = _int_of(lhs), _int_of(rhs)
    if pl is not None and pr is not None:
        return canonical(op, padd(pl, pr, -1))
    for p, other, o in ((pl, rhs, op), (pr, lhs, _FROM_SYM[_MIRROR[_SYM[op]]])):
        v = _node_const(other)
        if p is not None and type(v) is float and math.isfinite(v):  # int p against a fractional float
            if o in ("eq", "ne"):
                return o == "ne"
            bound = {"ge": math.ceil(v), "gt": math.floor(v) + 1, "le": math.floor(v), "lt": math.ceil(v) - 1}[o]
            return canonical("ge" if o in ("ge", "gt") else "le", padd(p, pconst(bound), -1))
    sym = _SYM[op]
    if lhs.key > rhs.key:
        lhs, rhs, sym = rhs, lhs, _MIRROR[sym]
    if lhs == rhs and lhs.typ == "int":
        return sym in ("==", "<=", ">=")
    return _Rel("raw", lhs=lhs, rop=sym, rhs=rhs)


# ---------------------------------------------------------------------------------------------
# Substitution
# ---------------------------------------------------------------------------------------------


def substitute(e: Expr, sub: dict[str, Expr], memo: dict | None = None) -> Expr:
    """``e`` with leaves replaced (by name), rebuilt through :func:`build` so it folds again."""
    memo = {} if memo is None else memo
    if e.key in memo:
        return memo[e.key]
    if isinstance(e, Poly):
        out = ZERO
        for m, c in e.terms:
            t = pconst(c)
            for n in m:
                x = substitute(n, sub, memo)
                assert isinstance(x, Poly), "an int atom rebuilds as an int polynomial"
                t = pmul(t, x)
            out = padd(out, t)
    elif e.op == "leaf":
        out = sub.get(e.args[0], _wrap(e))
    elif e.op == "const":
        out = e
    else:
        out = build(e.op, [substitute(a, sub, memo) for a in e.args])
    memo[e.key] = out
    return out


def _leaves_of(e: Expr, out: set | None = None) -> set:
    out = set() if out is None else out
    if isinstance(e, Poly):
        for m, _ in e.terms:
            for n in m:
                _leaves_of(n, out)
    elif e.op == "leaf":
        out.add(e.args[0])
    elif e.op != "const":
        for a in e.args:
            _leaves_of(a, out)
    return out


def _covered(e: Expr, out: set) -> None:
    """Keys of the conditions that a guard evaluating ``e`` checks by raising where they fail:
    ``d != 0`` for each divisor ``d``, ``isfinite(x)`` for ``int(x)`` of a float ``x``."""
    if isinstance(e, Poly):
        for m, _ in e.terms:
            for n in m:
                _covered(n, out)
        return
    if e.op in ("leaf", "const"):
        return
    needs = []
    if e.op in _DIVIDING:
        needs.append(e.args[1])
    if e.op in ("int", "ceil", "floor", "trunc", "fmod") and _float_source(e.args[0]):
        needs.append(build("isfinite", [e.args[0]]))
    for x in needs:
        r = relation("ne", x, ZERO)
        if isinstance(r, _Rel):
            out.add(r.key())
    for a in e.args:
        _covered(a, out)


# ---------------------------------------------------------------------------------------------
# The result
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SimpleGuard:
    """One simplified guard. ``parts`` alternate expressions and comparison symbols
    (``(2, "<=", T, "<=", 127)``); ``text``: as ``explain`` shows it; ``leaves``: the names of
    the leaf proxies it reads."""

    parts: tuple
    text: str
    leaves: tuple

    def python(self, param: Callable[[str], str], const: Callable[[Any], str]) -> str:
        """Python source of the check: ``param(leaf name)`` is the parameter holding that leaf,
        ``const(value)`` names a constant that has no literal."""
        return python_check(self.parts, param, const)


def python_check(parts: tuple, param: Callable[[str], str], const: Callable[[Any], str]) -> str:
    """The Python source of a guard: the one emitter of guard Python (GuardProgram compiles it).
    ``parts``: expressions and comparison symbols (:class:`SimpleGuard`, :func:`recorded_parts`)."""
    return " ".join(p if isinstance(p, str) else _side(render(p, param, const, python=True)) for p in parts)


def recorded_parts(guard: Guard, producers: dict[str, Any], is_param: Callable[[str], bool]) -> tuple:
    """A guard as recorded, unsimplified, as :func:`python_check` parts: its operands' producer
    chains, each producer one operation (``is_param(name)``: the number is a parameter, a leaf)."""

    def unfolded(x) -> Expr:
        if isinstance(x, NumberProxy) and is_static_value(x) and not is_param(x.name):
            x = x.value
        if not isinstance(x, NumberProxy):
            return Node("const", (x,), "other")
        if is_param(x.name):
            return Node("leaf", (x.name, 0), "other")
        bsym = producers[x.name]
        return Node(number_ops.REPLAYABLE[bsym.sym.id].op, tuple(unfolded(a) for a in bsym.flat_args), "other")

    return (unfolded(guard.lhs), SYMBOLS[guard.op], unfolded(guard.rhs))


def _side(rendered: tuple[str, int]) -> str:
    text, prec = rendered
    return text if prec > 40 else f"({text})"


def _make(parts: tuple, show: Callable[[str], str]) -> SimpleGuard:
    text = " ".join(p if isinstance(p, str) else _side(render(p, show)) for p in parts)
    leaves: set = set()
    for p in parts:
        if not isinstance(p, str):
            _leaves_of(p, leaves)
    return SimpleGuard(parts, text, tuple(sorted(leaves)))


# ---------------------------------------------------------------------------------------------
# simplify
# ---------------------------------------------------------------------------------------------


class _Builder:
    """Guard operands as expressions over the leaves, through their producers."""

    def __init__(self, producers, order, is_leaf, static_leaves):
        self.producers = producers
        self.index = {name: i for i, name in enumerate(order)}
        self.is_leaf = is_leaf
        self.static_leaves = static_leaves
        self.memo: dict[str, Expr] = {}

    def expr(self, x) -> Expr:
        if not isinstance(x, NumberProxy):
            return const(x)
        e = self.memo.get(x.name)
        if e is None:
            if self.is_leaf(x) and self.static_leaves and x.is_static_constrained() and x.value is not None:
                e = const(x.value)  # thunder's prologue checks a static input's value itself
            elif self.is_leaf(x):
                typ = "int" if isinstance(x, IntegerProxy) else "float" if isinstance(x, FloatProxy) else "other"
                self.index.setdefault(x.name, len(self.index))
                e = _wrap(Node("leaf", (x.name, self.index[x.name]), typ))
            elif is_static_value(x):
                e = const(x.value)
            else:
                bsym = self.producers[x.name]
                e = build(_FROM_PRIM[bsym.sym.id], [self.expr(a) for a in bsym.flat_args])
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
    :func:`metatrace.guards.collect.project`, with the same ``is_leaf``). ``leaves``: leaf proxies or
    names in input order (when an equality relates two leaves the earlier one stays);
    ``names``: display names (``T``, ``idx.shape[1]``); ``sizes``: names of the leaves that are
    tensor sizes (known ``>= 0``); ``static_leaves``: a leaf thunder marked static is its value
    (thunder's own prologue checks it, as for the guards dropped for having only static leaves).
    Compile the result with ``GuardProgram(id, simple,
    [g.text for g in simple], leaves, producers)``.
    """
    names = names or {}
    builder = _Builder(producers, [getattr(p, "name", p) for p in leaves], is_leaf, static_leaves)
    rels: list[_Rel] = []
    conditions: list[Expr] = []
    token = _CONDITIONS.set(conditions)
    try:
        for i, g in enumerate(guards):
            _add(rels, relation(g.op, builder.expr(g.lhs), builder.expr(g.rhs)), i)
    finally:
        _CONDITIONS.reset(token)
    for e in conditions:
        _add(rels, relation("ne", e, ZERO), len(rels) + 1_000_000, implicit=True)
    return _reduce(rels, set(sizes), lambda n: names.get(n, n))


def _never() -> _Rel:
    """A relation that never holds (not expected: every guard held when the entry was traced)."""
    return _Rel("raw", lhs=ZERO, rop="!=", rhs=ZERO)


def _add(rels: list, r, order: int, implicit: bool = False) -> None:
    if r is True:
        return
    r = _never() if r is False else r
    r.order, r.implicit = order, implicit
    rels.append(r)


def _leaf_of(n: Node | None) -> str | None:
    return n.args[0] if n is not None and n.op == "leaf" and n.typ == "int" else None


def _dedupe(rels: list[_Rel]) -> list[_Rel]:
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


def _apply(rels: list[_Rel], sub: dict[str, Expr], keep: _Rel) -> list[_Rel]:
    """Every relation but ``keep`` with the substitution applied, folded again."""
    memo: dict = {}
    out = []
    for r in rels:
        if r is keep:
            out.append(r)
            continue
        if r.solved:
            new = _Rel("eq", substitute(r.poly, sub, memo), solved=r.solved)
        elif r.op == "raw":
            new = relation(_FROM_SYM[r.rop], substitute(r.lhs, sub, memo), substitute(r.rhs, sub, memo))
        else:
            new = canonical(r.op, substitute(r.poly, sub, memo))
            if isinstance(new, _Rel) and new.op == "ge":
                new.strict = r.strict and new.poly.linear() == r.poly.linear()
        _add(out, new, r.order, r.implicit)
    return out


def _solve(r: _Rel) -> tuple[Node, Poly] | None:
    """(leaf, value) if ``r`` is an equality that can be solved for a leaf: the latest input's."""
    if r.op != "eq" or r.solved:
        return None
    best = None
    for m, c in r.poly.terms:
        if len(m) == 1 and abs(c) == 1 and _leaf_of(m[0]) is not None:
            rest = Poly({mm: cc for mm, cc in r.poly.terms if mm != m})
            if m[0].args[0] in _leaves_of(rest):
                continue
            if best is None or m[0].key > best[0].key:
                best = (m[0], pscale(rest, -c))  # c * x + rest == 0  ->  x == -rest / c
    return best


def _eliminate(rels: list[_Rel]) -> list[_Rel]:
    """Solve equalities for leaves and substitute them everywhere else, until none is left."""
    while True:
        for r in rels:
            s = _solve(r)
            if s is not None:
                leaf, value = s
                r.solved, r.poly = leaf.args[0], padd(patom(leaf), value, -1)
                rels = _dedupe(_apply(rels, {leaf.args[0]: value}, keep=r))
                break
        else:
            return rels


def _reduce(rels: list[_Rel], sizes: set[str], show) -> list[SimpleGuard]:
    leaf_nodes: dict[str, Node] = {}
    for r in rels:
        for e in r.exprs():
            _leaf_nodes(e, leaf_nodes)
    rels = _dedupe(rels)
    for _ in range(1000):
        rels = _eliminate(rels)
        ranges, rels, pinned, strict = _ranges(rels, sizes)
        if pinned is None:
            break
        rels.append(pinned)  # a range of one value: an equality, solved in the next round
    return _output(rels, ranges, strict, sizes, leaf_nodes, show)


def _group(r: _Rel) -> tuple[Poly, int, int] | None:
    """(L, s, c) with r's poly ``s * L + c``: L linear with a positive first coefficient, s = ±1."""
    if r.op == "raw" or r.solved:
        return None
    lin = r.poly.linear()
    s = 1 if lin.terms[0][1] > 0 else -1
    return (pscale(lin, s), s, r.poly.const)


def _ranges(rels: list[_Rel], sizes: set[str]):
    """One range per leaf from the relations on that leaf alone (``!=`` at an end tightens it).

    Returns (leaf ranges, the other relations plus the ``!=`` inside a range, an equality when a
    range holds one value: then the relations are returned unchanged but for that leaf's, and
    for each range whether its bounds were written strict)."""
    lo: dict[str, float] = {}
    hi: dict[str, float] = {}
    strict: dict[str, list] = {}  # name -> [lower bound strict, upper bound strict]
    points: dict[str, dict] = {}  # name -> {excluded value: (all implicit, order)}
    leaf: dict[str, Node] = {}
    rest = []
    for r in rels:
        g = _group(r)
        name = _leaf_of(g[0].atom()) if g is not None and r.op != "eq" else None
        if name is None:
            rest.append(r)
            continue
        _, s, c = g
        leaf[name] = g[0].atom()
        if r.op == "ge":  # x >= -c  or  -x + c >= 0: x <= c
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
            return ranges, [_never()], None, strict
        if a == b:
            others = [r for r in rels if r.op == "eq" or _leaf_of(g[0].atom() if (g := _group(r)) else None) != name]
            return ranges, others, _Rel("eq", padd(patom(node), pconst(a), -1), order=-1), strict
        ranges[name] = (a, b)
        for k, (implicit, order) in excluded.items():
            if a < k < b:
                rest.append(_Rel("ne", padd(patom(node), pconst(k), -1), implicit=implicit, order=order))
    return ranges, rest, None, strict


def _output(rels: list[_Rel], ranges: dict, strict: dict, sizes: set[str], leaf_nodes: dict, show) -> list[SimpleGuard]:
    kept: list[_Rel] = []
    groups: dict = {}
    for r in rels:
        g = _group(r)
        if g is not None:
            L, s, c = g
            b_lo, b_hi = bounds(L, ranges)
            if r.op == "ge" and (b_lo >= -c if s > 0 else b_hi <= c):
                continue  # the ranges imply it
            if r.op == "ne" and not b_lo <= -c * s <= b_hi:
                continue  # the ranges decide it
            if r.op == "eq" and b_lo == b_hi == -c * s:
                continue
            groups.setdefault(L.key, []).append((r, s, c))
        kept.append(r)
    # relations on one linear form: a "!=" outside the bounds goes; bounds merge when asked
    drop = set()
    for members in groups.values():
        low = max((-c for r, s, c in members if r.op == "ge" and s > 0), default=-INF)
        high = min((c for r, s, c in members if r.op == "ge" and s < 0), default=INF)
        for r, s, c in members:
            if r.op == "ne" and not low <= -c * s <= high:
                drop.add(id(r))
            if MERGE_RELATIONS and r.op == "ge" and (-c < low if s > 0 else c > high):
                drop.add(id(r))
    kept = [r for r in kept if id(r) not in drop]
    # an operation's condition goes where a kept guard checks it by raising
    covered: set = set()
    for r in kept:
        if not r.implicit:
            for e in r.exprs():
                _covered(e, covered)
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
            parts = (pconst(a), "<=", x, "<=", pconst(b))
        elif a_shown is not None:  # as written: flag > 5, T >= 2
            parts = (x, ">", pconst(a - 1)) if strict.get(name, (False,))[0] else (x, ">=", pconst(a))
        else:
            parts = (x, "<", pconst(b + 1)) if strict.get(name, (False, False))[1] else (x, "<=", pconst(b))
        out.append(((1, node.key), parts))
    for r in kept:
        if r.solved:
            out.append(((0, leaf_nodes[r.solved].key), _solved_parts(r, leaf_nodes[r.solved])))
        else:
            out.append(((2, r.order), _parts(r, sizes)))
    out.sort(key=lambda x: x[0])
    return [_make(parts, show) for _, parts in out]


def _leaf_nodes(e: Expr, out: dict) -> None:
    if isinstance(e, Poly):
        for m, _ in e.terms:
            for n in m:
                _leaf_nodes(n, out)
    elif e.op == "leaf":
        out.setdefault(e.args[0], e)
    elif e.op != "const":
        for a in e.args:
            _leaf_nodes(a, out)


def _first(p: Poly, sizes: set[str]) -> tuple:
    """Which side of a relation goes left: the one with an input number (``i <= a.shape[2]``),
    else with the earliest input (``T < mask.shape[2]``)."""
    keys = [(n.op != "leaf" or n.args[0] in sizes, n.key) for m, _ in p.terms for n in m]
    return min(keys) if keys else (True, (9,))


def _solved_parts(r: _Rel, leaf: Node) -> tuple:
    x = patom(leaf)
    value = padd(x, r.poly, -1)  # poly is x - value
    other = value.atom()
    if other is not None and other.op == "leaf" and other.key < leaf.key:
        return (value, "==", x)  # B == k.shape[0]: the earlier input on the left
    return (x, "==", value)


def _parts(r: _Rel, sizes: set[str]) -> tuple:
    if r.op == "raw":
        return (r.lhs, r.rop, r.rhs)
    p = r.poly
    pos = Poly({m: c for m, c in p.terms if m and c > 0})
    neg = Poly({m: -c for m, c in p.terms if m and c < 0})
    c = p.const
    sym = {"ge": ">=", "eq": "==", "ne": "!="}[r.op]
    if r.op == "ne" and c == 0 and not neg.terms and (a := pos.atom()) is not None and a.op in ("isfinite", "isint"):
        return (pos,)
    if not neg.terms:  # pos + c op 0  ->  pos op -c
        return (pos, sym, pconst(-c))
    if not pos.terms:  # -neg + c op 0  ->  neg op' c
        return (neg, _MIRROR[sym], pconst(c))
    if r.op == "ge" and c == -1:
        c, sym = 0, ">"
    if c > 0:  # a constant goes right: j <= i + 10
        return (neg, _MIRROR[sym], padd(pos, pconst(c)))
    if c < 0:
        return (pos, sym, padd(neg, pconst(-c)))
    if _first(neg, sizes) < _first(pos, sizes):
        return (neg, _MIRROR[sym], pos)
    return (pos, sym, neg)
