"""Concretizations outside the rewritten metas: thunder's clang/torch layers and user code.

thunder does not interpret its own symbols' code, so there ``bool(n)``, ``n.__index__()``,
``int(n)``, ``float(n)`` on a NumberProxy read its value silently (``clang.transpose``'s identity
shortcut, ``utils.canonicalize_dim``, ``_split_n``'s ``range(n)``). While enabled these report to
the guard collector: a truth test as the relation ``n != 0`` it decided, the others as the value
baked in. Hashing is left alone: trace printing hashes size proxies.

Unrewritten thunder code that a meta calls (``TensorProxy(...)`` checks its shape with
``baseutils.check_valid_shape``) compares and adds NumberProxies while the trace scope is
switched off, which makes numbers with no producer. While a prim's meta runs, NumberProxy's
comparison and arithmetic operators therefore go through metatrace's runtime: comparisons give a
relation the guards can express (decided at once: the result is a plain bool), arithmetic is recorded like the rewritten metas' own.

Outside metas (thunder's autograd rules: ``if s == 1`` on a size) thunder records the
comparison itself into the trace, but the grad transform's dead-code elimination can drop it, or
it sits in a subsymbol or a scope that was thrown away, before the guards are projected; so every
bound symbol that computes a number is handed to the collector as it is made
(``BoundSymbol.__post_init__``, ``concretizations.produced``).

In user code, ``if flag > 5`` reaches the interpreter's ``bool`` lookaside, which marks the
proxy static (an equality guard). metatrace's lookaside reports the relation instead, so every
value on the same side of it reuses the entry.
"""

from __future__ import annotations

import types

import thunder.core.jit_ext as jit_ext
import thunder.core.prims as prims
from thunder.core.interpreter import INTERPRETER_SIGNALS, _interpret_call, default_lookaside, do_raise, unwrap, wrap_const
from thunder.core.proxies import IntegerProxy, NumberProxy

from thunder.core.symbol import BoundSymbol
from thunder.core.trace import get_tracectx

import metatrace.metas.record_state as record_state
import metatrace.metas.runtime as runtime
from metatrace.state import compile_context
from metatrace.metas import folds, number_ops, python_executor, concretizations, unbacked
from metatrace.metas.relations import Relation
from metatrace.metas.torch_ops import data_dependent, data_dependent_ops
from metatrace.patching import Patch, attribute, item
from metatrace.proxies import float_numbers

# NumberProxy operator -> (runtime function, whether its operands are swapped)
_COMPARISONS = {"__eq__": runtime.eq, "__ne__": runtime.ne, "__lt__": runtime.lt, "__le__": runtime.le,
                "__gt__": runtime.gt, "__ge__": runtime.ge}
_ARITHMETIC = {"__add__": (runtime.add, False), "__radd__": (runtime.add, True), "__sub__": (runtime.sub, False),
               "__rsub__": (runtime.sub, True), "__mul__": (runtime.mul, False), "__rmul__": (runtime.mul, True),
               "__floordiv__": (runtime.floordiv, False), "__rfloordiv__": (runtime.floordiv, True),
               "__mod__": (runtime.mod, False), "__rmod__": (runtime.mod, True)}


def in_meta() -> bool:
    """True while a prim's meta runs: the trace's innermost scope is switched off."""
    trace = get_tracectx()
    return trace is not None and bool(trace.scopes) and trace.scopes[-1] is None


def _decides_at_once(trace) -> bool:
    """True inside a prim's meta (the innermost scope is switched off) and inside the body of one
    of thunder's composite symbols (a scope below the trace's top level): thunder's own code, where
    a comparison of numbers is a check or a branch (``compute_broadcast_shape``'s ``s == 1``), not
    a value. Deciding there costs one guard instead of a ``prims.eq`` bound symbol that every later
    pass re-traces and the computation evaluates on every call. At the top level (user code,
    autograd rules) thunder's bool proxy stays: it may be a value."""
    return trace is not None and (len(trace.scopes) > 1 or (bool(trace.scopes) and trace.scopes[-1] is None))


def _comparison(name: str, fn):
    return lambda original: _compare(name, fn, original)


