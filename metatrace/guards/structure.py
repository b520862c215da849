"""Prologue completeness: what the trace never read is guarded too.

thunder's prologue checks only what the trace read. An argument the trace never looked into
(``torch.flip(a, ())`` reads no element of ``()``, so nothing checks its length) or read as a
constant (``rounding_mode="trunc"``, ``dim=None``, a dtype, an enum compared with ``is``, a
function it calls) is not guarded at all, and a call with another one reused the entry. Every
argument that is not a tensor, a number or a module gets one check, by the kind
:mod:`metatrace.guards.classify` gives it: containers by type, length (keys) and every element,
strings, bools, dtypes, ranges ... by value, enum members, functions and classes by identity,
plain data objects by type (what the trace reads from them: ``metatrace.interpret.reads.argument_reads``),
anything else by identity. Tensors and the values of numbers stay the business of thunder's checks
and metatrace's guards: a number the trace never read cannot change its result. A number's *type*
is checked here: thunder's symbolic-values prologue does not check it, and a trace made for ``3``
bakes in what ``int`` implies (``torch.tensor(n)``'s dtype, ``7 // 2`` against ``7.0 // 2``).
"""

from __future__ import annotations

from metatrace.state.compile_session import session
from metatrace.errors import MetatraceError

from typing import Any

from thunder.core.compile_data import using_symbolic_values
from thunder.core.proxies import Proxy

from metatrace.guards import classify, content_reads, matchers, provenance
from metatrace.guards.classify import Kind
from metatrace.guards.matchers import ExpectedArgument
from metatrace.guards.collect import GuardFailure
from metatrace.guards.explain import record_rejection
from metatrace.guards.provenance import Root
from metatrace.state.registry import EXPECTED, compiled_by_this_call, new_id, structure_symbol

# What is checked how: ``metatrace.guards.classify`` (one table for every value of the arguments).


class StructureMismatch(MetatraceError):
    pass


class ChangedWhileTracing(StructureMismatch, GuardFailure):
    """A check of a new entry failed on the very call that compiled it.

    thunder runs an entry's prologue right after compiling it, on the same arguments; anything
    that raises there reaches the user (on later calls a failing prologue is a cache miss). The
    usual cause is a Python side effect of the traced function on something the trace read: it
    happened while thunder traced, and the value is no longer the one the trace saw.
    """


def check_failed(text: str, kind: type[Exception], check_id: str | None = None) -> Exception:
    """The exception for a failing prologue check: ``kind(text)``, or on the call that compiled the
    entry a :class:`ChangedWhileTracing` that says what that means. ``check_id``: the failing
    check's id, remembered for the recompile log (``metatrace.guards.explain.log_miss``)."""
    if check_id is not None:
        record_rejection(check_id, text)
    if not compiled_by_this_call():
        return kind(text)
    return ChangedWhileTracing(
        f"{text}, on the call that compiled this entry. The traced function changed a value its "
        "trace read: a Python side effect (appending to a list, setting an attribute or a global) "
        "runs while thunder traces, never on a later call, so no compiled entry reproduces it. Move "
        "the side effect out of the jitted function. (If the function has none, metatrace recorded "
        "a wrong check: please report it.)"
    )


# Expected structures by id (metatrace.state.registry.EXPECTED): the prologue's bound symbol carries the id.


ALIAS = ("alias of an earlier argument",)
# Objects one argument may share with another: the trace reads and writes them through either.
_MUTABLE = (Kind.CONTAINER, Kind.DATA)


class NumberTypes(tuple):
    """Expected types of the number arguments, checked together (``(int, float)``)."""


class KeywordOrder(tuple):
    """The order of the keyword arguments: a trace that iterates ``**kwargs`` bakes it in (the
    entry of ``f(x, a=1, b=2)`` served ``f(x, b=2, a=1)`` with the other order's result)."""

    @property
    def text(self) -> str:
        return f"keyword arguments in the order {', '.join(self)}"

    def matches(self, keys, *aliased) -> bool:
        return tuple(keys()) == self  # ``kwargs.keys``: thunder's prologue unpacks no bare kwargs


def number_types_changed(check_id: str, expected: tuple, *values: Any) -> None:
    """Raised where the types of the number arguments differ from ``expected`` (the guard program
    checks them first, :class:`metatrace.guards.compiled_program.GuardProgram`)."""
    got = ", ".join(type(v).__name__ for v in values)
    raise check_failed(f"number argument types changed: expected {', '.join(t.__name__ for t in expected)}, got {got}",
                       StructureMismatch, check_id)


def check_structure(structure_id: str, value: Any, *aliased: Any) -> None:
    expected = EXPECTED[structure_id]
    if type(expected) is NumberTypes:
        # (an entry without a guard program): a plain loop, ~3x faster than the general path
        if len(expected) == 1 + len(aliased) and type(value) is expected[0]:
            i = 0
            for v in aliased:
                i += 1
                if type(v) is not expected[i]:
                    break
            else:
                return
        number_types_changed(structure_id, expected, value, *aliased)
    if type(expected) is ExpectedArgument:  # (metatrace.guards.matchers)
        if not expected.matcher.matches(value):
            raise check_failed(f"argument changed: expected {expected.text}, got {classify.expect(value)!r}",
                               StructureMismatch, structure_id)
        return
    if hasattr(expected, "matches"):  # value_checks.ExpectedValue, called_modules.ExpectedModuleState (all modules)
        if not expected.matches(value, *aliased):
            raise check_failed(f"value changed: expected {expected.text}", StructureMismatch, structure_id)
        return
    if expected == ALIAS:
        if value is not aliased[0]:
            raise check_failed("argument aliasing changed: the trace used one object for both arguments",
                               StructureMismatch, structure_id)
        return
    raise MetatraceError(f"unknown expected structure {structure_id}: {expected!r}")


