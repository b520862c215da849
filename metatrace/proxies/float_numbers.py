"""Floats computed from symbolic numbers stay symbolic (issue 17).

Under ``cache="symbolic values"`` thunder turns a number input or a tensor size into a
NumberProxy, but the float built from it is read as a constant: ``float(n)`` and ``math.sqrt(n)``
call ``NumberProxy.__float__``, which the safety net guards by equality (one compile per size:
``1.0 / math.sqrt(k.size(-1))`` in attention). While enabled:

- In user code (the jit's lookasides), ``float(n)`` is ``prims.convert_element_type(n, float)``
  and ``math.sqrt(n)`` is ``prims.sqrt`` of that float, both number ops of
  ``metatrace.metas.number_ops`` (the prologue replays them, the python executor runs them), so a
  decision on such a float is guarded by its relation, computed exactly as Python computes it
  (NaN, signed zeros and rounding included: the guard evaluates the same Python operations).
  ``math.sqrt`` of a negative number raises ``ValueError`` at trace time, as in eager; the
  python executor's implementation is ``math.sqrt`` itself.
- In thunder's own decompositions (not interpreted), Python requires ``int()`` to return an int:
  ``F.interpolate`` computes each output size as ``int(scale * size)``. Its meta runs with
  ``int`` of a float symbol as ``math.trunc`` (``prims.convert_element_type(x, int)``, replayable),
  so the output sizes are symbols and the branches on them (``output_dim <= input_dim``,
  ``output_dim % input_dim == 0``) are relations.
- ``torch.einsum`` asks ``opt_einsum.contract_path`` for a contraction order with the operands'
  shapes; opt_einsum hashes and compares the sizes (each an equality guard). With at most two
  operands the order is unique and what thunder reads of it (the operand indices, the labels
  contracted, the equation and whether it is an outer product) does not depend on the sizes, so
  the path is computed with the sizes' values, unguarded. With three or more the order depends on
  the sizes: each is guarded by equality, the guard naming einsum's contraction order.

- thunder's automatically registered torch ops (``Tensor.new_full``) run torch's meta on the
  numbers' values, read silently (a wrong result: ``x.new_full((n,), 2.0).shape[0]`` stayed the
  first ``n``): their metas now guard each number by equality, naming why. (``Tensor.new_full``
  and the other ``new_*`` factories are traced as ``full``/``empty``:
  metatrace.metas.torch_ops.torch_decompositions; what those do not cover reaches these metas.)

``patches()`` returns the rows that put these in place.
"""

from __future__ import annotations

import functools
import math
import types
from collections.abc import Callable

import thunder.core.dtypes as dtypes
import thunder.core.jit_ext as jit_ext
import thunder.core.prims as prims
from thunder.core.interpreter import ProvenanceRecord, PseudoInst, do_raise, wrap, wrap_const
from thunder.core.proxies import FloatProxy, IntegerProxy, NumberProxy

from metatrace.state import compile_context
from metatrace.metas import concretizations
from metatrace.metas.concretizations import Reason, ReasonKind
from metatrace.metas.relations import Relation
from metatrace.metas.torch_ops.auto_registered import FAKE_ARG_WHY, auto_registered_symbols
from metatrace.patching import SYMBOL_METAS, Patch, attribute, item



def _collecting() -> bool:
    """metatrace traces under symbolic values (a guard collector listens)."""
    return compile_context.collector() is not None


def _symbolic_number(x) -> bool:
    """A number proxy that stays symbolic: not one thunder treats as a constant (a module's
    configuration, ``config.head_size``: its value is checked by thunder's prologue, and
    ``math.sqrt`` of it is a constant, as before)."""
    return (
        isinstance(x, NumberProxy)
        and getattr(x, "python_type", None) in (bool, int, float)
        and not x.is_static_constrained()
    )


def as_float(x):
    """``float(x)`` on a number proxy, recorded: the proxy itself when it is a float."""
    if isinstance(x, FloatProxy) or getattr(x, "python_type", None) is float:
        return x
    return prims.convert_element_type(x, float)


def sqrt(x):
    """``math.sqrt(x)`` on a number proxy, recorded (a float)."""
    return prims.sqrt(as_float(x))


EXACT = 2**53  # every int of at most this magnitude is exact in a double


