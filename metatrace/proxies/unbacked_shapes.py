"""Tensor proxies whose shape holds a size read from tensor data, outside symbolic values.

thunder builds a TensorProxy's properties in ``proxies._infer_tensor_properties``; unless the
compile uses symbolic values it turns every size into its value (``pyval``) and multiplies them
out. A size read from tensor data (``metatrace.metas.unbacked``: ``x[mask]``'s length) has no
value, so outside a compile (thunder's ``check_trace`` re-runs every meta of a trace with no
compile data, hence under constant values) the product raised ``TypeError``. There such a size
stays its symbol in the shape and the element count is computed when read, as under symbolic
values; shapes without one are left exactly to thunder.
"""

from __future__ import annotations

import functools
import operator

import thunder.core.proxies as proxies
from thunder.core.compile_data import using_symbolic_values

from metatrace.metas import unbacked
from metatrace.patching import Patch, attribute


def _product(sizes):
    """The element count, without factors 1 (a 1-d tensor's count is its length itself: the
    symbol a re-run meta compares with, where ``1 * n`` would be a new symbol with no value)."""
    factors = [s for s in sizes if not (type(s) is int and s == 1)]
    return functools.reduce(operator.mul, factors[1:], factors[0]) if factors else 1


def _infer_tensor_properties(original):
    def infer(like=None, shape=None, *args, **kwargs):
        sizes = shape if shape is not None else (like._shape if like is not None else None)
        if sizes is None or using_symbolic_values() or not any(unbacked.is_unbacked(s) for s in sizes):
            return original(like, shape, *args, **kwargs)
        # thunder's own inference on a stand-in shape (every unbacked size 0: a valid length),
        # then the sizes themselves put back and the element count computed when read
        stand_in = tuple(0 if unbacked.is_unbacked(s) else s for s in sizes)
        result = list(original(like, stand_in, *args, **kwargs))
        kept = tuple(s if unbacked.is_unbacked(s) else v for s, v in zip(sizes, result[0]))
        result[0] = kept
        result[4] = lambda *_: _product(kept)  # (thunder's own is lazy too)
        return tuple(result)

    infer.__wrapped__ = original
    return infer


def patches() -> list[Patch]:
    return [
        attribute(proxies, "_infer_tensor_properties", _infer_tensor_properties,
                  "a size read from tensor data stays a symbol in a shape built under constant values", wrap=True),
    ]
