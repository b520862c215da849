"""Sizes read from tensor data ("unbacked" sizes, after torch's ShapeEnv): numbers with no
trace-time value, and the decisions that can be made on them anyway.

``torch.nonzero(x)``'s row count, the length of ``x[mask]`` or ``masked_select``'s result is
known only when the computation runs. Such a size is an ``IntegerProxy`` whose value is None,
made by :func:`new_size` (tagged :data:`UNBACKED_SIZE`, a tag the proxy keeps through thunder's
``replace``): its producer is an op of the computation trace that returns it as a number output
(``metatrace.metas.torch_ops.data_dependent``), so the generated Python binds it at run time.

A decision on such a size has no value to read. :func:`decide` makes it when it holds for every
value the size can take (a size is in ``[0, numel]`` of the tensor it counts): ``n >= 0`` is True,
``n < 0`` False, and ``n == n`` is reflexive (decided before this module is asked). Numbers
computed from unbacked sizes with ``+`` and ``*`` of nonnegative operands are nonnegative and
tagged too (``n * 4``, a tensor's element count). torch's size-oblivious rules
(``guard_size_oblivious``, torch/fx/experimental/symbolic_shapes.py) decide ``n == 1``
False at the sites where the answer for ``n = 0`` or ``1`` takes the same path as
for any other ``n`` (broadcasting two sizes that are the same symbol); here each such site says so
while it runs (:mod:`metatrace.metas.oblivious_answers`), and everywhere else such a decision
is not made: the caller reports it to the guard collector, which raises ``DataDependentError``
naming the value and the op that read it. A decision on an unbacked size never becomes a prologue
guard (the prologue cannot see the value).
"""

from __future__ import annotations

import math
import weakref
from numbers import Number

from thunder.core.proxies import IntegerProxy, NumberProxy

from metatrace.state import compile_context
from metatrace.metas import concretizations, oblivious_answers
from metatrace.metas.relations import Relation
from metatrace.state.object_tables import NO_VALUE_OPS, NO_VALUE_PRODUCERS