def _compare_route(name: str, self, other) -> str:
    """Which way ``self <name> other`` goes: ``""`` for thunder's operator, else metatrace's path
    (``reflexive``, ``decide``, ``exact``). Reads state only: the jit's lookaside decides it natively."""
    if isinstance(other, (int, float, NumberProxy)):
        if unbacked.is_unbacked_size(self) or unbacked.is_unbacked_size(other):
            return "unbacked"  # a size read from tensor data: decided where every value agrees, or an error
        # While thunder interprets (a guard collector listens) and through the passes after it
        # (the grad transform, executor passes: ``compile_context.interpreting()``), where a re-run
        # composite repeats the decisions its first run made and guarded.
        if (collector := compile_context.collector()) is not None or compile_context.interpreting():
            if self is other and isinstance(self, IntegerProxy):
                return "reflexive"
            if _decides_at_once(get_tracectx()) and not _reads_tensor_data(collector, self, other):
                return "decide"
        if get_tracectx() is not None and python_executor.exact_comparison(self, other):
            return "exact"
    return ""


def _compare(name: str, fn, original):
    op = name.strip('_')

    def compare(self, other):
        route = _compare_route(name, self, other)
        if route == "reflexive":
            return number_ops.REFLEXIVE[op]  # i == i: no guard, no bound symbol
        if route == "unbacked":
            # (a SymBool when no value of the size decides it: its truth raises DataDependentError)
            return runtime.truth(fn(self, other))
        if route == "decide":
            # thunder would return a bool proxy (in a meta: one with no producer); the relation
            # it decides is guarded right away and a plain bool returned.
            return runtime.truth(fn(self, other))
        if route == "exact":
            return python_executor.py_op(f"cmp_{op}")(self, other)
        return original(self, other)

    compare.__name__ = name
    compare.__wrapped__ = original
    compare.route = lambda self, other: _compare_route(name, self, other)
    return compare


def _reads_tensor_data(collector, *operands) -> bool:
    """A number read from tensor data (``item``) has no trace-time value to decide on: its
    comparison stays thunder's bool proxy (an error only if something decides on it)."""
    source = getattr(collector, "tensor_data_source", None)
    return source is not None and any(isinstance(x, NumberProxy) and source(x) is not None for x in operands)


def is_bool_number(x) -> bool:
    """A Python bool, or a number proxy standing for one (a comparison's result)."""
    return type(x) is bool or (isinstance(x, NumberProxy) and getattr(x, "python_type", None) is bool)


def bool_as_int(x):
    """Python's arithmetic on a bool is on the int it is (``True + True`` is 2, ``-True`` is -1):
    thunder's number prims keep the bool type instead (``(n > 0) + (n > 1)`` was True)."""
    if type(x) is bool:
        return int(x)
    if isinstance(x, NumberProxy) and getattr(x, "python_type", None) is bool:
        return prims.convert_element_type(x, int)
    return x


def _arithmetic(name: str, fn, swapped: bool):
    return lambda original: _arithmetic_method(name, fn, swapped, original)


def _arithmetic_route(fold, self, other) -> str:
    """Which way ``self <op> other`` goes: ``""`` for thunder's operator, else metatrace's path
    (``record``, ``bool``, ``fold``). Reads state only: the jit's lookaside decides it natively.
    ``fold``: the operator's identity fold (``metatrace.metas.runtime.FOLDS``) over its operands
    in order, or None."""
    number = isinstance(other, (int, float, NumberProxy))
    if number and record_state.current_recorder() is not None and in_meta():
        return "record"
    if number and (is_bool_number(self) or is_bool_number(other)) and get_tracectx() is not None:
        return "bool"
    if (
        fold is not None
        and (compile_context.collector() is not None or compile_context.interpreting()
             or unbacked.is_unbacked(self) or unbacked.is_unbacked(other))
        and fold(self, other) is not folds.MISSING
    ):
        # ``numel = 1; numel *= length`` in clang.reshape, ``size - size`` in grad rules (the zero
        # widths of pad's and slice's cotangents): an integer, with no prim for every later pass
        # to re-trace (the runtime's rules: integer symbols and integer literals only). Also outside a
        # compile for a number with no value (thunder's check_trace re-runs metas: ``1 * n`` must be n)
        return "fold"
    return ""


def _arithmetic_method(name: str, fn, swapped: bool, original):
    rule = runtime.FOLDS.get(fn)
    fold = None if rule is None else (lambda a, b: rule(b, a)) if swapped else rule

    def arithmetic(self, other):
        route = _arithmetic_route(fold, self, other)
        if route == "record":
            return fn(other, self) if swapped else fn(self, other)
        if route == "bool":
            # the bool operands as ints (Python's result type), then the operator again
            return getattr(bool_as_int(self), name)(bool_as_int(other))
        if route == "fold":
            return fold(self, other)
        if (fn is runtime.mul and not compile_context.interpreting() and isinstance(self, IntegerProxy)
                and (isinstance(other, IntegerProxy) or type(other) is int)
                and (unbacked.is_unbacked(self) or unbacked.is_unbacked(other))):
            # outside a compile (thunder's check_trace re-runs metas), a product of a size read from
            # data whose factors are known, so element counts compare (unbacked.product_outside_compile)
            return unbacked.product_outside_compile(*((other, self) if swapped else (self, other)))
        return original(self, other)

    arithmetic.__name__ = name
    arithmetic.__wrapped__ = original  # thunder's, for metatrace.metas.torch_ops.torch_metas.unfolded_times_one
    arithmetic.route = lambda self, other: _arithmetic_route(fold, self, other)
    arithmetic.fold = fold
    return arithmetic


