"""``requires_grad`` after an in-place write, as eager computes it.

thunder lowers every in-place write (item and slice assignment, ``copy_``, ``index_put_``,
``scatter_``, ``add_``, ...) to ``prims.copy_(value, destination)`` and keeps using the
destination's proxy until its functionalization; metatrace's rule for fresh outputs
(``metatrace.grad.requires_grad``) never sees the destination change. Eager's rule: under grad
mode, a write of a value that requires grad makes the destination require grad, and with it
every tensor that views the same storage (its base and the base's other views: ``CopySlices``
and the views' regenerated ``grad_fn``). So ``out = x.new_zeros(n, m); out[0] = t`` returns a
tensor that requires grad, and backward reaches ``t``.

Two steps, run from ``Symbol.__call__`` while thunder interprets the function (later passes see
one value per proxy and decide nothing here):

1. a view symbol (thunder's own list: ``ltorch._syms_returning_views`` and
   ``_syms_that_may_return_views``) notes its outputs as views of its input's root, except
   where eager makes no view: ``detach`` (shares storage, not the autograd graph) and indexing
   with a tensor or a sequence (a copy);
2. ``prims.copy_`` with grad mode on, a value that requires grad and a floating destination
   (the value is already cast to the destination's dtype: an integer destination has no grad)
   marks the destination's whole family as requiring grad.

A write into a leaf that requires grad (an input or a parameter), or into a view of one, under
grad mode raises eager's error (thunder's own check). A write into an input that does not
require grad (an argument, a buffer) of a value that requires grad, under grad mode, raises
``WrittenInputError`` before the grad transform (``metatrace.grad.written_inputs``): eager gives
the caller's tensor a ``grad_fn``, thunder cannot. The input's proxy gets its flag back once the
function is interpreted (``metatrace.metas.proxy_edits.restore_input_flags``): the prologue checks
the caller's tensor by it (batch_norm's running statistics, written outside autograd in eager,
take this path without the error).
"""

from __future__ import annotations

from collections.abc import Sequence

import thunder.torch as ltorch
from thunder.core import dtypes
from thunder.core.prims import PrimIDs
from thunder.core.proxies import TensorProxy
from thunder.core.pytree import tree_iter
from thunder.core.trace import get_tracectx

from metatrace.metas.proxy_edits import set_requires_grad
from metatrace.state import compile_context
from metatrace.state.view_families import VIEW_FAMILIES

# ``detach`` shares storage but leaves the autograd graph: eager's ``d.copy_(t)`` on
# ``d = b.detach()`` gives ``d`` a grad_fn and leaves ``b`` without one.
_NOT_AUTOGRAD_VIEWS = {"torch.detach"}
VIEW_SYMBOL_IDS = frozenset(
    sym.id for sym in (*ltorch._syms_returning_views, *ltorch._syms_that_may_return_views)
    if sym.id not in _NOT_AUTOGRAD_VIEWS
)
_GETITEM = "torch.Tensor.__getitem__"
# ``to``: the tensor itself when nothing changes (thunder may still give it a new proxy), a copy otherwise.
_COPY_WHEN_CONVERTING = {"torch.Tensor.to"}


def after_call(sym, args, kwargs, result, grad_enabled: bool) -> None:
    """Step 1 or 2 for a symbol just called while a trace is being built."""
    sid = sym.id
    if sid is PrimIDs.COPY_:
        if not compile_context.step().functional:
            _after_write(args, kwargs, grad_enabled)
    elif sid in VIEW_SYMBOL_IDS and not compile_context.step().functional:
        if views := view_outputs(sid, args, result):
            families = VIEW_FAMILIES.get(get_tracectx())
            for out in views:
                families.add_view(args[0], out)


def view_outputs(sid, args, result) -> list:
    """The tensors ``result`` holds that view ``args[0]`` in eager's autograd (step 1): none for
    a symbol that is not a view (:data:`VIEW_SYMBOL_IDS`), indexing with a tensor or a sequence,
    or ``to`` another dtype or device (copies)."""
    if sid not in VIEW_SYMBOL_IDS or not args or not isinstance(base := args[0], TensorProxy):
        return []
    if sid == _GETITEM and len(args) > 1 and _is_advanced_index(args[1]):
        return []
    outs = [o for o in tree_iter(result) if isinstance(o, TensorProxy) and o is not base]
    if sid in _COPY_WHEN_CONVERTING:
        outs = [o for o in outs if o.dtype == base.dtype and o.device == base.device]
    return outs


def _is_advanced_index(key) -> bool:
    """Indexing that copies in eager: a tensor, a list or another sequence among the key's parts."""
    parts = key if isinstance(key, tuple) else (key,)
    return any(isinstance(k, TensorProxy) or (isinstance(k, Sequence) and not isinstance(k, str)) for k in parts)


def _after_write(args, kwargs, grad_enabled: bool) -> None:
    """Step 2: ``prims.copy_(value, destination, grad_enabled=...)`` just recorded."""
    value, destination = args[0], args[1]
    if not (kwargs.get("grad_enabled", grad_enabled) and isinstance(value, TensorProxy) and value.requires_grad
            and isinstance(destination, TensorProxy) and dtypes.is_inexact_dtype(destination.dtype)):
        return
    families = VIEW_FAMILIES.get(get_tracectx())
    for t in families.family(destination):
        if not t.requires_grad:
            set_requires_grad(t, True)
            families.raised.append(t)
