"""``requires_grad`` as eager computes it: on the trace's tensors, and on the tensors returned.

thunder gives a prim's output its first tensor input's flag (``TensorProxy(like=a)``), so with
``z = x * y`` and only ``y`` requiring grad, ``z.requires_grad`` read in the function is False;
and its autograd.Function returns every floating output of a differentiated trace as requiring
grad, so a tensor computed under ``torch.no_grad()`` (or ``inference_mode``, or after
``torch.set_grad_enabled(False)``) inside the function comes back requiring grad. Eager's rule,
op by op: the output requires grad when grad mode is on, some tensor input requires grad, and
its dtype is floating or complex. Composites return their prims' outputs, so the rule runs at
the prims; factories (``zeros_like`` is ``prims.full``) take no tensor and get False.

- a prim's fresh tensor outputs get eager's flag. An auto-registered torch op ran eager's own
  rule on fake tensors (``detach`` gives False): it keeps its flag, and the trace's grad mode.
- an in-place write changes its destination's flag and its views' (``metatrace.grad.inplace_writes``);
  a torch function called with ``out=`` follows eager's rules for it
  (``metatrace.metas.torch_ops.inplace_methods``).
- ``torch.floor_divide`` of a tensor requiring grad raises as eager does (eager has no derivative).
- ``thunder.CacheEntry.__new__``: which flat outputs eager returns without grad, read from the entry's
  first computation trace (whose return lists the outputs in the order the forward trace
  returns them), kept for the entry's backward function (:data:`NON_DIFFERENTIABLE`).
- ``connect_to_autograd``: those outputs are marked non-differentiable in thunder's
  autograd.Function (the backward still receives a zero cotangent for each, as before).
- the grad mode the function leaves (``torch.set_grad_enabled(False)`` called as a function):
  set on every call the entry serves, not only the call that compiled it.
- ``x.requires_grad`` read in the function: the flag as it is at the read (thunder's interpreter
  remembered the first read's answer on the tensor's wrapper).
- ``torch.is_grad_enabled()`` inside the function: the trace's mode (thunder read the caller's).
- ``torch.inference_mode()`` inside the function: no grad inside, as thunder's ``no_grad``
  (thunder ran its ``__enter__`` opaquely, switching nothing in the trace).

metatrace's one wrapper of ``Symbol.__call__`` is here, past proxies/ and metas/, because its
steps are theirs too; in order:

1. a torch function called with ``out=`` that its symbol does not take runs as eager's rules for
   it say (:func:`metatrace.metas.torch_ops.inplace_methods.call_with_out`, which calls this
   wrapper again without it);
2. ``torch.floor_divide`` of a tensor requiring grad raises;
3. ``put_grad`` of a 0-d tensor's gradient sums it to 0-d (:mod:`metatrace.grad.scalar_tensor_grads`);
4. the composite's pending sizes the symbol takes are bound first
   (:func:`metatrace.proxies.shape_reads.bind_pending_sizes`);
5. thunder's call;
6. if it raised, the scopes it pushed are popped and its number op's failed domain condition
   guarded (:func:`metatrace.metas.raising_symbols.after_raise`); if it returned, the domain of
   an op guarded where it succeeds too is guarded (``raising_symbols.after_return``);
7. the outputs' flags: a prim's as eager's, an in-place write's destination and its views'
   (:func:`metatrace.grad.inplace_writes.after_call`).

And of the interpreter's ``wrap_attribute`` (the wrapper of an attribute the function reads):

1. a name that is no constant of the code is recorded as its value's constant
   (:func:`metatrace.interpret.reads.argument_reads.constant_attribute_name`);
2. thunder's wrapper;
3. ``x.shape`` of a tensor is noted as eager's ``torch.Size``
   (:func:`metatrace.interpret.calls.numbers.eager_sizes.note_shape_read`);
4. ``x.requires_grad`` is not remembered on the tensor's wrapper (above).
"""

from __future__ import annotations

import functools
import inspect

import thunder
import thunder.core.interpreter as interpreter
import thunder.core.jit_ext as jit_ext
import thunder.executors.torch_autograd as torch_autograd
import torch
from thunder.core import dtypes
from thunder.core.compile_data import get_compile_data
from thunder.core.interpreter import _interpret_call
import thunder.core.prims as prims
from thunder.core.prims import OpTags
from thunder.core.proxies import TensorProxy
from thunder.core.pytree import tree_iter
from thunder.core.symbol import Symbol
from thunder.core.trace import get_tracectx

from metatrace.state.compile_context import CONNECTING_OUTPUTS
from metatrace.grad import inplace_writes, scalar_tensor_grads
from metatrace.interpret.calls.numbers import eager_sizes
from metatrace.interpret.reads import argument_reads
from metatrace.metas import raising_symbols
from metatrace.metas.proxy_edits import set_requires_grad
from metatrace.metas.torch_ops import inplace_methods
from metatrace.patching import Patch, attribute, item
from metatrace.proxies import shape_reads
from metatrace.proxies.plain_trees import plain_leaves
from metatrace.state.object_tables import NON_DIFFERENTIABLE