def guard_exact_float(bsym) -> None:
    """``convert_element_type(n, float)`` of an integer symbol (``float(n)``, thunder's ``n / m``):
    the guards' algebra reads ``float(n)`` as ``n`` (``metatrace.guards.simplify``: integers
    converted to float are exact), which holds for ``|n| <= 2**53`` only (``float(2**53 + 1) ==
    2**53 + 1`` is False). So the conversion is guarded by that range (``GuardCollector.float_range``);
    for a value outside it the entry's guards are checked as recorded, unsimplified
    (``GuardCollector.inexact_float``). Called for every recorded bound symbol
    (``BoundSymbol.__post_init__``) while a guard collector listens."""
    if bsym.sym.id is not prims.PrimIDs.CONVERT_ELEMENT_TYPE or len(bsym.args) != 2:
        return
    x, to = bsym.args
    if not isinstance(x, IntegerProxy) or getattr(x, "python_type", None) is not int:
        return
    try:
        target = to if isinstance(to, type) else dtypes.dtype_to_numbertype(to)
    except Exception:
        return
    if target not in (float, complex):
        return
    value = x.value
    if type(value) is not int:
        return  # read from tensor data (no value): a decision on it raises DataDependentError
    if -EXACT <= value <= EXACT:
        collector = compile_context.collector()
        if hasattr(collector, "float_range"):
            collector.float_range(x, EXACT)
        else:
            concretizations.relation(Relation.LE, x, EXACT, True)
            concretizations.relation(Relation.GE, x, -EXACT, True)
    else:
        # The range guard would not hold: this entry's guards are checked as recorded (Python
        # evaluates float(n) exactly), not simplified (metatrace.guards.program_builder).
        collector = compile_context.collector()
        if collector is not None:
            try:
                collector.inexact_float = True
            except AttributeError:
                concretizations.bake_in(x, value, f"float() of an int beyond 2**53 ({value})")


def _wrapped_result(fn, res, args):
    pr = ProvenanceRecord(PseudoInst.OPAQUE, inputs=[wrap_const(fn).provenance, *(a.provenance for a in args)])
    return wrap(res, provenance=pr)


def _float_lookaside(original):
    """``float(n)`` of a symbolic number: recorded. ``original``: the lookaside there was (none in
    thunder 0.2.6: :data:`metatrace.patching.MISSING`)."""

    def lookaside(*args, **kwargs):
        if len(args) == 1 and not kwargs and _collecting() and _symbolic_number(args[0].value):
            return _wrapped_result(float, as_float(args[0].value), args)
        if callable(original):
            return original(*args, **kwargs)
        # float is a type: without a lookaside the interpreter calls it through type.__call__
        from thunder.core.interpreter import _type_call_lookaside

        return _type_call_lookaside(wrap_const(float), *args, **kwargs)

    return lookaside


def _sqrt_lookaside(original):
    def lookaside(*args, **kwargs):
        if len(args) == 1 and not kwargs and _collecting() and _symbolic_number(args[0].value):
            try:
                result = sqrt(args[0].value)
            except ValueError as e:  # a negative number, as eager: the user's ``except`` may take it
                return do_raise(e)
            return _wrapped_result(math.sqrt, result, args)
        if callable(original):
            return original(*args, **kwargs)
        return jit_ext.interpreter_needs_wrap(math.sqrt)(*args, **kwargs)

    return lookaside


_LOOKASIDES = {float: _float_lookaside, math.sqrt: _sqrt_lookaside}


# ---------------------------------------------------------------------------------------------
# thunder's own code: interpolate's int(), einsum's contraction path
# ---------------------------------------------------------------------------------------------


def _trunc_int(x=0, *args, **kwargs):
    """``int`` as thunder's interpolate calls it: ``int(x)`` of a float symbol is ``math.trunc(x)``
    (Python's int of a float truncates, and raises on inf and NaN as trunc does), recorded; an int
    symbol stays itself; anything else is Python's ``int``."""
    if not args and not kwargs and isinstance(x, NumberProxy) and _collecting():
        if isinstance(x, IntegerProxy) and x.python_type is int:
            return x
        if getattr(x, "python_type", None) in (bool, float):
            return math.trunc(x)
    return int(x, *args, **kwargs)


class _IntType(type):
    """``int`` for thunder's interpolate: ``isinstance(x, int)`` as for ``int``, ``int(x)`` as
    :func:`_trunc_int`."""

    def __instancecheck__(cls, x):
        return isinstance(x, int)

    def __subclasscheck__(cls, c):
        return issubclass(c, int)

    def __call__(cls, *args, **kwargs):
        return _trunc_int(*args, **kwargs)


class _TruncInt(int, metaclass=_IntType):
    pass


def _rebound(fn, globals_: dict):
    """``fn``'s code run with ``globals_`` (thunder's module globals with some names replaced)."""
    new = types.FunctionType(fn.__code__, globals_, fn.__name__, fn.__defaults__, fn.__closure__)
    new.__kwdefaults__ = fn.__kwdefaults__
    return new


