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
``python(param, const)`` for :class:`metatrace.guards.compiled_program.GuardProgram`.

Modules, the algebra apart from the decision procedure: ``polynomials`` (Node, Poly: the integer
ring, its ``+ - * // %``), ``expressions`` (build: every operation, pure, with its conditions),
``bounds`` (intervals), ``relations`` (canonical relations), ``reduction`` (the decision procedure
and its result) and ``rendering`` (text and Python). ``MERGE_RELATIONS`` is read from
``reduction`` (``metatrace.guards.simplify.reduction.MERGE_RELATIONS``: set it there).
"""

from __future__ import annotations

from metatrace.guards.simplify.bounds import bounds
from metatrace.guards.simplify.expressions import Built, Expr, Node, Poly, build, const
from metatrace.guards.simplify.traversal import recorded_parts, substitute
from metatrace.guards.simplify.reduction import SimpleGuard, simplify
from metatrace.guards.simplify.relations import canonical, relation
from metatrace.guards.simplify.rendering import python_check, render

__all__ = [
    "Built", "Expr", "Node", "Poly", "SimpleGuard", "bounds", "build", "canonical", "const",
    "python_check", "recorded_parts", "relation", "render", "simplify", "substitute",
]