def _report_producer(bsym) -> None:
    """``BoundSymbol.__post_init__`` while enabled: a bound symbol that computes a number is handed
    to the guard collector when one is listening, so a concretized number can be projected to the
    inputs even when its producer sits in a subsymbol, in a scope that was discarded, or was
    dropped by the grad transform's dead-code elimination. One check per bound symbol, no scans."""
    if compile_context.collector() is None:
        return
    out = bsym.output
    if isinstance(out, NumberProxy) or (
        isinstance(out, tuple) and out and (isinstance(out[0], NumberProxy) or unbacked.is_unbacked_size(out[-1]))
    ):
        if bsym.sym.id != prims.PrimIDs.SHAPE:  # shape re-binds a tensor's sizes, never defines them
            concretizations.produced(bsym)
            # float(n) is exact for |n| <= 2**53 only: what the guards' algebra assumes, guarded
            float_numbers.guard_exact_float(bsym)


def _report_truth(self, value: bool) -> None:
    concretizations.relation(Relation.NE, self, 0, value)


def _bool(original):
    def __bool__(self) -> bool:
        if self.value is None:  # read from tensor data: decided where every value (or the site) agrees
            if (decided := unbacked.decide(Relation.NE, self, 0, record_state.functional_trace())) is not None:
                return decided
            _report_truth(self, None)  # the report raises DataDependentError
        value = original(self)
        _report_truth(self, value)
        return value

    __bool__.__wrapped__ = original
    __bool__.report = _report_truth
    return __bool__


def _baking_in(name: str, why: str, value_of_self: bool):
    """A conversion dunder that reports the value it bakes in: ``__index__`` reports its result,
    ``int()``/``float()`` the number's own value (what the guard compares)."""

    def report(self, value) -> None:
        concretizations.bake_in(self, self.value if value_of_self else value, why)

    def wrap(original):
        def method(self):
            if self.value is None:  # read from tensor data: the report raises DataDependentError
                report(self, None)
            value = original(self)
            report(self, value)
            return value

        method.__name__ = name
        method.__wrapped__ = original
        method.report = report
        return method

    return wrap


_index = _baking_in("__index__", "__index__", value_of_self=False)
_int = _baking_in("__int__", "int()", value_of_self=True)
_float = _baking_in("__float__", "float()", value_of_self=True)


# Lookasides for the wrappers above. thunder's jit interprets a Python function line by line
# (about 100x native) unless a lookaside takes the call; thunder's own NumberProxy methods are
# such lookasides (jit_ext's get_methods_properties: called opaquely). Without these, ``T * 2`` on
# a size in user code interpreted the wrapper, its checks and the guard recording under it before
# reaching thunder's method. Each lookaside decides the wrapper's route natively (the route
# functions only read state) and then calls thunder's method through the interpreter, exactly as
# the interpreted wrapper did (so thunder's lookaside for it, its provenance and source location
# are unchanged); a rare route of metatrace's own (a bool operand, a call with unusual arguments)
# interprets a copy of the wrapper, as before. What a conversion reports to the guard collector
# is reported natively: metatrace's bookkeeping, no user code.


def _interpreted_copy(fn):
    """``fn`` as a distinct function object (the same code, globals and closure): no lookaside
    is registered for it, so the jit interprets it as it interpreted ``fn``."""
    copy = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    copy.__qualname__ = fn.__qualname__
    return copy


def _binary_lookaside(wrapper):
    """``wrapper.route(self, other)`` (unwrapped values): ``""`` calls thunder's method,
    ``"fold"`` returns the folded operand (its WrappedValue, as the interpreted ``return`` did)
    or constant, any other route interprets the wrapper."""
    original, route, interpreted = wrapper.__wrapped__, wrapper.route, _interpreted_copy(wrapper)
    fold = getattr(wrapper, "fold", None)

    def lookaside(*args, **kwargs):
        if len(args) == 2 and not kwargs:
            try:
                way = route(unwrap(args[0]), unwrap(args[1]))
            except Exception:
                way = None  # the interpreted wrapper raises it where the user's code can see it
            if way == "":
                return _interpret_call(original, *args)
            if way == "fold":
                folded = fold(unwrap(args[0]), unwrap(args[1]))
                for a in args:
                    if unwrap(a) is folded:
                        return a
                return wrap_const(folded)
        return _interpret_call(interpreted, *args, **kwargs)

    return lookaside