def _meta_with_globals(original_meta, replace: Callable[[dict], None]):
    """thunder's ``original_meta`` run, while guards are collected, with ``thunder.torch``'s
    globals (read live at each call) changed by ``replace``; otherwise the meta itself."""
    import inspect

    import thunder.torch as ltorch

    raw = inspect.unwrap(original_meta)

    @functools.wraps(original_meta)
    def meta(*args, **kwargs):
        if not _collecting():
            return original_meta(*args, **kwargs)
        g = dict(vars(ltorch))
        replace(g)
        from thunder.core.langctxs import Languages, langctx

        return langctx(Languages.TORCH)(_rebound(raw, g))(*args, **kwargs)

    return meta


def _interpolate_meta(original_meta):
    def replace(g: dict) -> None:
        # thunder's helpers, with int() of a float symbol recorded
        g["int"] = _TruncInt
        for name in ("_interpolate_scale_factor_helper", "_interpolate_size_helper"):
            g[name] = _rebound(g[name], g)

    return _meta_with_globals(original_meta, replace)


# Reasons explain names before any other next to the equality they pinned.
_EINSUM_WHY = Reason(ReasonKind.NAMED, "torch.einsum's contraction order over 3 or more operands depends on the sizes")


class _ContractPathValues:
    """``opt_einsum`` as thunder's einsum sees it, with ``contract_path`` over shapes' values for
    at most two operands (see the module docstring)."""

    def __init__(self, module):
        self._module = module

    def __getattr__(self, name):
        return getattr(self._module, name)

    def contract_path(self, *operands, **kwargs):
        eq, *tensors = operands
        if _collecting() and all(hasattr(t, "shape") for t in tensors):
            shapes = [tuple(s.value if isinstance(s, NumberProxy) and s.value is not None else s for s in t.shape)
                      for t in tensors]
            if all(type(s) is int for shape in shapes for s in shape):
                if len(tensors) > 2:
                    # the contraction order depends on the sizes: each is baked in, guarded by equality
                    why = _EINSUM_WHY
                    for t in tensors:
                        for size in t.shape:
                            if isinstance(size, NumberProxy):
                                concretizations.bake_in(size, size.value, why)
                return self._module.contract_path(eq, *shapes, shapes=True, **kwargs)
        return self._module.contract_path(*operands, **kwargs)


def _einsum_meta(original_meta):
    import thunder.torch as ltorch

    shim = _ContractPathValues(ltorch.opt_einsum)
    return _meta_with_globals(original_meta, lambda g: g.update(opt_einsum=shim))




def _guarding_meta(original):
    """The meta of a torch op thunder registered automatically (``meta_adaptor``: torch's meta runs
    on fake tensors, ``_get_fake_arg`` reading a number proxy's value silently, so that
    ``x.new_full((n,), 2.0).shape[0]`` stayed 3 for every ``n``). The numbers are baked in: each is
    guarded by equality, the guard naming why."""
    from thunder.core.pytree import tree_flatten

    @functools.wraps(original)
    def meta(*args, **kwargs):
        for leaf in tree_flatten((args, kwargs))[0]:
            if isinstance(leaf, NumberProxy) and leaf.value is not None:
                concretizations.bake_in(leaf, leaf.value, FAKE_ARG_WHY)
        return original(*args, **kwargs)

    return meta


def _symbol_metas():
    import thunder.torch as ltorch

    return ((ltorch.interpolate, _interpolate_meta), (ltorch.einsum, _einsum_meta))


def patches() -> list[Patch]:
    """Rows for the ``float``/``math.sqrt`` lookasides, the metas of interpolate and einsum, and
    the automatically registered torch ops' metas (their number arguments guarded)."""
    rows = [
        item(jit_ext._general_jit_lookaside_map, fn, lookaside,
             "float(n) and math.sqrt(n) of a symbolic number are recorded number ops",
             wrap=True, label="thunder.core.jit_ext._general_jit_lookaside_map")
        for fn, lookaside in _LOOKASIDES.items()
    ]
    wrapped = set()
    for sym, wrap_meta in _symbol_metas():
        wrapped.add(id(sym))
        rows.append(attribute(sym, "meta", wrap_meta, "interpolate and einsum keep sizes and scales symbolic",
                              wrap=True, label=SYMBOL_METAS))
    rows += [
        attribute(sym, "meta", _guarding_meta, "number arguments of automatically registered torch ops are guarded",
                  wrap=True, label=SYMBOL_METAS)
        for sym in auto_registered_symbols() if id(sym) not in wrapped
    ]
    return rows
