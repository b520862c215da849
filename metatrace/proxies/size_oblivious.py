"""thunder's clang shape rules, without the size decisions that split batch 1 from batch n.

Under symbolic values a decision on a size becomes a guard. Some decisions in thunder's clang layer
choose between paths that give the same result for every size, so their guard only splits the
cache: a Hugging Face model's prefill and decode with batch 1 each compiled an entry of their own
(``batch_size == 1``), which batch 2 could not reuse. As with torch's size-oblivious treatment of
0 and 1 (``guard_size_oblivious``), while metatrace is enabled:

- ``compute_broadcast_shape`` (every elementwise op) does not compare a size with the common
  size when they are the same symbol: thunder's ``common == 1`` and ``shape == 1 or common ==
  shape`` guarded ``b == 1`` on ``x * 2`` for a batch of 1 and ``b != 1`` for any other, where
  the common size is ``b`` either way. Two different symbols of equal value are guarded equal
  (``B == B2``), as torch's backed-size-oblivious broadcasting does, where thunder guarded
  ``B == 1`` (for a batch of 1) or ``B != 1``. ``maybe_broadcast`` expands a tensor unless its
  shape is the common shape itself (the same sizes), where thunder's ``same_shape`` compared a
  size with a literal 1 (a tensor that is expanded to the shape it has is the same values).

- ``clang.reshape``'s no-op shortcut (``if a.shape == tuple(shape): return a``) compares sizes
  only where they are the same object or equal plain ints; otherwise it reshapes, which returns
  the same values when the shapes happen to be equal. thunder's comparison guarded
  ``batch_size == 1`` where a literal 1 met the batch size.
- ``clang._basic_indexing``'s no-op shortcut (no slice where every start is 0, every stop the
  length, every step 1) compares a symbolic bound with 0 and the length: ``hidden[:, -k:]`` with
  ``k`` tokens to keep guarded ``k != T`` on a prompt of ``T`` tokens, and a 1-token prompt
  (``k == T == 1``) compiled an entry of its own. Here the shortcut is taken where the sizes say
  so without a guard; otherwise the slice is taken, the same values where it covers everything.
- ``clang.expand``: a dimension of literal length 1 expands to any requested length, so it is not
  compared with the request (thunder's ``requested_length == x or x == 1 or ...`` guarded
  ``position_ids.shape[0] == 1`` for ``inv_freq[None, :, None].expand(B, -1, 1)``). Where the
  length is a symbol the checks are thunder's. A request of literal ``-1`` keeps the length,
  whatever it is, so it is not compared either: thunder's ``requested_length == x or x == 1``
  ran first and guarded ``x != 1`` (MoE routing's ``arange(n).unsqueeze(1).expand(-1, k)`` split
  one token from many).

The wrappers here of ``compute_broadcast_shape``, ``maybe_broadcast`` and ``expand`` (references
to thunder's size-oblivious sites) are metatrace's one wrapper of each; their steps, in order:

1. the site is entered (:func:`metatrace.metas.oblivious_sites.entering`);
2. where a shape holds a symbol under symbolic values, the rule here; otherwise thunder's.
"""

from __future__ import annotations

import functools
import importlib

import thunder.clang as clang
import thunder.core.prims as prims
import thunder.core.utils as utils
from thunder.core.proxies import NumberProxy

from thunder.core.compile_data import using_symbolic_values

from metatrace.metas.torch_ops.torch_metas import tracing
from metatrace.metas.oblivious_answers import size_oblivious
from metatrace.metas.oblivious_sites import entering, site_of
from metatrace.patching import Patch, attribute

# (thunder.clang's ``utils`` attribute is thunder.core.utils: the submodule by its full name)
clang_utils = importlib.import_module("thunder.clang.utils")


def _symbolic() -> bool:
    """A trace records under symbolic values (``thunder.trace()`` proxies numbers too: thunder's code there)."""
    return tracing() and using_symbolic_values()


def _literal_one(x) -> bool:
    return type(x) is int and x == 1


def _equal_symbols(a, b) -> bool:
    return (isinstance(a, NumberProxy) and isinstance(b, NumberProxy) and a.value is not None
            and type(a.value) is int and a.value == b.value)


def same_sizes(a, b) -> bool:
    """``a == b`` decided without deciding anything on a symbol: the same objects, or equal plain
    ints. False where only a guard could say they are equal."""
    a, b = tuple(a), tuple(b)
    return len(a) == len(b) and all(
        x is y or (not isinstance(x, NumberProxy) and not isinstance(y, NumberProxy) and x == y)
        for x, y in zip(a, b))


