"""Checks a rewritten meta makes whose answer cannot change what it does: decided with no guard.

A meta's shape check ``original_length == 1 or shape[idx] == original_length``
(``broadcast_in_dim_meta``) holds for every value of a size that the target shape takes as it is
(the same symbol): the second operand is reflexive. Python evaluates the first operand first, and
its answer on a symbolic size became a guard (``b == 1`` for a batch of 1, ``b != 1`` for
another), splitting the cache between batch 1 and batch n where the trace is the same. Such a
first operand is answered without a guard: from the size's value where the target is the same
symbol (the check passes whatever it says), False where the target is another symbol of the same
value (the check then guards their equality, which holds for 1 as well): torch's size-oblivious
treatment of 1 (``guard_size_oblivious``) for backed sizes.

The generated code calls :func:`one_or_same` at the check itself (``rewrites.size_oblivious``
finds the check in the metas it lists, and fails the generation where it no longer finds it): the
site, its size and its target are the call's arguments.
"""

from __future__ import annotations

from collections.abc import Callable

from thunder.core.proxies import NumberProxy

from metatrace.metas import concretizations
from metatrace.metas.relations import Relation


def one_or_same(size, target: Callable, as_written: Callable) -> bool:
    """``size == 1 or target() == size``: True with no guard where the target is ``size`` itself
    (the check holds for every value); where it is another symbol of the same value, True with
    the guard ``target == size`` alone (``size == 1`` answered False, no guard: the equality holds
    for 1 as well); elsewhere ``as_written()``, the check as the rewritten meta evaluates it."""
    if isinstance(size, NumberProxy) and size.value is not None:
        other = target()
        if other is size:
            return True
        if isinstance(other, NumberProxy) and type(other.value) is int and other.value == size.value:
            concretizations.relation(Relation.EQ, other, size, True)
            return True
    return as_written()
