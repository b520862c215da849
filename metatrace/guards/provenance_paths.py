"""A value's provenance (thunder's ``ProvenanceRecord``) read once as a typed path, and the records
metatrace builds for thunder.

thunder's interpreter records how it reached each value: a record's ``inst`` says what was done
(``LOAD_ATTR``, ``BINARY_SUBSCR``, an input, a constant, an opaque call) and its ``inputs`` are
the records of what it was done to. :func:`parse` reads a record into a :class:`Path`, as
dynamo's ``AttrSource``/``GetItemSource`` chains do: a :class:`Root` (the jitted function or
module, the call's positional or keyword arguments, a constant, an opaque call, a computed
value) and the attribute and item reads from it (:class:`Step`: its kind and constant key, or
``UNKNOWN``). The questions metatrace asks of a path (where it is rooted, how explain() names
it, what the call gives when it is read again) are :mod:`metatrace.guards.provenance`; this
module is the one place a record's instructions are read. Records that metatrace builds for
thunder (the prologue unpacks them) come from the constructors at the end.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from thunder.core.interpreter import ProvenanceRecord, PseudoInst
from metatrace.metas.proxy_edits import add_record_flag

# The one limit on how far a record is followed (from the value towards its root, through
# reads, opaque calls and inputs alike): records are built from earlier ones, so a chain ends;
# the limit keeps a malformed (cyclic) one from hanging a compile.
MAX_DEPTH = 256


class Root(enum.Enum):
    """Where a path starts."""

    FUNCTION = "function"  # INPUT_FN: the jitted function or module (``self``)
    ARGS = "args"  # INPUT_ARGS: the call's positional arguments
    KWARGS = "kwargs"  # INPUT_KWARGS: the call's keyword arguments
    CONSTANT = "constant"  # a constant the interpreter wrapped
    OPAQUE = "opaque"  # the result of an opaque call (a builtin run on unwrapped values)
    COMPUTED = "computed"  # any other instruction: a value the frame computed
    TOO_DEEP = "too deep"  # the chain was longer than MAX_DEPTH
    NONE = "none"  # no record at all


class Read(enum.Enum):
    ATTR = "attribute"  # LOAD_ATTR: ``base.key``
    ITEM = "item"  # BINARY_SUBSCR: ``base[key]``


class _Unknown:
    __slots__ = ()

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = _Unknown()  # the key of a read whose key is not a constant
_ROOTS = {PseudoInst.INPUT_FN: Root.FUNCTION, PseudoInst.INPUT_ARGS: Root.ARGS,
          PseudoInst.INPUT_KWARGS: Root.KWARGS, PseudoInst.CONSTANT: Root.CONSTANT, PseudoInst.OPAQUE: Root.OPAQUE}
CALL_ROOTS = (Root.FUNCTION, Root.ARGS, Root.KWARGS)
ARGUMENT_ROOTS = (Root.ARGS, Root.KWARGS)


@dataclass(frozen=True, eq=False)
class Step:
    """One read: ``kind`` of ``base`` (the record read from) with ``key``; ``record`` is the read's own."""

    kind: Read
    key: Any
    base: ProvenanceRecord
    record: ProvenanceRecord

    @property
    def known(self) -> bool:
        return self.key is not UNKNOWN

    def read(self, obj: Any) -> Any:
        """The read done again on ``obj``; ``NotImplemented`` where it raises or its key is unknown."""
        if not self.known:
            return NotImplemented
        try:
            return obj[self.key] if self.kind is Read.ITEM else getattr(obj, self.key)
        except Exception:
            return NotImplemented


@dataclass(frozen=True, eq=False)
class Path:
    """``root`` (its record ``base``) and the reads from it, outermost last."""

    root: Root
    base: ProvenanceRecord | None
    steps: tuple[Step, ...]

    @property
    def last(self) -> Step | None:
        return self.steps[-1] if self.steps else None

    def keys(self) -> list:
        return [s.key for s in self.steps]


def _step(pr: ProvenanceRecord) -> Step | None:
    """The record as a read (an attribute or item read with inputs), else None."""
    if pr.inst is PseudoInst.LOAD_ATTR:
        kind = Read.ATTR
    elif pr.inst is PseudoInst.BINARY_SUBSCR:
        kind = Read.ITEM
    else:
        return None
    if not pr.inputs:
        return None
    key_pr = pr.inputs[1] if len(pr.inputs) == 2 else None
    key = key_pr.value if key_pr is not None and key_pr.inst is PseudoInst.CONSTANT else UNKNOWN
    return Step(kind, key, pr.inputs[0], pr)


def parse(pr: Any) -> Path:
    """The record as a path: its reads back to the first record that is not a read."""
    if not isinstance(pr, ProvenanceRecord):
        return Path(Root.NONE, None, ())
    steps = []
    while (step := _step(pr)) is not None:
        if len(steps) >= MAX_DEPTH:
            return Path(Root.TOO_DEEP, pr, tuple(reversed(steps)))
        steps.append(step)
        pr = step.base
    root = next((kind for inst, kind in _ROOTS.items() if pr.inst is inst), Root.COMPUTED)
    return Path(root, pr, tuple(reversed(steps)))


def last_read(pr: Any) -> Step | None:
    """The value's own read (``m.weight``: the attribute ``weight`` of ``m``), else None."""
    return _step(pr) if isinstance(pr, ProvenanceRecord) else None


def attribute_name(pr: Any):
    """The constant key of an attribute or item read (``'weight'`` of ``m.weight``), else None."""
    step = last_read(pr)
    return step.key if step is not None and step.known else None


# ---------------------------------------------------------------------------------------------
# Records metatrace builds for thunder's prologue to unpack
# ---------------------------------------------------------------------------------------------

_ROOT_INSTS = {kind: inst for inst, kind in _ROOTS.items() if kind in CALL_ROOTS}


def constant_record(value: Any) -> ProvenanceRecord:
    return ProvenanceRecord(PseudoInst.CONSTANT, inputs=[], value=value)


def root_record(root: Root) -> ProvenanceRecord:
    """The record of the jitted function (``Root.FUNCTION``) or of the call's arguments."""
    return ProvenanceRecord(_ROOT_INSTS[root], inputs=[])


def attribute_record(base: ProvenanceRecord, name: str, ext_flag: int = 0) -> ProvenanceRecord:
    """``base.name`` (``ext_flag`` added to the flags the record takes from its inputs)."""
    record = ProvenanceRecord(PseudoInst.LOAD_ATTR, inputs=[base, constant_record(name)])
    add_record_flag(record, ext_flag)
    return record


def item_record(base: ProvenanceRecord, item: Any) -> ProvenanceRecord:
    """``base[item]``."""
    return ProvenanceRecord(PseudoInst.BINARY_SUBSCR, inputs=[base, constant_record(item)])


def opaque_record(inputs: list[ProvenanceRecord]) -> ProvenanceRecord:
    """The result of an opaque call (``inputs``: the function's record, then the arguments')."""
    return ProvenanceRecord(PseudoInst.OPAQUE, inputs=list(inputs))
