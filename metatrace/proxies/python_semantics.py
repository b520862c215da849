"""Drop-in: what runs under ``cache="constant values"`` also runs under ``"symbolic values"``.

thunder 0.2.6's symbolic-values mode proxies every string and slice it reads from the inputs,
and its interpreter and number proxies assume Python ints in places. While metatrace is enabled:

- Inputs that can never be sizes are static, as in thunder's constant-values mode: a string
  (an argument, or a module attribute such as ``Conv1d.padding_mode``) stays a plain ``str`` in
  the trace and the prologue checks its value (``check_string_value``). Devices already are;
  dtypes, ``None`` and ``Ellipsis`` are never proxied (``metatrace.guards.structure`` checks the call's).
- A slice argument keeps its numbers symbolic: ``start``/``stop``/``step`` become number
  proxies that the prologue unpacks as ``args[i].start`` ..., guarded like any number, and the
  slice's shape (which parts are None) is checked by ``metatrace.guards.structure``.
- A number proxy used as an index into a Python tuple or list (``x.shape[d]``) bakes its value
  in: an equality guard, as for any concretization.
- ``len`` of a tensor returns its symbolic first size (the interpreter insisted on an int).
- ``divmod`` on number proxies is ``(a // b, a % b)`` (thunder has no ``divmod`` method).
- ``torch.tensor([n, n])``: the numbers of the sequence are baked in (equality guards); the
  prim's meta accepts Python numbers only. ``torch.tensor(n)`` is ``full((), n)``, as thunder
  does for a Python number. ``torch.randint``'s bounds are baked in (its prim wants ints).
- ``t.numel`` (the attribute thunder's torch layer reads) is the number of elements, not the
  deferred function thunder leaves under symbolic values.
- Python's number semantics instead of thunder's lowering through tensor ops
  (``math.floor(-3.25)`` was -3, ``7 ** -2`` was 0): ``math.floor``/``ceil``/``trunc`` are
  ``int(prims.floor(x))`` ..., float ``a // b`` is ``prims.py_floordiv``, and ``round``,
  ``int ** int`` and ``where`` on three numbers run as the Python functions themselves
  (operators of the python executor, ``metatrace.metas.python_executor``).
- ``where`` with a symbolic number condition and tensor branches (``copysign(t, n)``) makes the
  condition a 0-d tensor: no executor runs ``prims.where`` on a number condition.
- ``torch.linalg.multi_dot``: thunder's function refuses symbolic sizes (it picks the
  multiplication order from their values). Its inputs' sizes are baked in (equality guards,
  ``multi_dot: thunder chooses the multiplication order from the sizes``) and it runs on views
  of them with those static sizes: one entry per shape, never an error.
"""

from __future__ import annotations

import builtins
import functools
import importlib
import operator
from numbers import Number
from typing import Any

import thunder.clang as clang
import thunder.core.interpreter as interpreter
import thunder.core.jit_ext as jit_ext
import thunder.core.prims as prims
import thunder.torch as ltorch
import torch
from thunder.core.compile_data import using_symbolic_values
from thunder.core.interpreter import (
    ProvenanceRecord,
    PseudoInst,
    WrappedValue,
    _interpret_call,
    wrap,
    wrap_const,
)
from thunder.core.proxies import IntegerProxy, NumberProxy, TensorProxy, proxy
from thunder.core.pytree import tree_flatten, tree_unflatten
from thunder.core.trace import get_tracectx

from metatrace.metas import python_executor, concretizations

# (thunder.clang re-exports a ``langctx`` name that hides the submodule from attribute access)
from metatrace.proxies import number_methods, shape_reads
clang_langctx = importlib.import_module("thunder.clang.langctx")
symbol_module = importlib.import_module("thunder.core.symbol")

NOT_HANDLED = object()
_originals: dict[Any, Any] = {}
# Opaque torch functions that take a bool (thunder's no_autocast calls them with a closure's flag).
_OPAQUE_WITH_VALUES = (torch.set_autocast_enabled,)
_swapped_metas: list = []  # (symbol, its meta before install)