class _Tag:
    """A proxy tag of metatrace's (thunder's tags are a set of any hashable objects)."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"metatrace.{self.name}"


# An integer with no trace-time value that is nonnegative: a size read from tensor data, or a sum
# or product of such sizes and nonnegative constants.
UNBACKED_SIZE = _Tag("UNBACKED_SIZE")


class CountOf:
    """The tag of an unbacked size that counts elements of a tensor of ``shape``, or sums
    nonnegative elements of one (``repeat_interleave``'s total): it is 0 where a size of ``shape``
    is (an empty input). ``op`` and ``source`` (the :class:`Counted` tag of the tensor counted),
    where given, name the computation: in a functional trace, two sizes that one op computed from
    one tensor are equal (:func:`_same_count`)."""

    __slots__ = ("shape", "op", "source")

    def __init__(self, shape: tuple, op: str | None = None, source=None):
        self.shape = tuple(shape)
        self.op = op
        self.source = None if source is None else _counted_tag(source)

    def __repr__(self) -> str:
        return f"metatrace.CountOf({self.shape})"


class Counted:
    """The tag of a tensor proxy an op counted elements of: the same object in the tags of every
    copy of the proxy (thunder's ``replace`` keeps tags when it renames an input), so a count
    made in the grad transform from the renamed proxy names the same tensor."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "metatrace.Counted"


def _counted_tag(source) -> Counted:
    for tag in source.tags:
        if isinstance(tag, Counted):
            return tag
    tag = Counted()
    source.tags.add(tag)
    return tag


def new_size(counting: tuple | None = None, op: str | None = None, source=None) -> IntegerProxy:
    """A new unbacked size: an integer proxy with no value, in ``[0, inf)``, and 0 where a size of
    ``counting`` is 0 when it counts (or sums) elements of a tensor of that shape; ``op`` of
    ``source`` computed it (:class:`CountOf`)."""
    tags = {UNBACKED_SIZE} if counting is None else {UNBACKED_SIZE, CountOf(counting, op, source)}
    return IntegerProxy(value=None, tags=tags)


def counts_elements_of(size, source) -> None:
    """``size`` (made by :func:`new_size` with an ``op``) counts the same elements of ``source``
    as of the tensor it was computed from (the mask before it was flattened)."""
    for tag in getattr(size, "tags", ()):
        if isinstance(tag, CountOf) and tag.op is not None:
            tag.source = _counted_tag(source)


def _computation(x) -> tuple | None:
    """(op, the :class:`Counted` tag of the tensor counted) of an unbacked size, or None."""
    for tag in getattr(x, "tags", ()):
        if isinstance(tag, CountOf) and tag.op is not None and tag.source is not None:
            return tag.op, tag.source
    return None


def _same_count(a, b, functional: bool) -> bool:
    """``a`` and ``b`` are sizes one op computed from one tensor proxy, in a functional trace
    (``record_state.functional_trace()``: the grad transform reads ``g[mask]`` again for the gradient of
    ``y[mask] = v``, a new count of the mask ``v``'s length was read from). While thunder
    interprets the function, a mask read twice shares one count (``data_dependent``) unless an
    in-place write came between, so two counts there may differ."""
    if not (is_unbacked_size(a) and is_unbacked_size(b)) or not functional:
        return False
    ca, cb = _computation(a), _computation(b)
    return ca is not None and cb is not None and ca[0] == cb[0] and ca[1] is cb[1]


def _zero_size_of_counted(x):
    """A size with value 0 of the tensor whose elements ``x`` counts (then ``x`` is 0), or None."""
    for tag in x.tags:
        if isinstance(tag, CountOf):
            for s in tag.shape:
                if type(s) is int and s == 0:
                    return s
                if isinstance(s, IntegerProxy) and s.value == 0:
                    return s
    return None


def is_unbacked(x) -> bool:
    """``x`` is a number proxy with no trace-time value (a size read from tensor data, or a value
    read with ``item``)."""
    return isinstance(x, NumberProxy) and x.value is None


def is_unbacked_size(x) -> bool:
    """``x`` is an unbacked size (nonnegative, no value)."""
    return isinstance(x, IntegerProxy) and x.value is None and UNBACKED_SIZE in x.tags


def _nonnegative(x) -> bool:
    """``x`` is nonnegative for every call the entry serves: an unbacked size, an int >= 0, or an
    integer symbol whose value is, guarded (a tensor's size, where the guard is a tautology)."""
    if is_unbacked_size(x) or (type(x) is int and x >= 0):
        return True
    if isinstance(x, IntegerProxy) and type(x.value) is int and x.value >= 0:
        concretizations.relation(Relation.GE, x, 0, True)
        return True
    return False


def result_is_size(op: str, *args) -> bool:
    """The result of number op ``op`` (``add``, ``mul``) on ``args`` is nonnegative for every
    value of its unbacked operands: it is tagged as an unbacked size too."""
    return op in ("add", "mul") and any(map(is_unbacked_size, args)) and all(map(_nonnegative, args))


def tag_of(op: str, *args) -> set | None:
    """The tags of ``op``'s result: ``{UNBACKED_SIZE}`` where :func:`result_is_size`."""
    return {UNBACKED_SIZE} if result_is_size(op, *args) else None


def _versus_constant(op: Relation, c) -> bool | None:
    """``n <op> c`` for a nonnegative n with no value: True or False where every n >= 0 agrees,
    else None. An ordered relation is monotone in n, so n = 0 and n -> infinity bound it;
    ``==``/``!=`` are decided only for a c no n reaches (c < 0)."""
    if not op.ordered:
        return (op is Relation.NE) if c < 0 else None
    at_zero, at_infinity = op.evaluate(0, c), op.evaluate(math.inf, c)
    return at_zero if at_zero == at_infinity else None


def decide(op: Relation | str, a, b, functional: bool = False) -> bool | None:
    """``a <op> b`` where an operand has no trace-time value: True or False where every value of
    its unbacked sizes gives that answer (or a size-oblivious site decides ``n == 1``), else None
    (not decidable: the caller reports it, and the guard collector raises DataDependentError).
    ``op``: a :class:`Relation` (or its name); ``functional``: the decision is made on a functional
    trace (``record_state.functional_trace``)."""
    op = Relation(op)
    if (a is b and isinstance(a, IntegerProxy)) or _same_product(a, b) or _same_count(a, b, functional):
        return op.reflexive
    if not is_unbacked_size(a):
        if is_unbacked_size(b):
            return decide(op.swapped(), b, a, functional)
        return None
    if (zero := _zero_size_of_counted(a)) is not None:
        # a counts the elements of an empty tensor: a is 0 as long as that size is (guarded)
        vb = b.value if isinstance(b, NumberProxy) else b
        if vb is None or isinstance(vb, bool) or not isinstance(vb, Number):
            return None
        answer = op.evaluate(0, vb)
        concretizations.relation(Relation.EQ, zero, 0, True)
        if isinstance(b, NumberProxy):
            concretizations.relation(op, 0, b, answer)
        return answer
    if isinstance(b, bool) or not isinstance(b, Number):
        return None
    answer = _versus_constant(op, b)
    if answer is None:
        answer = oblivious_answers.oblivious_answer(op, b)
    return answer


def undecided(op: str, a, b) -> RuntimeError:
    """The error for a decision on a value with no trace-time value where no guard collector
    listens (the collector raises its DataDependentError first, naming the op that read it)."""
    return RuntimeError(
        f"a decision ({a} {op} {b}) depends on a value read from tensor data, which has no trace-time value "
        "under cache=\"symbolic values\""
    )


def converted(a: NumberProxy, dtype, /) -> NumberProxy:
    """``prims.convert_element_type(a, dtype)``'s output for a number with no value: a number of
    that type with no value (thunder's meta converts the value)."""
    from thunder.core import dtypes
    from thunder.core.proxies import numberproxy

    python_type = dtype if isinstance(dtype, type) else dtypes.dtype_to_numbertype(dtype)
    return numberproxy(python_type, None)


def _op_key(name: str, args) -> tuple:
    return (name, *((id(a), "p") if isinstance(a, NumberProxy) else (a, type(a).__name__) for a in args))


def remember_op(name: str, args, out) -> None:
    """``out`` is the recorded ``name(*args)`` (an operand has no value)."""
    operands = [a for a in args if isinstance(a, NumberProxy)]
    if operands:
        NO_VALUE_OPS.get(operands[0])[_op_key(name, args)] = (tuple(weakref.ref(a) for a in operands), out)
    NO_VALUE_PRODUCERS.get(out)[:] = (name, tuple(args))


def product_outside_compile(a, b) -> IntegerProxy:
    """``a * b`` of integers, one with no value, outside a compile (thunder's ``check_trace``
    re-runs metas, whose element counts compare products): the compile's recorded product, else a
    new one whose factors are remembered, so that two products of the same factors are equal."""
    if (out := recorded_op("mul", (a, b))) is not None:
        return out
    out = IntegerProxy(value=None, tags=tag_of("mul", a, b))
    remember_op("mul", (a, b), out)
    return out


def _factors(x, limit: int = 16) -> list:
    """``x`` as the factors of the product chain that computed it (``[n, C]`` for ``n * C``)."""
    if not isinstance(x, NumberProxy) or x.value is not None or not limit:
        return [x]
    if entry := NO_VALUE_PRODUCERS.get(x, create=False):
        name, args = entry
    elif (bsym := concretizations.producer_of(x)) is not None:  # thunder's own number op (a numel)
        name, args = bsym.sym.name, bsym.args
    else:
        return [x]
    if name != "mul" or len(args) != 2:
        return [x]
    return _factors(args[0], limit - 1) + _factors(args[1], limit - 1)


def _factor_key(f) -> tuple:
    return ("proxy", id(f)) if isinstance(f, NumberProxy) else ("int", f)


def _same_product(a, b) -> bool:
    """``a`` and ``b`` are products of the same integer factors (``n * C`` computed twice, a
    tensor's element count against its shape's product), one of them with no value."""
    if not (is_unbacked(a) or is_unbacked(b)):
        return False
    fa, fb = _factors(a), _factors(b)
    if len(fa) < 2 and len(fb) < 2:
        return False
    if not all(isinstance(f, IntegerProxy) or type(f) is int for f in fa + fb):
        return False
    ka = sorted((k for f in fa if (k := _factor_key(f)) != ("int", 1)), key=repr)
    kb = sorted((k for f in fb if (k := _factor_key(f)) != ("int", 1)), key=repr)
    return ka == kb


def _same_nonzero(f, k) -> bool:
    """``f`` is ``k``, a divisor known to be nonzero: the same symbol, or the same nonzero int."""
    if isinstance(k, NumberProxy):
        if k.value is None or k.value == 0:
            return False
        if f is k:
            return True
        # Where no guard collector listens (an executor pass or thunder's check_trace re-running a
        # decision the compile made and guarded), two backed sizes with one value are that value.
        return (compile_context.collector() is None and isinstance(f, NumberProxy)
                and f.value is not None and f.value == k.value)
    return type(k) is int and k != 0 and type(f) is int and f == k


def fold_division(name: str, a, b):
    """``(u * k) % k`` is 0 and ``(u * k) // k`` is ``u`` for any integer u and nonzero k: the
    element count of an ``(n, C)`` tensor divided by ``C`` (``reshape(-1, C)``: thunder checks
    ``numel % C == 0`` and computes ``numel // C``) needs no value of ``n``. None where this does
    not apply. A divisor with a value is nonzero for every call the entry serves: its value is
    guarded wherever a decision read it, and a division by a symbol is recorded only after it."""
    if name not in ("remainder", "py_floordiv"):
        return None
    if type(b) is int and b == 1 and isinstance(a, IntegerProxy) and a.value is None:
        return 0 if name == "remainder" else a  # reshape(-1): the known sizes' product is 1
    factors = _factors(a)
    if len(factors) < 2 or not all(isinstance(f, IntegerProxy) or type(f) is int for f in factors):
        return None
    for i, f in enumerate(factors):
        if _same_nonzero(f, b):
            rest = factors[:i] + factors[i + 1:]
            if name == "remainder":
                return 0
            return rest[0] if len(rest) == 1 else None
    return None


def recorded_op(name: str, args):
    """The symbol recorded for ``name(*args)`` during the compile, or None."""
    operands = [a for a in args if isinstance(a, NumberProxy)]
    known = NO_VALUE_OPS.get(operands[0], create=False) if operands else None
    entry = None if known is None else known.get(_op_key(name, args))
    if entry is None:
        return None
    refs, out = entry
    if len(refs) != len(operands) or any(r() is not a for r, a in zip(refs, operands)):
        return None
    return out
