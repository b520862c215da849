"""Checks a rewritten meta makes whose answer cannot change what it does: decided with no guard.

A meta's shape check ``original_length == 1 or shape[idx] == original_length``
(``broadcast_in_dim_meta``) holds for every value of a size that the target shape takes as it is
(the same symbol): the second operand is reflexive. Python evaluates the first operand first, and
its answer on a symbolic size became a guard (``b == 1`` for a batch of 1, ``b != 1`` for
another), splitting the cache between batch 1 and batch n where the trace is the same. Such a
first operand is answered from the size's value without a guard: whatever it says, the check
passes and the meta returns the same proxy (torch's size-oblivious treatment of 1,
``guard_size_oblivious``, for backed sizes at this one site).

Sites, by the generated meta's function name -> the predicate on its frame's locals that says the
rest of the ``or`` holds: listed one by one, since each needs its own reading of the code.
"""

from __future__ import annotations

from types import FrameType

from thunder.core.proxies import NumberProxy


def _broadcast_target_is_the_size(local: dict, size) -> bool:
    shape, idx = local.get("shape"), local.get("idx")
    try:
        return local.get("original_length") is size and shape[idx] is size
    except (TypeError, IndexError, KeyError):
        return False


_SITES = {"broadcast_in_dim_meta": _broadcast_target_is_the_size}


def settled(op: str, lhs, rhs, frame: FrameType) -> bool:
    """True where ``lhs <op> rhs`` (made in the rewritten meta running in ``frame``) is the first
    operand of a check that holds whatever it answers: it needs no guard."""
    if op != "eq" or type(rhs) is not int or rhs != 1 or not isinstance(lhs, NumberProxy):
        return False
    site = _SITES.get(frame.f_code.co_name)
    return site is not None and frame.f_code.co_filename.endswith("/metas.py") and site(frame.f_locals, lhs)
