"""Checks a rewritten meta makes whose answer cannot change what it does: decided with no guard.

A meta's shape check ``original_length == 1 or shape[idx] == original_length``
(``broadcast_in_dim_meta``) holds for every value of a size that the target shape takes as it is
(the same symbol): the second operand is reflexive. Python evaluates the first operand first, and
its answer on a symbolic size became a guard (``b == 1`` for a batch of 1, ``b != 1`` for
another), splitting the cache between batch 1 and batch n where the trace is the same. Such a
first operand is answered without a guard: from the size's value where the target is the same
symbol (the check passes whatever it says), False where the target is another symbol of the same
value (the check then guards their equality, which holds for 1 as well): torch's size-oblivious
treatment of 1 (``guard_size_oblivious``) for backed sizes at this one site.

Sites, by the generated meta's function name -> the answer read from its frame's locals (None: a
guard decides as usual): listed one by one, since each needs its own reading of the code.
"""

from __future__ import annotations

import sys

from thunder.core.proxies import NumberProxy


def _broadcast_to_the_size(local: dict, size) -> bool | None:
    """``original_length == 1 or shape[idx] == original_length``: with the target the same symbol
    the check holds (no guard, any answer); with another symbol of the same value the answer is
    False, so the check asks the equality of the two (a relational guard, right for 1 as well)."""
    shape, idx = local.get("shape"), local.get("idx")
    if local.get("original_length") is not size:
        return None
    try:
        target = shape[idx]
    except (TypeError, IndexError, KeyError):
        return None
    if target is size:
        return size.value == 1
    if isinstance(target, NumberProxy) and type(target.value) is int and target.value == size.value:
        return False
    return None


_SITES = {"broadcast_in_dim_meta": _broadcast_to_the_size}


def settled(op: str, lhs, rhs, depth: int = 1) -> bool | None:
    """The answer, given without a guard, to ``lhs <op> rhs`` (made in the rewritten meta running
    ``depth`` frames above the caller) where it is the first operand of a check whose outcome it
    cannot change; else None. The caller's frame is read only for ``n == 1`` (every decision of
    every meta passes here)."""
    if op != "eq" or type(rhs) is not int or rhs != 1 or not isinstance(lhs, NumberProxy):
        return None
    frame = sys._getframe(depth + 1)
    site = _SITES.get(frame.f_code.co_name)
    if site is None or not frame.f_code.co_filename.endswith("/metas.py"):
        return None
    return site(frame.f_locals, lhs)