def _conversion_lookaside(wrapper):
    """``__bool__``, ``__index__``, ``__int__``, ``__float__``: thunder's method through the
    interpreter, then the wrapper's report (a relation or a value baked in) natively."""
    original, report, interpreted = wrapper.__wrapped__, wrapper.report, _interpreted_copy(wrapper)

    def lookaside(*args, **kwargs):
        if len(args) != 1 or kwargs:
            return _interpret_call(interpreted, *args, **kwargs)
        res = _interpret_call(original, args[0])
        if res is INTERPRETER_SIGNALS.EXCEPTION_RAISED:
            return res
        try:
            report(unwrap(args[0]), unwrap(res))
        except Exception as e:
            return do_raise(e)
        return res

    return lookaside


def _bool_lookaside(original):
    def bool_lookaside(wrapped_x):
        x = wrapped_x.value
        if isinstance(x, NumberProxy) and compile_context.collector() is not None:
            concretizations.relation(Relation.NE, x, 0, None if x.value is None else bool(x.value))
            lookaside = default_lookaside(bool) or bool
            return lookaside(wrapped_x)
        if not any("__bool__" in vars(k) or "__len__" in vars(k) for k in type(x).__mro__):
            # true, as Python decides from the type's own methods. thunder's getattr also finds
            # the metaclass's (an Enum member got EnumType.__bool__) and asks the object for
            # ``__len__`` (a class such as ``str`` has an unbound one): both raised, stock too
            return wrap_const(True)
        return original(wrapped_x)

    return bool_lookaside


def _post_init(original):
    def post_init(bsym):
        original(bsym)
        _report_producer(bsym)
        sym = bsym.sym
        if sym.id in data_dependent_ops.NAMES:
            data_dependent_ops.remember(bsym)
        elif data_dependent.sharing() and (sym.id == prims.PrimIDs.COPY_ or (sym.tags and prims.OpTags.IN_PLACE in sym.tags)):
            data_dependent.written_in_place()
        if isinstance(out := bsym.output, NumberProxy) and out.value is None and sym.id == prims.PrimIDs.MUL:
            unbacked.remember_op(sym.name, bsym.args, out)  # thunder's own product (a numel) of a size read from data

    return post_init


def _wrapped(cls, name: str, make, why: str) -> list[Patch]:
    """Rows replacing ``cls.name`` by ``make(thunder's method)`` and registering the wrapper's
    lookaside with the jit. The wrapper is made here, when the stage's rows are made (install's
    stages run after the earlier ones were applied): the lookaside map is keyed by it."""
    wrapper = make(getattr(cls, name))
    lookaside = _binary_lookaside(wrapper) if hasattr(wrapper, "route") else _conversion_lookaside(wrapper)
    return [
        attribute(cls, name, wrapper, why),
        item(jit_ext._general_jit_lookaside_map, wrapper, lookaside,
             f"the jit decides {name}'s route natively instead of interpreting the wrapper",
             label="thunder.core.jit_ext._general_jit_lookaside_map"),
    ]


def patches() -> list[Patch]:
    concretized = "report the value baked in (thunder reads .value silently)"
    return [
        *(row for name, fn in _COMPARISONS.items()
          for row in _wrapped(NumberProxy, name, _comparison(name, fn),
                              "comparisons inside thunder's clang/torch layers return guarded symbolic booleans")),
        *(row for name, (fn, swapped) in _ARITHMETIC.items()
          for row in _wrapped(NumberProxy, name, _arithmetic(name, fn, swapped),
                              "arithmetic inside a meta is recorded (runtime)")),
        attribute(BoundSymbol, "__post_init__", _post_init,
                  "every number-producing bound symbol reaches the guard collector (projection to the inputs)", wrap=True),
        *_wrapped(NumberProxy, "__bool__", _bool, concretized),
        *_wrapped(IntegerProxy, "__index__", _index, concretized),
        *_wrapped(NumberProxy, "__int__", _int, concretized),
        *_wrapped(NumberProxy, "__float__", _float, concretized),
        item(jit_ext._general_jit_lookaside_map, bool, _bool_lookaside,
             "bool lookaside reports the relation a user-code branch decided (thunder only marks static)", wrap=True,
             label="thunder.core.jit_ext._general_jit_lookaside_map"),
    ]