def _has_symbol(shape) -> bool:
    return any(isinstance(s, NumberProxy) for s in shape)


def compute_broadcast_shape(*_shapes):
    """thunder's ``clang.utils.compute_broadcast_shape``, skipping a size that is the common size
    already (the same object), the first size at its position or a literal 1: for them thunder's
    decisions keep the common size, whatever its value; two symbols of equal value are guarded equal."""
    with size_oblivious("thunder.clang.utils.compute_broadcast_shape"):  # thunder's site, in its copy
        return _common_shape(tuple(x for x in _shapes if x is not None))


def _common_shape(shapes: tuple):
    if len(shapes) == 0:
        return None
    common_shape = [1] * max(len(shape) for shape in shapes)
    for shape in shapes:
        for idx in range(-1, -1 - len(shape), -1):
            if common_shape[idx] is shape[idx]:
                continue
            if _literal_one(common_shape[idx]):  # no size seen here yet: this one is the common size
                common_shape[idx] = shape[idx]
                continue
            if _literal_one(shape[idx]):  # a literal 1 broadcasts to the common size, whatever it is
                continue
            if _equal_symbols(common_shape[idx], shape[idx]):
                # two symbols of one value (input_ids' and position_ids' batch): the common size
                # for every pair that stays equal, 1 included; the guard is their equality
                utils.check(common_shape[idx] == shape[idx], lambda: "unreachable: equal values")
                continue
            if common_shape[idx] == 1:
                common_shape[idx] = shape[idx]
            utils.check((shape[idx] == 1) or (common_shape[idx] == shape[idx]),
                        lambda: f"Attempting to broadcast a dimension of length {shape[idx]}!")
    return tuple(common_shape)


def _broadcast_shape(original):
    @functools.wraps(original)
    def broadcast_shape(*shapes):
        if _symbolic() and any(_has_symbol(s) for s in shapes if s is not None):
            return compute_broadcast_shape(*shapes)
        return original(*shapes)

    return entering(site_of(original), original, broadcast_shape)


def _maybe_broadcast(original):
    @functools.wraps(original)
    def maybe_broadcast(*args, treat_cpu_scalar_tensors_as_numbers=True):
        shapes = [getattr(x, "shape", None) for x in args]
        if not _symbolic() or not any(s is not None and _has_symbol(s) for s in shapes):
            return original(*args, treat_cpu_scalar_tensors_as_numbers=treat_cpu_scalar_tensors_as_numbers)
        common_shape = compute_broadcast_shape(*shapes)

        def broadcast(x, shape):
            if treat_cpu_scalar_tensors_as_numbers and utils.is_cpu_scalar_tensor(x):
                return x
            if shape is not None and not same_sizes(shape, common_shape):
                return clang.expand(x, common_shape)
            return x

        return tuple(broadcast(x, shape) for x, shape in zip(args, shapes))

    return entering(site_of(original), original, maybe_broadcast)


