"""A cache entry's guards compiled into one Python function of its input numbers and sizes,
which the prologue calls (:func:`check_guards`); built by :mod:`metatrace.guards.program_builder`.

Lifetime: a program lives in ``registry.PROGRAMS`` under its id as long as the jitted function
whose cache entries check it (:mod:`metatrace.state.registry`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from thunder.core.proxies import NumberProxy, TensorProxy

from metatrace.guards.collect import GuardFailure
from metatrace.guards.guard_record import Guard, is_leaf
from metatrace.state.registry import PROGRAMS, guard_symbol
from metatrace.guards.simplify import SimpleGuard, python_check, recorded_parts
from metatrace.guards.structure import check_failed, number_types_changed
from metatrace.metas import number_ops

# The logger's name from before the guards were split by concern: logging configurations name it.
logger = logging.getLogger("metatrace.guards.collect")


def check_parts(guard: "Guard | SimpleGuard", producers: dict[str, Any], is_param) -> tuple:
    """The parts (expressions between comparison symbols) a program checks for either kind of
    guard: a simplified guard's own, over the leaves; a guard as recorded, over its operands'
    producer chains (``is_param(name)``: that number is one of the program's parameters)."""
    if isinstance(guard, SimpleGuard):
        return guard.parts
    return recorded_parts(guard, producers, is_param)


class GuardProgram:
    """The guards of one cache entry as one function of the entry's input numbers and sizes.

    Producer chains are written out as Python expressions (``(v0 + 1) // 2 <= v1``), so the
    prologue pays one call and a few arithmetic operations per guard, not a bound symbol each.
    """

    def __init__(
        self,
        program_id: str,
        guards: list[Guard],
        texts: list[str],
        leaves: list[NumberProxy],
        producers: dict[str, Any],
        leaf_names: list[str] | None = None,
        number_types: tuple = (),
    ):
        self.program_id = program_id
        self.texts = texts
        self.leaves = leaves
        self.number_types = tuple(number_types)
        # leaf_names: how the guards' proxies name the leaves, if not by the leaves' own names.
        # One parameter per leaf position (the prologue passes every leaf); a name seen twice
        # (a size shared by two inputs) reads the first.
        names = leaf_names or [p.name for p in leaves]
        signature = [f"v{i}" for i in range(len(names))]
        params: dict[str, str] = {}
        for name, param in zip(names, signature):
            params.setdefault(name, param)
        constants: list[Any] = []

        def const(x) -> str:
            constants.append(x)
            return f"_c[{len(constants) - 1}]"

        # After the leaves, one parameter per number argument whose type is checked first
        # (metatrace.guards.structure): one prologue call for the structure and the guards.
        typed = [f"n{i}" for i in range(len(self.number_types))]
        lines = [f"def guards({', '.join(signature + typed)}):"]
        if typed:
            mismatch = " or ".join(f"type({n}) is not _types[{i}]" for i, n in enumerate(typed))
            lines += [f"    if {mismatch}:", f"        _types_changed(_id, _types, {', '.join(typed)})"]
        for i, g in enumerate(guards):
            check = python_check(check_parts(g, producers, params.__contains__), params.__getitem__, const)
            lines.append(f"    if not ({check}):")
            lines.append(f"        _fail(_id, _t[{i}])")
        lines.append("    return None")
        self.source = "\n".join(lines)
        self.constants = tuple(constants)
        self._compile()

    def _compile(self) -> None:
        namespace = {**number_ops.NAMESPACE, "_c": self.constants, "_t": tuple(self.texts), "_fail": _fail,
                     "_id": self.program_id, "_types": self.number_types, "_types_changed": number_types_changed}
        exec(compile(self.source, "<metatrace guards>", "exec"), namespace)
        self.fn = namespace["guards"]

    def __reduce__(self):
        # a stored entry (metatrace.entry_cache) keeps the program's text, not the proxies it was built from
        return _restored_program, (self.program_id, self.source, self.constants, tuple(self.texts), self.number_types)

    @classmethod
    def accepting_all(cls, program_id: str, leaves: list[NumberProxy]) -> "GuardProgram":
        """A program over ``leaves`` that checks nothing yet (the grad transform's reservation)."""
        return cls(program_id, [], [], leaves, {})


def _restored_program(program_id: str, source: str, constants: tuple, texts: tuple, number_types: tuple):
    """A stored program, under the id the loading process gave it (metatrace.state.entry_loading)."""
    from metatrace.state.compile_context import renamed

    program = GuardProgram.__new__(GuardProgram)
    program.program_id, program.source, program.constants = renamed(program_id), source, constants
    program.texts, program.leaves, program.number_types = list(texts), [], number_types
    program._compile()
    return program


def _fail(program_id: str, text: str) -> None:
    logger.debug("guard failed: %s", text)
    raise check_failed(f"guard failed: {text}", GuardFailure, program_id)


# Guard programs by id (metatrace.state.registry.PROGRAMS): the prologue's bound symbol carries the id.


def check_guards(program_id: str, *leaves) -> None:
    """Runs in the prologue (python executor). Raises, never asserts: asserts vanish under -O."""
    PROGRAMS[program_id].fn(*leaves)


@dataclass
class ProgramConstraint:
    """A prologue constraint: thunder calls it with the prologue's proxies for the leaves."""

    program_id: str

    def __call__(self, *leaves):
        guard_symbol()(self.program_id, *leaves)


def input_sizes_and_numbers(inputs) -> list[NumberProxy]:
    out = []
    for v in inputs:
        p = getattr(v, "proxy", v)
        if isinstance(p, NumberProxy):
            out.append(p)
        elif isinstance(p, TensorProxy):
            out.extend(s for s in p._shape if isinstance(s, NumberProxy) and is_leaf(s))
    return out
