"""Rendering guard expressions: the readable text ``explain`` shows and the Python the prologue runs.

:func:`python_check` is the one emitter of a guard's Python: :class:`metatrace.guards.simplify.SimpleGuard`
and the prologue's program for guards as recorded (``metatrace.guards.compiled_program.GuardProgram``) both
call it. How each operation prints is its row in ``metatrace.metas.number_ops`` (``Op.row``).
"""

from __future__ import annotations

import math
from typing import Any, Callable

from metatrace.metas.algebra_ops import Op

# An expression (``metatrace.guards.simplify.expressions``) is a Poly (``terms``: a polynomial) or
# a Node (``op``, ``args``); this module reads them by shape and imports neither, so that their
# ``repr`` can render them.


def _is_poly(x) -> bool:
    return hasattr(x, "terms")


# Binary operators whose left operand may be an operation of the same precedence unparenthesized
# (``a - b + c``); the others need parentheses there (``(a * b) % n``, ``(a < b) < c``).
_LEFT_ASSOCIATIVE = frozenset({Op.ADD, Op.SUB, Op.MUL, Op.BITAND, Op.BITOR, Op.BITXOR})
# How a polynomial with a negative leading coefficient starts (``-x + y``): as a negation.
_MINUS = Op.NEG.row.python


def _is_name(spelling: str) -> bool:
    return spelling[0].isalpha() or spelling[0] == "_"


def _power_of_two(n: int) -> str | None:
    """``2**53`` for 9007199254740992: how ``explain`` shows a large power of two (float exactness
    bounds), None for any other number."""
    return f"2**{n.bit_length() - 1}" if n >= 2**32 and n & (n - 1) == 0 else None


def render(e, leaf: Callable[[str], str] | None = None, constant: Callable[[Any], str] | None = None,
           python: bool = False) -> tuple[str, int]:
    """(text, precedence) of ``e``; ``python``: source for GuardProgram (leaf -> parameter)."""
    leaf = leaf or (lambda name: name)
    constant = constant or repr

    def paren(x, min_prec: int) -> str:
        text, prec = go(x)
        return text if prec >= min_prec else f"({text})"

    def literal(v) -> tuple[str, int]:
        if type(v) is int and not python and (power := _power_of_two(v)):
            return power, 90
        if type(v) is int or (type(v) is float and math.isfinite(v)):
            return repr(v), (100 if math.copysign(1, v) > 0 else 80)  # -0.0 is a negation too
        return (constant(v) if python else repr(v)), 100

    def go(x) -> tuple[str, int]:
        if _is_poly(x):
            return poly(x)
        op, args = x.op, x.args
        if op is Op.LEAF:
            return leaf(args[0]), 100
        if op is Op.CONST:
            return literal(args[0])
        if op is Op.CONVERT:
            target = constant(args[1].args[0]) if python else getattr(args[1].args[0], "__name__", str(args[1].args[0]))
            return f"{'_convert(' if python else 'convert('}{go(args[0])[0]}, {target})", 100
        row = op.row
        spelling = row.python if python else row.shown
        if "{" in spelling:  # a template: type({0}) in (int, bool)
            return spelling.format(*(go(a)[0] for a in args)), row.prec
        if not _is_name(spelling):  # an operator
            p = row.prec
            if len(args) == 1:
                return f"{spelling}{paren(args[0], p)}", p
            left = p if op in _LEFT_ASSOCIATIVE else p + 1  # (a * b) % n, not a * b % n
            right = p if op is Op.POW else p + 1  # ** groups to the right
            return f"{paren(args[0], left)} {spelling} {paren(args[1], right)}", p
        return f"{spelling}({', '.join(go(a)[0] for a in args)})", 100

    def term(m: tuple, c: int) -> tuple[str, int, bool]:
        """|c| * m: (text, precedence, whether it is a product)"""
        if not m:
            power = None if python else _power_of_two(abs(c))
            return (power, 90, False) if power else (str(abs(c)), 100, False)
        if len(m) == 1 and abs(c) == 1:
            return (*go(m[0]), False)
        factors = [paren(n, 71) for n in m]
        return " * ".join(([str(abs(c))] if abs(c) != 1 else []) + factors), 70, True

    def poly(p) -> tuple[str, int]:
        if not p.terms:
            return "0", 100
        text, prec = "", 100
        for i, (m, c) in enumerate(p.terms):
            body, bp, product = term(m, c)
            if i == 0:
                if c < 0:  # -x * y is (-x) * y: the same value; -(a // b) needs its parentheses
                    text, prec = (_MINUS + body, 70) if product else (_MINUS + (body if bp >= 80 else f"({body})"), 80)
                else:
                    text, prec = body, bp
                if len(p.terms) > 1 and prec < 60:
                    text = f"({text})"
            else:
                text += (" - " if c < 0 else " + ") + (body if bp > 60 else f"({body})")
        return text, (60 if len(p.terms) > 1 else prec)

    return go(e)


def python_check(parts: tuple, param: Callable[[str], str], const: Callable[[Any], str]) -> str:
    """The Python source of a guard: the one emitter of guard Python (GuardProgram compiles it).
    ``parts``: expressions and comparison symbols (:class:`SimpleGuard`, :func:`recorded_parts`)."""
    return " ".join(p if isinstance(p, str) else side_text(render(p, param, const, python=True)) for p in parts)


def side_text(rendered: tuple[str, int]) -> str:
    text, prec = rendered
    return text if prec > 40 else f"({text})"