_PUT_GRAD = prims.put_grad



# torch operators eager refuses to differentiate (its autograd raises on the forward when an
# input requires grad and grad mode is on); thunder differentiated them.
NOT_DIFFERENTIABLE = {"torch.floor_divide": "aten::floor_divide"}


def _call(original):
    @functools.wraps(original)
    def __call__(self, *args, **kwargs):
        trace = get_tracectx()
        if trace is not None:
            if kwargs.get("out") is not None and not _takes_out(self):
                return inplace_methods.call_with_out(self, functools.partial(__call__, self), args, kwargs)
            if self.id in NOT_DIFFERENTIABLE:
                _refuse_gradient(self, args, kwargs)
        if self is _PUT_GRAD:  # (the one call that needs it: one identity test on every call)
            args = scalar_tensor_grads.summed_to_scalar(self, args)
        depth = len(trace.scopes) if trace is not None else 0
        try:
            if trace is not None:
                shape_reads.bind_pending_sizes(trace, args, kwargs)
            result = original(self, *args, **kwargs)
        except Exception:
            raising_symbols.after_raise(self, args, trace, depth)
            raise
        raising_symbols.after_return(self, args)
        if get_tracectx() is not None and (cd := get_compile_data()) is not None:
            if self.is_prim:
                _set_eager_flags(self, args, kwargs, result, cd.is_grad_enabled)
            inplace_writes.after_call(self, args, kwargs, result, cd.is_grad_enabled)
        return result

    return __call__


def _takes_out(sym) -> bool:
    """Whether thunder's symbol handles ``out=`` itself (few do; asked only when one is passed)."""
    try:
        return "out" in inspect.signature(sym.meta).parameters
    except (TypeError, ValueError):
        return True


def _refuse_gradient(sym, args, kwargs) -> None:
    cd = get_compile_data()
    if cd is not None and cd.is_grad_enabled and any(
        isinstance(x, TensorProxy) and x.requires_grad for x in tree_iter((args, kwargs))
    ):
        raise RuntimeError(f"derivative for {NOT_DIFFERENTIABLE[sym.id]} is not implemented")


# Leaves a prim's arguments and results hold besides proxies (thunder's own dtypes and devices
# are leaves too, tested by isinstance below).
def _tensor_proxies(tree) -> list:
    """The tensor proxies in ``tree``: walked directly through exact containers (a prim's
    arguments and results, nearly always); through ``tree_iter`` when it holds any other container
    (a namedtuple, a dataclass, a registered node)."""
    leaves = plain_leaves(tree)
    if leaves is None:
        return [x for x in tree_iter(tree) if isinstance(x, TensorProxy)]
    return [x for x in leaves if isinstance(x, TensorProxy)]


def _set_eager_flags(sym, args, kwargs, result, grad_enabled: bool) -> None:
    inputs = _tensor_proxies((args, kwargs))
    if OpTags.AUTO_REGISTERED in (sym.tags or ()):
        flag_of = lambda out: grad_enabled and out._requires_grad  # noqa: E731
    else:
        any_input = grad_enabled and any(x._requires_grad for x in inputs)
        flag_of = lambda out: any_input and dtypes.is_inexact_dtype(out.dtype)  # noqa: E731
    ids = {id(x) for x in inputs}
    for out in _tensor_proxies(result):
        if id(out) not in ids:
            set_requires_grad(out, flag_of(out))


def _cache_entry(original):
    @functools.wraps(original)
    def __new__(cls, *fields, **kwargs):
        entry = original(cls, *fields, **kwargs)
        if not entry.computation_traces:
            return entry
        first = entry.computation_traces[0]
        if entry.backward_fn is not None:
            flags = _non_differentiable_outputs(first)
            if any(flags):
                NON_DIFFERENTIABLE[entry.backward_fn] = flags
        final = grad_mode_left(first)
        if final is not None:
            entry = entry._replace(prologue_fn=leaving_grad_mode(entry.prologue_fn, final))
        return entry

    return __new__


def _non_differentiable_outputs(trace) -> tuple[bool, ...]:
    return tuple(isinstance(o, TensorProxy) and not o.requires_grad for o in tree_iter(trace.output))


def grad_mode_left(trace) -> bool | None:
    """The grad mode the function leaves behind (its last switch), None when it switches none."""
    for bsym in reversed(trace.bound_symbols):
        if bsym.sym.id == "set_grad_enabled":
            return bool(bsym.args[0])
    return None