def _reshape(original):
    @functools.wraps(original)
    def reshape(a, shape):
        shape = tuple(shape)
        if not _symbolic() or not (_has_symbol(a.shape) or _has_symbol(shape)):
            return original(a, shape)
        if same_sizes(a.shape, shape):
            return a
        # thunder's reshape below its shortcut (thunder/clang/__init__.py): infers a -1 length. Its
        # decisions on each length are taken in thunder's order; the product of the known lengths
        # is computed only where a -1 needs it: thunder multiplied them on every reshape, and on
        # symbols each product was a recorded ``prims.mul`` that nothing read, re-traced by every
        # pass after interpretation (the operator pass re-runs every reshape).
        known, neg_one_idx = [], None
        for idx, length in enumerate(shape):
            if length >= 0:
                known.append(length)
            else:
                utils.check(length == -1, lambda: f"Found a negative dimension length {length} in shape={shape}!")
                utils.check(neg_one_idx is None, lambda: f"Found two -1 markers in shape={shape}!")
                neg_one_idx = idx
        if neg_one_idx is None:
            return prims.reshape(a, shape)
        numel = 1
        for length in known:
            numel *= length
        utils.check(a.numel % numel == 0, lambda: f"Trying to reshape, but can't infer how to reshape {a.shape} to {shape}")
        return prims.reshape(a, (*shape[:neg_one_idx], a.numel // numel, *shape[neg_one_idx + 1:]))

    return reshape


def expand_impl(a, *shape, broadcast_prim):
    """thunder's ``clang.utils.expand_impl``, where a dimension of literal length 1 takes the
    requested length unchecked (any length is valid for it) and a request of literal -1 keeps
    the length unchecked."""
    with size_oblivious("thunder.clang.utils.expand_impl"):  # thunder's site, in its copy
        return _expanded(a, utils.extract_shape_from_varargs(shape), broadcast_prim)


def _expanded(a, shape, broadcast_prim):
    utils.check(len(shape) >= len(a.shape), lambda: "expand: the requested shape has too few dimensions!")
    offset = len(shape) - len(a.shape)
    shape_ = list(shape)
    for idx, x in enumerate(a.shape):
        requested_length = shape[idx + offset]
        if _literal(requested_length, -1):  # keeps the length: valid for every length
            shape_[idx + offset] = x
            continue
        if not _literal_one(x):
            utils.check(requested_length == x or x == 1 or requested_length == -1,
                        lambda: f"expand: attempting to expand a dimension of length {x}!")
        shape_[idx + offset] = requested_length if requested_length != -1 else x
    return broadcast_prim(a, tuple(shape_), tuple(range(offset, len(a.shape) + offset)))


def _expand(original):
    symbolic = functools.partial(expand_impl, broadcast_prim=prims.broadcast_in_dim)

    @functools.wraps(original)
    def expand(a, *shape):
        if _symbolic() and (any(_literal_one(x) for x in a.shape)
                            or any(_literal(x, -1) for x in utils.extract_shape_from_varargs(shape))):
            return symbolic(a, *shape)
        return original(a, *shape)

    return entering(site_of(original), original, expand)


def _canonical_bounds(length, x: slice) -> tuple:
    """thunder's canonical ``start, stop, step`` of a slice on a dimension of ``length``
    (thunder/clang/__init__.py ``_basic_indexing``: bounds beyond the length are allowed)."""
    start = x.start if x.start is not None else 0
    stop = x.stop if x.stop is not None else length
    step = x.step if x.step is not None else 1
    utils.check(step >= 1, lambda: f"Expected step={step} to be weakly greater than 1")
    if start < 0:
        start = start + length
    utils.check(start >= 0, lambda: f"start={x.start} is not a valid index for length {length}")
    if stop < 0:
        stop = stop + length
    utils.check(stop >= 0, lambda: f"end={x.stop} is not a valid index for length {length}")
    if start > stop or start >= length:
        start, stop = 0, 0
    if stop >= length:
        stop = length
    return start, stop, step


def basic_indexing(a, key: list):
    """thunder's ``clang._basic_indexing`` whose no-op shortcut is taken only where it is one
    without a guard (a start of literal 0, the length itself, a step of 1): a symbolic slice is
    sliced, which is ``a``'s values where the slice covers all of it."""
    padded = []
    for idx, x in enumerate(key):
        if x is None:
            a = clang.unsqueeze(a, idx)
        padded.append(slice(None) if x is None else x)
    padded += [slice(None)] * (len(a.shape) - len(padded))
    starts, stops, steps, squeeze_dims = [], [], [], []
    for idx, (length, x) in enumerate(zip(a.shape, padded)):
        if isinstance(x, slice):
            start, stop, step = _canonical_bounds(length, x)
        else:
            start = utils.canonicalize_dim(length, x)
            stop, step = start + 1, 1
            squeeze_dims.append(idx)
        starts.append(start)
        stops.append(stop)
        steps.append(step)
    if (all(_literal(s, 0) for s in starts) and all(_literal(s, 1) for s in steps) and not squeeze_dims
            and same_sizes(stops, a.shape)):
        return a
    result = prims.slice_prim(a, starts, stops, steps)
    return prims.squeeze(result, tuple(squeeze_dims)) if squeeze_dims else result


def _literal(x, value: int) -> bool:
    return type(x) is int and x == value


def patches() -> list[Patch]:
    why = "no size decision where every answer takes a path right for every size (batch 1 shares batch n's entry)"
    return [attribute(clang_utils, "compute_broadcast_shape", _broadcast_shape, why, wrap=True),
            attribute(clang, "compute_broadcast_shape", _broadcast_shape, why, wrap=True),
            attribute(clang, "maybe_broadcast", _maybe_broadcast, why, wrap=True),
            attribute(clang, "reshape", _reshape, why, wrap=True),
            attribute(clang, "expand", _expand, why, wrap=True)]