# ---------------------------------------------------------------------------------------------
# Static strings, symbolic slices (called by metatrace.interpret.module_state's JitCtx.proxify)
# ---------------------------------------------------------------------------------------------


def _slice_part(slice_provenance: ProvenanceRecord, attr: str, v: Any) -> Any:
    if type(v) is not int:
        return v  # None (checked by the structure guard), or an object thunder handles as is
    history = ProvenanceRecord(
        PseudoInst.LOAD_ATTR,
        inputs=[slice_provenance, ProvenanceRecord(PseudoInst.CONSTANT, inputs=[], value=attr)],
        ext_flag=jit_ext.EXT_FLAG_IS_PROXY_DERIVED,
    )
    p = proxy(v, history=history)
    if hasattr(p, "make_constrainable"):
        p.make_constrainable()
    return p


def _rooted_in_arguments(history) -> bool:
    """The value is an argument, or an element of one (``args[1][0]``): ``metatrace.guards.structure``
    checks the types of those numbers from the call's arguments."""
    while isinstance(history, ProvenanceRecord) and history.inst is PseudoInst.BINARY_SUBSCR and history.inputs:
        history = history.inputs[0]
    return isinstance(history, ProvenanceRecord) and history.inst in (PseudoInst.INPUT_ARGS, PseudoInst.INPUT_KWARGS)


def note_number_leaf(ctx, value: WrappedValue, p: Any) -> None:
    """Remembers a symbolic number read from anywhere but the call's arguments (a global, a
    closure cell, an object's attribute), so that ``metatrace.guards.structure`` checks its type in the
    prologue: thunder's symbolic-values prologue checks no number's type, and a trace made for
    ``n = 2`` bakes in what ``int`` implies (``x * n``'s dtype, ``isinstance(n, int)``)."""
    if (
        isinstance(p, NumberProxy)
        and not p.is_static_constrained()  # thunder's prologue checks type and value
        and using_symbolic_values()
        and type(p.value) in (bool, int, float, complex)
        and not _rooted_in_arguments(value.provenance)
    ):
        leaves = getattr(ctx, "_metatrace_number_leaves", None)
        if leaves is None:
            leaves = ctx._metatrace_number_leaves = {}
        leaves.setdefault(p.name, p)


def proxify_static(ctx, value: WrappedValue) -> Any:
    """Returns NOT_HANDLED for what thunder's own ``JitCtx.proxify`` does right."""
    uvalue = value.value
    if value.original_value is not value.nothing or not using_symbolic_values():
        return NOT_HANDLED
    if type(uvalue) is str:
        # thunder's constant-values path: the trace keeps the string, the prologue checks it.
        value.provenance.ext_flag |= jit_ext.EXT_FLAG_IS_PROXY_DERIVED
        p = proxy(uvalue, history=value.provenance)
        ctx.add_constraint((clang.check_string_value, p, uvalue))
        return p
    if type(uvalue) is slice:
        value.provenance.ext_flag |= jit_ext.EXT_FLAG_IS_PROXY_DERIVED
        parts = [_slice_part(value.provenance, a, getattr(uvalue, a)) for a in ("start", "stop", "step")]
        proxied = slice(*parts)
        value.register_proxy(proxied)
        return proxied
    return NOT_HANDLED


# ---------------------------------------------------------------------------------------------
# Interpreter: tuple/list indexing, len, divmod
# ---------------------------------------------------------------------------------------------


def _concrete_index(idx: WrappedValue) -> WrappedValue:
    uidx = idx.value
    if isinstance(uidx, IntegerProxy) and concretizations.COLLECTOR.get() is not None:
        value = uidx.value
        concretizations.static(uidx, value, "index into a tuple or list")
        return wrap_const(value)
    return idx


def _indexing(original):
    @functools.wraps(original)
    def getitem(self, idx, /):
        return original(self, _concrete_index(idx))

    return getitem