def leaving_grad_mode(prologue, final: bool):
    """thunder sets the grad mode after a call to its compile data's, which each call resets to
    the caller's mode; the entry's prologue (run on every call it serves) sets the mode the
    function leaves, as the compile that traced it did."""

    @functools.wraps(prologue)
    def prologue_fn(*args, **kwargs):
        result = prologue(*args, **kwargs)
        get_compile_data().is_grad_enabled = final
        return result

    return prologue_fn


def _connect(original):
    @functools.wraps(original)
    def connect_to_autograd(*, backward_fn, flat_output, **kwargs):
        flags = NON_DIFFERENTIABLE.get(backward_fn)
        if flags is not None and len(flags) != len(flat_output):
            raise RuntimeError(
                f"metatrace: the differentiated trace returns {len(flat_output)} outputs, its first trace "
                f"{len(flags)}: which of them eager returns without grad is unknown"
            )
        if flags is not None and kwargs.get("disable_split_autograd") and kwargs.get("is_differentiable_outputs") is None:
            kwargs["is_differentiable_outputs"] = tuple(not f for f in flags)
        with CONNECTING_OUTPUTS.set_to(flags):
            return original(backward_fn=backward_fn, flat_output=flat_output, **kwargs)

    return connect_to_autograd


def _output_forward(original):
    forward = original.__func__

    @functools.wraps(forward)
    def output_forward(ctx, *args):
        res = forward(ctx, *args)
        flags = CONNECTING_OUTPUTS.get()
        if flags is not None:
            ctx.mark_non_differentiable(*(t for t, f in zip(res, flags) if f and isinstance(t, torch.Tensor)))
        return res

    return staticmethod(output_forward)


# Interpreted (thunder tracks the attribute store on the context object, as for no_grad's ``prev``);
# ``torch._C._set_grad_enabled`` is thunder's grad-mode symbol there.
def _interpreted_enter(self):
    self._grad_before_inference_mode = torch.is_grad_enabled()
    if self.mode:
        torch._C._set_grad_enabled(False)


def _interpreted_exit(self, *exc):
    torch._C._set_grad_enabled(self._grad_before_inference_mode)


def _enter_lookaside(self):
    return _interpret_call(_interpreted_enter, self)


def _exit_lookaside(self, *exc):
    return _interpret_call(_interpreted_exit, self, *exc)


def _wrap_attribute(original):
    @functools.wraps(original)
    def wrap_attribute(plain_result, obj, name):
        name = argument_reads.constant_attribute_name(name)
        result = original(plain_result, obj, name)
        eager_sizes.note_shape_read(result, plain_result, obj, name)
        if name.value == "requires_grad" and type(obj.value) is TensorProxy:
            # not remembered on the tensor's wrapper, as other attributes are: an in-place write
            # changes the flag (``metatrace.grad.inplace_writes``) and the next read must see it
            obj.attribute_wrappers.pop("requires_grad", None)
        return result

    return wrap_attribute


def _is_grad_enabled():
    """``torch.is_grad_enabled()`` in the function: the trace's grad mode (no_grad's and
    enable_grad's ``__enter__`` read it for the mode to restore: the real one restored the
    caller's mode on leaving a nested context)."""
    return get_compile_data().is_grad_enabled


def patches() -> list[Patch]:
    general = "thunder.core.jit_ext._general_jit_lookaside_map"
    mode = torch.autograd.grad_mode.inference_mode
    return [
        attribute(Symbol, "__call__", _call, "a prim's tensor outputs get eager's requires_grad; a composite's "
                  "pending sizes bound before the first symbol that takes one; a symbol that raises pops the scopes "
                  "it pushed (a user's try/except around size arithmetic)", wrap=True),
        attribute(thunder.CacheEntry, "__new__", _cache_entry,
                  "an entry remembers which outputs eager returns without grad", wrap=True),
        attribute(thunder, "connect_to_autograd", _connect,
                  "outputs eager returns without grad are connected as non-differentiable", wrap=True),
        attribute(torch_autograd.ThunderOutputFunction, "forward", _output_forward,
                  "marks the outputs eager returns without grad non-differentiable", wrap=True),
        attribute(interpreter, "wrap_attribute", _wrap_attribute,
                  "a tensor's requires_grad is read as it is now, not as first read; x.shape of a tensor is noted as "
                  "eager's torch.Size; a name that is not a constant records its value as the key", wrap=True),
        item(jit_ext._general_jit_lookaside_map, torch.is_grad_enabled, jit_ext.interpreter_needs_wrap(_is_grad_enabled),
             "torch.is_grad_enabled() reads the trace's grad mode", label=general),
        item(jit_ext._general_jit_lookaside_map, mode.__enter__, _enter_lookaside,
             "inference_mode disables grad in the trace, as no_grad does", label=general),
        item(jit_ext._general_jit_lookaside_map, mode.__exit__, _exit_lookaside,
             "inference_mode restores the grad mode on exit", label=general),
    ]
