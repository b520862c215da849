"""``math.isfinite``/``isinf``/``isnan`` in thunder's clang, without reading integer symbols.

``clang.arange`` checks ``math.isfinite(stop)``; on an IntegerProxy that calls ``__float__``,
which the safety net must guard as a baked-in value (``stop == 8``), so every ``arange(t)``
(nanoGPT's positions, ``tril``'s row numbers) pinned its size. An integer is finite for every
value, so these predicates answer for IntegerProxy without reading it; floats still go
through ``__float__`` and are guarded.
"""

from __future__ import annotations

import math
import types

import thunder.clang as clang
from thunder.core.proxies import IntegerProxy

from metatrace.patching import Patch, attribute


def _integer_aware(predicate, integer_answer: bool):
    def check(x):
        if isinstance(x, IntegerProxy):
            return integer_answer
        return predicate(x)

    check.__name__ = predicate.__name__
    return check


def _shim() -> types.ModuleType:
    shim = types.ModuleType("math", "math, with isfinite/isinf/isnan answering for integer symbols")
    shim.__dict__.update({k: v for k, v in vars(math).items() if not k.startswith("__")})
    shim.isfinite = _integer_aware(math.isfinite, True)
    shim.isinf = _integer_aware(math.isinf, False)
    shim.isnan = _integer_aware(math.isnan, False)
    return shim


_SHIM = _shim()


def patches() -> list[Patch]:
    return [attribute(clang, "math", _SHIM, "math.ceil/floor/... inside clang record on symbols")]
