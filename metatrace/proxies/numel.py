"""``t.numel`` and ``t.numel()`` on tensors with symbolic sizes: the product, bound where it is used.

Under symbolic values a TensorProxy's number of elements is a closure multiplying its size
symbols. While metatrace is enabled:

- ``a.numel()`` in thunder's torch layer (``nll_loss``: ``if a.numel() == 0``) recorded
  ``prims.mul(1, i3)`` without the ``prims.shape`` binding that reading ``a.shape`` records, so
  thunder's own trace check (``thunder.dev_utils.check_trace``: every argument known in its
  scope) failed on the trace: the torch language's ``numel`` method reads ``a.shape`` first.
- thunder's TensorProxy answers the attribute ``t.numel`` with the product of its sizes, as an
  int that can also be called (``t.numel()``), but under symbolic values with the deferred
  product itself, a function: ``fill_value.numel != 1`` (``full`` with a tensor fill value) is
  always true, ``a.numel == 0`` (``logsumexp``, ``_softmax``) always false. In thunder's torch
  and clang layers (not in metas: their rewritten code reads the attribute as it was), it is the
  product, callable like thunder's int: the fresh product proxy's class becomes a callable
  subclass (the same object: a copy would collide by name in the trace).
"""

from __future__ import annotations

import importlib
import math
import operator

import thunder.core.jit_ext as jit_ext
from thunder.core.proxies import IntegerProxy, NumberProxy, TensorProxy
from thunder.core.trace import get_tracectx

from metatrace.metas.proxy_edits import give_class
from metatrace.metas.relations import Relation
from metatrace.metas.torch_ops.torch_metas import numel_number, tracing
from metatrace.patching import Patch, item
from metatrace.proxies.python_number_semantics import proxy_method
from metatrace.proxies.shape_reads import scope_state, scope_states

# (thunder.torch re-exports a ``langctx`` name that hides the submodule from attribute access)
_methods = importlib.import_module("thunder.torch.langctx")._method_name_to_fn_map


def _numel(original):
    def numel(a, /):
        a.shape  # noqa: B018 - when tracing, the read binds the sizes numel multiplies
        return original(a)

    return numel


class _CallableInt(int):
    """A static product, callable like thunder's. Its arithmetic and comparisons compute on the
    plain int: a number proxy on the other side (``a.numel % numel``, ``a.numel // numel`` in
    clang.reshape with a symbolic ``numel``) then gets an ``int``, which the prims' metas accept
    (their ``tree_flatten`` refuses an int subclass)."""

    def __call__(self):
        return int(self)

    __hash__ = int.__hash__


def _plain_int_op(op_name: str, reflected: bool = False):
    op = getattr(operator, op_name)
    if reflected:

        def method(self, other):
            return op(other, int(self))

    else:

        def method(self, other):
            return op(int(self), other)

    method.__name__ = f"__{'r' if reflected else ''}{op_name}__"
    return method


for _name in ("add", "sub", "mul", "floordiv", "truediv", "mod", "pow"):
    setattr(_CallableInt, f"__{_name}__", _plain_int_op(_name))
    setattr(_CallableInt, f"__r{_name}__", _plain_int_op(_name, reflected=True))
for _relation in Relation:
    setattr(_CallableInt, f"__{_relation.value}__", _plain_int_op(_relation.value))
del _name, _relation


class _CallableIntegerProxy(IntegerProxy):
    """An IntegerProxy that returns itself when called: ``t.numel()``."""

    def __call__(self):
        return self


def _tensor_getattr(original):
    def _tensor_getattr(self, attr: str, /):
        state = None
        if attr == "numel" and tracing():
            scopes = get_tracectx().scopes
            if scopes:
                # ``clang.reshape`` reads ``a.numel`` twice and every read multiplied the sizes
                # again (a chain of ``prims.mul`` per read): a product is kept with its scope
                # (``metatrace.proxies.shape_reads``), for the same tensor read there again while
                # the product is still defined there.
                state = scope_state(scopes[-1])
                if (cached := state.numels.get(id(self))) is not None:
                    tensor, product = cached
                    if tensor is self and product.name in state.defined():
                        return product
        if attr == "numel" and get_tracectx() is None and callable(self._numel):
            # No trace records here: thunder's passes over a finished trace read ``numel`` as a
            # heuristic (``distributed.utils.sort_waits`` orders communication by size under ddp and
            # fsdp), and thunder's deferred product would call the numel symbol, which raises
            # outside a trace. The example input's product orders the same independent operations;
            # it decides nothing a result depends on.
            return _CallableInt(math.prod(int(getattr(s, "value", s)) for s in self._shape))
        value = original(self, attr)
        if attr != "numel" or callable(value) and isinstance(value, (int, _CallableIntegerProxy)) or not tracing():
            return value
        if isinstance(self._numel, int):
            # thunder computed the product itself (the tensor was made with constant sizes): its own
            # answer, a plain int in thunder's clang layer. A _CallableInt there reached the prims
            # (``a.numel % numel`` in clang.reshape with a symbolic ``numel``: prims.remainder's meta
            # cannot tree_flatten an int subclass).
            return value
        n = numel_number(self, value() if callable(value) and not isinstance(value, NumberProxy) else value)
        if isinstance(n, int):
            return _CallableInt(n)  # thunder code calls it too: ``a.numel() // v.numel()`` (var's grad)
        if type(n) is IntegerProxy and n.history is None and all(n is not s for s in self._shape):
            give_class(n, _CallableIntegerProxy)  # a product just recorded: nothing else holds it yet
            if state is not None:
                for other in scope_states():  # one product per tensor, kept where it was last computed
                    other.numels.pop(id(self), None)
                state.numels[id(self)] = (self, n)
            return n
        # a size itself (a 1-d tensor's numel is its size: its class is not ours to change):
        # thunder's deferred product, callable as ``t.numel()``
        return self._numel if callable(self._numel) else value

    return _tensor_getattr


def patches() -> list[Patch]:
    call = _CallableIntegerProxy.__call__
    return [
        item(_methods, "numel", _numel, "t.numel() binds the sizes it multiplies", wrap=True,
             label="thunder.torch.langctx._method_name_to_fn_map"),
        *proxy_method(TensorProxy, "__getattr__", _tensor_getattr(TensorProxy.__dict__["__getattr__"]),
                      "t.numel stays callable on symbolic sizes"),
        item(jit_ext._general_jit_lookaside_map, call, jit_ext.interpreter_needs_wrap(call),
             "a callable product runs opaquely", label="thunder.core.jit_ext._general_jit_lookaside_map"),
    ]
