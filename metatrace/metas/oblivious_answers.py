"""Which decisions on a size read from tensor data each size-oblivious site answers, and how a
site says it is running.

torch answers ``n == 1`` False for an unbacked size n at the sites where the answer for ``n = 0``
or ``1`` takes the same path as for any other n (``guard_size_oblivious``,
torch/fx/experimental/symbolic_shapes.py). Here each such site is a row of :data:`THUNDER_SITES`
(thunder's functions, entered through ``metatrace.metas.oblivious_sites``' Patch rows) or of
:data:`REWRITTEN_META_SITES` (the rewritten metas, entered by the generated code), with the
answers it gives; :func:`metatrace.metas.unbacked.decide` asks :func:`oblivious_answer` only for a
decision no value of n settles. Kept apart from ``unbacked`` because the tables are a list of
reviewed sites, one comment each, that grows with thunder, while ``unbacked`` is the arithmetic.
"""

from __future__ import annotations

from metatrace.state import compile_context
from metatrace.metas.relations import Relation

# Where a decision on an unbacked size n is size-oblivious, as in torch (``guard_size_oblivious``):
# the path taken for the answer given also gives eager's result for the values of n it excludes,
# or asks a later decision on n that is not made. Each site says so itself while it runs
# (:func:`size_oblivious`, setting ``compile_context.SIZE_OBLIVIOUS``); nothing reads the stack.
# Site -> {(op, constant): the answer for ``n <op> constant``}.
_NOT_ONE = {(Relation.EQ, 1): False, (Relation.NE, 1): True}
_NOT_ZERO = {(Relation.EQ, 0): False, (Relation.NE, 0): True}

# thunder's functions, by the dotted name of their definition: entered through the Patch rows of
# ``metatrace.metas.oblivious_sites`` (which resolve each at enable()), and metatrace's own copies
# of them (``metatrace.proxies.size_oblivious``).
THUNDER_SITES = {
    # ``common_shape[idx] == 1`` then ``shape[idx] == 1 or common_shape[idx] == shape[idx]``: for
    # n != 1 the result is n only where the other size is the same n (reflexive), which is n for
    # every n; any other size needs a decision on n that is not made
    "thunder.clang.utils.compute_broadcast_shape": _NOT_ONE,
    # ``requested_length == x or x == 1 or requested_length == -1``: reached for n only when the
    # requested length is not the same symbol; n == 1 False leaves ``requested == -1``, which keeps n
    "thunder.clang.utils.expand_impl": _NOT_ONE,
    # its nested ``_maybe_broadcast``: ``if not same_shape(x.shape, common_shape): expand``:
    # expanding a size 1 to the same size 1 is the tensor itself, so answering n != 1 takes a path
    # that is right for n = 1 too
    "thunder.clang.utils.maybe_broadcast_impl": _NOT_ONE,
    # prims.broadcast_in_dim's grad rule's ``unit_dims`` (dims of length 1 are summed): the target
    # of an unbacked n is that same n (the meta's check, below), so no sum is needed for any n
    "thunder.core.transforms._broadcast_in_dim_prim_grad": _NOT_ONE,
    # ``if start >= length: start = stop = 0`` for a slice starting at 0 (``t[:, 0]``): for n = 0
    # the slice that follows is ``0:n``, empty as well (any other stop asks ``stop >= n``)
    "thunder.clang._basic_indexing": {(Relation.LE, 0): False, (Relation.GT, 0): True},
    # a reduction without an identity (amax, argmax) checks that no reduced size is 0: for n = 0
    # torch's kernel raises at run time as eager does, for any other n the check holds
    "thunder.torch._reduction": _NOT_ZERO,
    # ``g.numel() <= 1 or g.shape[dim] == 1``: flip, cumsum, flip is eager's gradient for 0 and 1
    # elements as well
    "thunder.core.transforms.cumsum_backward": {
        (Relation.LE, 1): False, (Relation.GT, 1): True, (Relation.EQ, 1): False,
    },
    # ``a.numel == 0`` takes exp(a) alone; the other path subtracts the max first, which for an
    # empty tensor is empty too unless the max reduces the empty dimension (torch's amax raises
    # at run time there: an error, never a wrong value)
    "thunder.torch._softmax": _NOT_ZERO,
}

# The rewritten prim metas (the codegen's metas.py), by function name: the generated code enters
# the site around the meta's body (``rewrites.size_oblivious``, whose list must be these names).
REWRITTEN_META_SITES = {
    # ``original_length == 1 or shape[idx] == original_length``: for n != 1 it holds only where the
    # target is the same n, which is valid for every n
    "broadcast_in_dim_meta": _NOT_ONE,
    # argmax's ``a.shape[dim] == 0`` raises: for n = 0 torch raises at run time as eager does
    "_argmin_argmax_meta": _NOT_ZERO,
    # ``not (a.shape[dim] == 0 and index.numel > 0)``: indexing an empty dimension with a
    # nonempty index; for n = 0 torch's index_select checks every index at run time
    "take_meta": _NOT_ZERO,
}

_SITES = {**THUNDER_SITES, **REWRITTEN_META_SITES}


def size_oblivious(site: str):
    """A context manager: decisions on unbacked sizes made while it is entered, in the site's
    function or the functions it calls, are answered by ``site``'s table (a name of
    :data:`THUNDER_SITES` or :data:`REWRITTEN_META_SITES`; an unknown name raises KeyError). A
    site entered inside another replaces its answers until it exits."""
    if site not in _SITES:
        raise KeyError(f"{site!r} is not a size-oblivious site of metatrace.metas.oblivious_answers")
    return compile_context.SIZE_OBLIVIOUS.set_to(site)


def oblivious_answer(op: Relation, c) -> bool | None:
    """The answer of the size-oblivious site running for ``n <op> c`` of an unbacked size n, or None."""
    site = compile_context.SIZE_OBLIVIOUS.get()
    return None if site is None else _SITES[site].get((op, c))