def _len_lookaside(obj):
    def impl(obj):
        if not hasattr(obj, "__len__"):
            raise TypeError(f"object of type '{type(obj).__name__}' has no len()")
        result = getattr(obj, "__len__")()
        if isinstance(result, IntegerProxy):
            return result  # a tensor's symbolic first size
        if not isinstance(result, int):
            raise TypeError(f"'{type(result).__name__}' object cannot be interpreted as an integer")
        if result < 0:
            raise ValueError("__len__() should return >= 0")
        return result

    u = obj.value
    if isinstance(u, TensorProxy) and concretizations.COLLECTOR.get() is not None:
        return _interpret_call(impl, obj)
    return _originals["len"](obj)


def _divmod(self, other):
    return (self // other, self % other)


def _rdivmod(self, other):
    return (other // self, other % self)


# ---------------------------------------------------------------------------------------------
# Python number semantics (operators in metatrace.metas.python_executor)
# ---------------------------------------------------------------------------------------------


def _tracing() -> bool:
    """A trace records here: not a meta (the runtime handles those), not plain Python."""
    trace = get_tracectx()
    return trace is not None and not (trace.scopes and trace.scopes[-1] is None)


def _is_integer(x) -> bool:
    return python_executor.number_type(x) in (bool, int)


def _to_integer(name: str):
    # Written with number prims the prologue's guards can replay (a size computed by
    # ``math.ceil``, as ``clang.arange``'s length, stays expressible in the inputs) and the grad
    # transform knows as non-differentiable: floor(x) = int(prims.floor(x)), likewise ceil,
    # trunc(x) = int(x).
    def method(self):
        if not _tracing():
            return _originals[(NumberProxy, name)](self)
        if isinstance(self, IntegerProxy):
            if self.python_type is int:
                return self  # math.floor(7) is 7
            return prims.convert_element_type(self, int)
        if name == "__floor__":
            return prims.convert_element_type(prims.floor(self), int)
        if name == "__ceil__":
            return prims.convert_element_type(prims.ceil(self), int)
        return prims.convert_element_type(self, int)

    method.__name__ = name
    return method


def _round(self, ndigits=None):
    if not _tracing():
        return _originals[(NumberProxy, "__round__")](self) if ndigits is None else builtins.round(self.value, ndigits)
    if ndigits is None:
        if isinstance(self, IntegerProxy) and self.python_type is int:
            return self
        return python_executor.py_op("round")(self)
    return python_executor.py_op("round_digits")(self, ndigits)


def _pow(a, b, original):
    if not (_tracing() and _is_integer(a) and _is_integer(b)):
        return original()
    # int ** int is an int, unless the exponent is negative: its type depends on the sign.
    negative = python_executor.number_value(b) < 0
    if isinstance(b, NumberProxy):
        concretizations.relation("lt", b, 0, negative)
    return python_executor.py_op("pow_float" if negative else "pow_int")(a, b)


def _pow_method(self, other):
    return _pow(self, other, lambda: _originals[(NumberProxy, "__pow__")](self, other))


def _rpow_method(self, other):
    return _pow(other, self, lambda: _originals[(NumberProxy, "__rpow__")](self, other))


def _floor_divide(a, b):
    """``a // b`` on real numbers: thunder's clang composes it from fmod, div, where and a floor
    through ``int()`` for a float, and from signbit, fmod, ne, logical_and, where and sub for
    integers (eight bound symbols that every later pass re-traces: ``clang.reshape``'s
    ``a.numel // numel`` on every reshape); Python's own ``//`` is one ``prims.py_floordiv`` (the
    prologue's guards replay it; metatrace.metas.python_executor makes it non-differentiable, as floor is)."""
    if (
        isinstance(a, (Number, NumberProxy))
        and isinstance(b, (Number, NumberProxy))
        and any(isinstance(x, NumberProxy) for x in (a, b))
        and complex not in (python_executor.number_type(a), python_executor.number_type(b))
        and _tracing()
    ):
        a, b = number_methods.bool_as_int(a), number_methods.bool_as_int(b)
        if float in (python_executor.number_type(a), python_executor.number_type(b)):
            # float // int is a float in Python; py_floordiv's meta wants one number type
            a, b = _as_float(a), _as_float(b)
        return prims.py_floordiv(a, b)
    return _originals["floor_divide"](a, b)


def _as_float(x):
    if isinstance(x, NumberProxy):
        return x if x.python_type is float else prims.convert_element_type(x, float)
    return float(x)


def _unary_on_bool(name: str):
    """``-b``, ``+b``, ``abs(b)``, ``~b`` of a bool number are the int operations (``-True`` is -1);
    thunder's prims keep the bool type and fail their output check."""

    def method(self):
        original = _originals[(NumberProxy, name)]
        if not _tracing():
            return original(self)
        if getattr(self, "python_type", None) is bool:
            self = prims.convert_element_type(self, int)
            if name == "__pos__":
                return self
        if name == "__pos__" and getattr(self, "python_type", None) in (int, float, complex):
            return self  # +n is n (thunder resolves no "pos" method for numbers)
        return original(self)

    method.__name__ = name
    return method


def _shift(name: str, reflected: bool):
    """``<<`` and ``>>`` on integers (thunder 0.2.6 raises NotImplementedError): Python's operator
    itself, run by the python executor (``metatrace.metas.python_executor``)."""

    def method(self, other):
        a, b = (other, self) if reflected else (self, other)
        if not (_tracing() and _is_integer(a) and _is_integer(b)):
            return _originals[(NumberProxy, name)](self, other)
        return python_executor.py_op(name.strip("_").lstrip("r") if reflected else name.strip("_"))(
            number_methods.bool_as_int(a), number_methods.bool_as_int(b)
        )

    method.__name__ = name
    return method


def _basic_indexing(a, /, key):
    """``clang._basic_indexing`` with eager's clamping: a slice bound below ``-length`` is 0
    (``x[-5:]`` of 3 elements is all of them; thunder raised "start=-5 is not a valid index").
    The comparison is guarded like any other (a symbolic bound keeps its entry on its side)."""
    if not _tracing():
        return _originals["_basic_indexing"](a, key)
    clamped, dim = [], 0
    for x in key:
        if isinstance(x, slice) and dim < len(a.shape):
            length = a.shape[dim]
            start, stop = x.start, x.stop
            if _may_be_below(start) and start < -length:
                start = 0
            if _may_be_below(stop) and stop < -length:
                stop = 0
            x = slice(start, stop, x.step)
        if x is not None:
            dim += 1
        clamped.append(x)
    return _originals["_basic_indexing"](a, clamped)


def _may_be_below(bound) -> bool:
    """A bound that can be below ``-length`` (a length is never negative: a plain int >= 0 never is)."""
    return isinstance(bound, NumberProxy) or (isinstance(bound, int) and bound < 0)


def _where(pred, a, b):
    xs = (pred, a, b)
    if any(isinstance(x, NumberProxy) for x in xs) and _tracing():
        if all(isinstance(x, (Number, NumberProxy)) for x in xs):
            # prims.where has no meta for three numbers
            return python_executor.py_op("where")(pred, a, b)
        if isinstance(pred, NumberProxy):
            # A symbolic condition with tensor branches (clang.copysign(t, n): where(signbit(n),
            # ...)): no executor runs prims.where on a number condition; as a 0-d tensor it
            # stays symbolic and broadcasts like the number would.
            import thunder.core.dtypes as dtypes

            device = next(x.device for x in (a, b) if isinstance(x, TensorProxy))
            pred = _originals["full"]((), pred, device=device, dtype=dtypes.bool8)
    return _originals["where"](pred, a, b)


# ---------------------------------------------------------------------------------------------
# torch.tensor(n), torch.tensor([n, n])
# ---------------------------------------------------------------------------------------------


def _multi_dot_meta(original):
    """``ltorch.multi_dot`` on tensors with symbolic sizes: sizes guarded by value, static views."""

    @functools.wraps(original)
    def meta(tensors, *, out=None):
        if not _tracing() or not any(isinstance(s, NumberProxy) for t in tensors for s in t._shape):
            return original(tensors, out=out)
        why = "multi_dot: thunder chooses the multiplication order from the sizes"
        static = []
        for t in tensors:
            for s in t._shape:
                if isinstance(s, NumberProxy):
                    concretizations.static(s, s.value, why)
            # prims.reshape, not clang's: that returns the tensor itself when the sizes compare equal
            static.append(prims.reshape(t, tuple(s.value if isinstance(s, NumberProxy) else s for s in t._shape)))
        return original(static, out=out)

    return meta


def _tensor_meta(original):
    """``ltorch.tensor``: a number proxy takes thunder's own path for a number (``full((), n)``),
    which its argument check (``isinstance(x, (Number, Sequence))``) refuses for a proxy."""

    @functools.wraps(original)
    def meta(seq_or_number, *, device=None, dtype=None, requires_grad=False, pin_memory=False):
        if not isinstance(seq_or_number, NumberProxy) or requires_grad or pin_memory:
            return original(seq_or_number, device=device, dtype=dtype, requires_grad=requires_grad, pin_memory=pin_memory)
        import thunder.core.dtypes as dtypes
        import thunder.torch as ltorch

        if dtype is None:
            dtype = dtypes.numbertype_to_dtype(dtypes.to_dtype(seq_or_number))
        return ltorch.full((), seq_or_number, dtype=dtype, device=device)

    return meta


def _arange_meta(original):
    """``ltorch.arange``: a float bound makes the default float dtype (torch's rule); thunder asks
    ``isinstance(x, float)``, which a float number proxy is not: ``torch.arange(n * 1.5)`` was
    int64 in the trace (and in the result, under grad)."""

    @functools.wraps(original)
    def meta(start, end=None, step=1, *, device=None, dtype=None):
        if dtype is None and any(
            isinstance(x, NumberProxy) and python_executor.number_type(x) is float for x in (start, end, step)
        ):
            dtype = ltorch.maybe_get_default_dtype(None)
        return original(start, end, step, device=device, dtype=dtype)

    return meta


def _randint_meta(original):
    """``ltorch.randint``: ``prims.randint``'s meta accepts int bounds only: they are baked in."""

    @functools.wraps(original)
    def meta(*args, **kwargs):
        args = list(args)
        bounds = (0,) if len(args) == 2 and isinstance(args[1], (tuple, list)) else (0, 1)
        for i in bounds:
            if i < len(args) and isinstance(args[i], NumberProxy):
                concretizations.static(args[i], args[i].value, "a bound of torch.randint")
                args[i] = args[i].value
        return original(*args, **kwargs)

    return meta


# ---------------------------------------------------------------------------------------------
# t.numel under symbolic values
# ---------------------------------------------------------------------------------------------
#
# thunder's TensorProxy answers the attribute ``t.numel`` with the product of its sizes, as an
# int that can also be called (``t.numel()``), but under symbolic values with the deferred
# product itself, a function: ``fill_value.numel != 1`` (``full`` with a tensor fill value) is
# always true, ``a.numel == 0`` (``logsumexp``, ``_softmax``) always false. While enabled, in
# thunder's torch and clang layers (not in metas: their rewritten code reads the attribute as
# it was), it is the product, callable like thunder's int: the fresh product proxy's class
# becomes a callable subclass (the same object: a copy would collide by name in the trace).


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
for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    setattr(_CallableInt, f"__{_name}__", _plain_int_op(_name))
del _name


class _CallableIntegerProxy(IntegerProxy):
    """An IntegerProxy that returns itself when called: ``t.numel()``."""

    def __call__(self):
        return self


# id(tensor) -> (tensor, scope, product): ``clang.reshape`` reads ``a.numel`` twice and every read
# multiplied the sizes again (a chain of ``prims.mul`` per read). Bounded; each entry holds its
# tensor and scope, so a recycled id never matches another tensor.
_numel_cache: dict[int, tuple] = {}


def _tensor_getattr(self, attr: str, /):
    scope = None
    if attr == "numel" and _tracing():
        scopes = get_tracectx().scopes
        scope = scopes[-1] if scopes else None
        if (cached := _numel_cache.get(id(self))) is not None:
            tensor, where, product = cached
            # the same tensor read again in the same scope: its product is still defined there
            if tensor is self and where is scope and product.name in shape_reads.defined_in(scope):
                return product
    value = _originals[(TensorProxy, "__getattr__")](self, attr)
    if attr != "numel" or callable(value) and isinstance(value, (int, _CallableIntegerProxy)) or not _tracing():
        return value
    if isinstance(self._numel, int):
        # thunder computed the product itself (the tensor was made with constant sizes): its own
        # answer, a plain int in thunder's clang layer. A _CallableInt there reached the prims
        # (``a.numel % numel`` in clang.reshape with a symbolic ``numel``: prims.remainder's meta
        # cannot tree_flatten an int subclass).
        return value
    n = _new_number(self, value() if callable(value) and not isinstance(value, NumberProxy) else value)
    if isinstance(n, int):
        return _CallableInt(n)  # thunder code calls it too: ``a.numel() // v.numel()`` (var's grad)
    if type(n) is IntegerProxy and n.history is None and all(n is not s for s in self._shape):
        n.__class__ = _CallableIntegerProxy  # a product just recorded: nothing else holds it yet
        if scope is not None:
            if len(_numel_cache) >= 1024:
                _numel_cache.clear()
            _numel_cache[id(self)] = (self, scope, n)
        return n
    # a size itself (a 1-d tensor's numel is its size: its class is not ours to change):
    # thunder's deferred product, callable as ``t.numel()``
    return self._numel if callable(self._numel) else value


def _new_number(t: TensorProxy, n):
    """A 1-d tensor's product of sizes is its size (safety_net folds ``1 * n``): as numel it is a
    new number (``1 * n`` recorded), which a symbol may return and a caller may make callable."""
    if isinstance(n, IntegerProxy) and any(n is s for s in t._shape):
        return number_methods.unfolded_times_one(n)
    return n


def _numel_meta(original):
    """``torch.numel(t)`` (``ltorch.numel``) is the product too, not the deferred function."""

    @functools.wraps(original)
    def meta(a, /):
        n = original(a)
        if callable(n) and not isinstance(n, (int, NumberProxy)) and _tracing():
            a.shape  # noqa: B018 - the sizes numel multiplies are bound when the product uses them
            return _new_number(a, n())
        return n

    return meta


def _concrete_numbers(x: Any, why: str = "an element of torch.tensor's data") -> Any:
    leaves, spec = tree_flatten(x)
    if not any(isinstance(leaf, NumberProxy) for leaf in leaves):
        return x
    out = []
    for leaf in leaves:
        if isinstance(leaf, NumberProxy):
            concretizations.static(leaf, leaf.value, why)
            leaf = leaf.value
        out.append(leaf)
    return tree_unflatten(out, spec)


def _set_grad_enabled_meta(original):
    """``torch.set_grad_enabled(flag)``: thunder stores the flag in its compile data and passes it
    to ``torch._C._set_grad_enabled`` after the call, which takes a bool only: a symbolic flag
    (a bool read from a closure, an argument) is baked in, guarded by value."""

    @functools.wraps(original)
    def meta(*args, **kwargs):
        return original(*_concrete_numbers(args, "torch.set_grad_enabled"), **kwargs)

    return meta


def _opaque_with_values(fn, why: str):
    """A lookaside for an opaque function (no proxies reach it: it runs at trace time, as under
    constant values) whose number arguments are baked in, guarded by value."""

    def impl(*args, **kwargs):
        return fn(*_concrete_numbers(args, why), **_concrete_numbers(kwargs, why))

    return jit_ext.interpreter_needs_wrap(impl)


def _isinstance_lookaside(obj, cls):
    """``isinstance(n, int)`` on a number proxy answers for the number it stands for (thunder's
    lookaside asked the proxy class: False, and ``if isinstance(a, int)`` took the wrong branch).
    The number's type is checked by the prologue (``metatrace.guards.structure``'s type check)."""
    u, ucls = obj.value, cls.value
    if isinstance(u, NumberProxy) and getattr(u, "python_type", None) in (bool, int, float, complex):
        try:
            res = issubclass(u.python_type, ucls) or isinstance(u, ucls)
        except TypeError:
            return _originals[isinstance](obj, cls)
        pr = ProvenanceRecord(
            PseudoInst.LOOKASIDE, inputs=[wrap_const(isinstance).provenance, obj.provenance, cls.provenance]
        )
        return wrap(res, provenance=pr)
    return _originals[isinstance](obj, cls)


def _tensor_from_sequence(sequence, *, dtype=None, device=None):
    return _originals["tensor_from_sequence"](_concrete_numbers(sequence), dtype=dtype, device=device)


class _SymbolPrims:
    """``thunder.core.symbol``'s view of ``thunder.core.prims``: the same module, except that
    ``shallow_copy`` of a number proxy is ``convert_element_type`` to its own type.

    ``Symbol.__call__`` copies an argument that a symbol returns unchanged, so that no bound
    symbol outputs its own input; ``prims.shallow_copy``'s meta accepts tensors only, and a
    symbol that returns its number argument (``ltorch.to(in_w / out_w, float32)`` in bilinear
    ``interpolate``) failed. ``convert_element_type`` makes a fresh number proxy that guards can
    replay (one the prologue can compute), and the python executor runs it."""

    def __getattr__(self, name: str):
        return getattr(prims, name)

    @staticmethod
    def shallow_copy(a):
        if isinstance(a, NumberProxy) and type(a.value) in (bool, int, float, complex):
            return prims.convert_element_type(a, type(a.value))
        return prims.shallow_copy(a)


def _methods() -> list[tuple[type, str, Any]]:
    return [
        (NumberProxy, "__divmod__", _divmod),
        (NumberProxy, "__rdivmod__", _rdivmod),
        (NumberProxy, "__floor__", _to_integer("__floor__")),
        (NumberProxy, "__ceil__", _to_integer("__ceil__")),
        (NumberProxy, "__trunc__", _to_integer("__trunc__")),
        (NumberProxy, "__round__", _round),
        (NumberProxy, "__pow__", _pow_method),
        (NumberProxy, "__rpow__", _rpow_method),
        (TensorProxy, "__getattr__", _tensor_getattr),
        (NumberProxy, "__neg__", _unary_on_bool("__neg__")),
        (NumberProxy, "__pos__", _unary_on_bool("__pos__")),
        (NumberProxy, "__abs__", _unary_on_bool("__abs__")),
        (NumberProxy, "__invert__", _unary_on_bool("__invert__")),
        (NumberProxy, "__lshift__", _shift("__lshift__", False)),
        (NumberProxy, "__rlshift__", _shift("__rlshift__", True)),
        (NumberProxy, "__rshift__", _shift("__rshift__", False)),
        (NumberProxy, "__rrshift__", _shift("__rrshift__", True)),
    ]


_swapped_methods: list = []  # (class, name, original function, new function)


def _swap_method(cls: type, name: str, fn) -> None:
    """Replaces a proxy method, and, as thunder does for its own proxy methods (jit_ext's
    ``get_methods_properties``), makes the jit call it opaquely rather than interpret it."""
    original = cls.__dict__[name]
    setattr(cls, name, fn)
    lookaside = jit_ext.interpreter_needs_wrap(jit_ext.record_source_loc_in_symbol_header(fn))
    if cls is TensorProxy:
        lookaside = jit_ext.ensure_recursive_proxies(lookaside)
    jit_ext._general_jit_lookaside_map[fn] = lookaside
    _swapped_methods.append((cls, name, original, fn))


def install() -> None:
    if _originals:
        return
    lookasides = interpreter._default_provenance_tracking_lookaside_map
    for key in (tuple.__getitem__, list.__getitem__):
        _originals[key] = lookasides[key]
        lookasides[key] = _indexing(lookasides[key])
    _originals["len"] = interpreter._default_lookaside_map[len]
    interpreter._default_lookaside_map[len] = _len_lookaside
    _originals["tensor_from_sequence"] = clang.tensor_from_sequence
    clang.tensor_from_sequence = functools.wraps(clang.tensor_from_sequence)(_tensor_from_sequence)
    _originals["where"] = clang.where
    _originals["full"] = clang.full
    clang.where = functools.wraps(clang.where)(_where)
    _originals["_basic_indexing"] = clang._basic_indexing
    clang._basic_indexing = functools.wraps(clang._basic_indexing)(_basic_indexing)
    _originals["floor_divide"] = clang.floor_divide
    clang.floor_divide = functools.wraps(clang.floor_divide)(_floor_divide)
    # NumberProxy's ``//`` resolves the method through the clang language context's own map
    _originals["floor_divide_method"] = clang_langctx._method_name_to_fn_map["floor_divide"]
    clang_langctx._method_name_to_fn_map["floor_divide"] = clang.floor_divide
    for sym, wrap in (
        (ltorch.tensor, _tensor_meta),
        (ltorch.randint, _randint_meta),
        (ltorch.arange, _arange_meta),
        (ltorch.numel, _numel_meta),
        (ltorch.multi_dot, _multi_dot_meta),
        (ltorch._set_grad_enabled_with_warning, _set_grad_enabled_meta),
    ):
        _swapped_metas.append((sym, sym.meta))
        object.__setattr__(sym, "meta", wrap(sym.meta))
    for cls, name, fn in _methods():
        _originals[(cls, name)] = cls.__dict__[name]
        _swap_method(cls, name, fn)
    call = _CallableIntegerProxy.__call__
    jit_ext._general_jit_lookaside_map[call] = jit_ext.interpreter_needs_wrap(call)
    _originals["symbol.prims"] = symbol_module.prims
    _originals[isinstance] = jit_ext._general_jit_lookaside_map[isinstance]
    jit_ext._general_jit_lookaside_map[isinstance] = _isinstance_lookaside
    for fn in _OPAQUE_WITH_VALUES:
        _originals[("opaque", fn)] = jit_ext._general_jit_lookaside_map.get(fn)
        jit_ext._general_jit_lookaside_map[fn] = _opaque_with_values(fn, f"an argument of {fn.__name__}")
    symbol_module.prims = _SymbolPrims()


def uninstall() -> None:
    """Undoes ``install`` (also a partial one: each step is undone only if it was done)."""
    for cls, name, original, fn in reversed(_swapped_methods):
        setattr(cls, name, original)
        jit_ext._general_jit_lookaside_map.pop(fn, None)
    _swapped_methods.clear()
    if "symbol.prims" in _originals:
        symbol_module.prims = _originals["symbol.prims"]
    if isinstance in _originals:
        jit_ext._general_jit_lookaside_map[isinstance] = _originals[isinstance]
    for fn in _OPAQUE_WITH_VALUES:
        if ("opaque", fn) in _originals:
            if _originals[("opaque", fn)] is None:
                jit_ext._general_jit_lookaside_map.pop(fn, None)
            else:
                jit_ext._general_jit_lookaside_map[fn] = _originals[("opaque", fn)]
    jit_ext._general_jit_lookaside_map.pop(_CallableIntegerProxy.__call__, None)
    for sym, meta in reversed(_swapped_metas):
        object.__setattr__(sym, "meta", meta)
    _swapped_metas.clear()
    if "floor_divide_method" in _originals:
        clang_langctx._method_name_to_fn_map["floor_divide"] = _originals["floor_divide_method"]
    for name in ("floor_divide", "where", "tensor_from_sequence", "_basic_indexing"):
        if name in _originals:
            setattr(clang, name, _originals[name])
    if "len" in _originals:
        interpreter._default_lookaside_map[len] = _originals["len"]
    lookasides = interpreter._default_provenance_tracking_lookaside_map
    for key in (tuple.__getitem__, list.__getitem__):
        if key in _originals:
            lookasides[key] = _originals[key]
    _originals.clear()