class StructureConstraint:
    def __init__(self, structure_id: str):
        self.structure_id = structure_id

    def __call__(self, value_proxy, *aliased):
        structure_symbol()(self.structure_id, value_proxy, *aliased)


def _argument_proxy(source: Root, key: int | str) -> Proxy:
    """A proxy whose history makes the prologue unpack ``args[key]`` (or ``kwargs[key]``)."""
    return Proxy(prefix="arg", history=provenance.item_record(provenance.root_record(source), key))


def _unpacked_arguments(inputs) -> dict[tuple[Root, int | str], Proxy]:
    """The computation's inputs that are arguments themselves (history ``args[k]`` or
    ``kwargs[k]``), by (source, key): the prologue unpacks them anyway."""
    out = {}
    for v in inputs:
        p = getattr(v, "proxy", v)
        argument = provenance.argument_of(getattr(p, "history", None))
        if argument is not None:
            out.setdefault(argument, p)
    return out


def add_structure_constraints(ctx, trace, args: tuple, kwargs: dict, inputs=()) -> tuple[list[str], list]:
    """Adds a structure check of each container argument; ``trace`` names the new proxies.
    Returns the readable checks and, under symbolic values, the number arguments (and other
    number inputs) as (proxy, type) pairs, whose types the caller checks: in the entry's guard
    program, one prologue call for both (:func:`add_number_type_constraint` where there is
    none). A number argument that is one of the computation's ``inputs`` is checked through
    that input's proxy (the prologue unpacks it once, not twice)."""
    from thunder.core.trace import tracectx

    unpacked = _unpacked_arguments(inputs)
    parameters = provenance.parameter_names(session(ctx).fn)
    texts = []
    symbolic = using_symbolic_values()
    numbers: list[tuple[Proxy, type]] = []  # (argument proxy, its type)
    first_seen: dict[int, Proxy] = {}  # id of a container argument -> the proxy of its first occurrence
    items = [(Root.ARGS, i, a) for i, a in enumerate(args)]
    items += [(Root.KWARGS, k, v) for k, v in kwargs.items()]
    for source, key, value in items:
        kind = classify.kind(value)
        if kind is Kind.TENSOR or kind is Kind.MODULE:
            continue  # thunder's checks of tensors, metatrace's of module state cover what the trace read
        if kind is Kind.NUMBER:
            if symbolic:  # (constant values: thunder checks type and value)
                proxy = unpacked.get((source, key))
                if proxy is None:
                    with tracectx(trace):
                        proxy = _argument_proxy(source, key)
                numbers.append((proxy, type(value)))
            continue
        structure_id = new_id("s")
        with tracectx(trace):
            proxy = _argument_proxy(source, key)
        where = f"args[{key}]" if source is Root.ARGS else f"kwargs[{key!r}]"
        where = provenance.argument_name(proxy.history, parameters) or where
        if kind in _MUTABLE and id(value) in first_seen:
            # The trace read one object through both arguments: a call with two objects must miss.
            EXPECTED[structure_id] = ALIAS
            ctx.add_constraint((StructureConstraint(structure_id), proxy, first_seen[id(value)]))
            texts.append(f"{where} is the same object as an earlier argument")
            continue
        if kind in _MUTABLE:
            first_seen[id(value)] = proxy
        reads = session(ctx).content_reads
        if type(value) in content_reads.WRITABLE and reads is not None and not reads.was_read(value):
            EXPECTED[structure_id] = content_reads.only_its_type(value, where)  # (the trace only writes to it)
        else:
            matcher = classify.expect(value)
            EXPECTED[structure_id] = ExpectedArgument(matcher, matchers.text(where, matcher))
        ctx.add_constraint((StructureConstraint(structure_id), proxy))
        texts.append(EXPECTED[structure_id].text)
    if len(kwargs) > 1:
        structure_id = new_id("s")
        EXPECTED[structure_id] = KeywordOrder(kwargs)
        with tracectx(trace):
            proxy = Proxy(prefix="kw", history=provenance.attribute_record(provenance.root_record(Root.KWARGS), "keys"))
        ctx.add_constraint((StructureConstraint(structure_id), proxy))
        texts.append(EXPECTED[structure_id].text)
    if symbolic:
        # numbers read from globals, closures and objects (metatrace.interpret.reads.value_proxies.note_number_leaf)
        numbers += [(p, type(p.value)) for p in session(ctx).number_leaves.values()]
    if numbers:
        texts.append(f"types of the number arguments: {', '.join(t.__name__ for _, t in numbers)}")
    return texts, numbers


def add_number_type_constraint(ctx, numbers: list) -> None:
    """One check for the types of all number arguments (and other number inputs)."""
    structure_id = new_id("s")
    EXPECTED[structure_id] = NumberTypes(t for _, t in numbers)
    ctx.add_constraint((StructureConstraint(structure_id), *(p for p, _ in numbers)))
