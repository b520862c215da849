"""Every question metatrace asks of a value's provenance (thunder's ``ProvenanceRecord``).

A record is read once as a typed path (:mod:`metatrace.guards.provenance_paths`: a :class:`Root`
and the attribute and item reads from it). The rest of metatrace asks this module where the path
is rooted (the call's arguments, the jitted module's tensors, a library module), what the call
gives when the path is read again, whether two records read the same value, and how explain()
names the value; none walks a record itself. The path's types, :func:`parse` and the record
constructors are importable from here too, as the one face of provenance.
"""

from __future__ import annotations

import re
from typing import Any

import thunder.core.jit_ext as jit_ext
from thunder.core.interpreter import ProvenanceRecord, PseudoInst

from metatrace.guards.provenance_paths import (ARGUMENT_ROOTS, CALL_ROOTS, MAX_DEPTH, UNKNOWN, Path, Read, Root, Step,
                                               attribute_name, attribute_record, constant_record, item_record,
                                               last_read, opaque_record, parse, root_record)

__all__ = [
    # the typed path and the records metatrace builds (provenance_paths)
    "MAX_DEPTH", "UNKNOWN", "Path", "Read", "Root", "Step", "attribute_name", "attribute_record", "constant_record",
    "item_record", "last_read", "opaque_record", "parse", "root_record",
    # where a path is rooted
    "is_jitted_function", "rooted_in_arguments", "an_argument_or_its_item", "argument_of", "read_from_jitted_module",
    "rooted_in_the_call", "through_module_tensors", "reads_module_tensor", "EXT_FLAG_LIBRARY_MODULE",
    "through_library_module", "read_from_module_instance", "submodule_path", "may_register_for_prologue",
    "rooted_in_prologue",
    # reading the value again, telling records apart
    "replay", "key",
    # names
    "text", "reads_own_state", "state_name", "parameter_names", "argument_name",
]


# ---------------------------------------------------------------------------------------------
# Where a path is rooted
# ---------------------------------------------------------------------------------------------


def is_jitted_function(pr: Any) -> bool:
    """The record of the jitted function or module itself (``self``)."""
    return isinstance(pr, ProvenanceRecord) and pr.inst is PseudoInst.INPUT_FN


def rooted_in_arguments(pr: Any) -> bool:
    """An argument of the call, or read from one through items and attributes (``args[0].cfg``)."""
    return parse(pr).root in ARGUMENT_ROOTS


def an_argument_or_its_item(pr: Any) -> bool:
    """The value is an argument, or an element of one (``args[1][0]``, items only: an
    attribute of an argument is another value): ``metatrace.guards.structure`` checks the types
    of those numbers from the call's arguments."""
    path = parse(pr)
    return path.root in ARGUMENT_ROOTS and all(s.kind is Read.ITEM for s in path.steps)


def argument_of(pr: Any) -> tuple[Root, Any] | None:
    """``(Root.ARGS, 1)`` for ``args[1]``, ``(Root.KWARGS, 'k')`` for ``kwargs['k']`` (an argument
    itself, as the prologue unpacks it), else None."""
    path = parse(pr)
    if path.root not in ARGUMENT_ROOTS or path.base.inputs or len(path.steps) != 1:
        return None
    step = path.steps[0]
    return (path.root, step.key) if step.kind is Read.ITEM and step.known else None


def read_from_jitted_module(pr: Any) -> bool:
    """Reached from the jitted module object (an attribute, at any depth), not from the call's arguments."""
    path = parse(pr)
    return path.root is Root.FUNCTION and bool(path.base.ext_flag & jit_ext.EXT_FLAG_IS_MODULE)


# The function's own state: what is read through it is code's state, not the call's.
_FUNCTION_STATE = frozenset({"__globals__", "__closure__", "__defaults__", "__kwdefaults__", "__code__"})


def rooted_in_the_call(pr: Any) -> bool:
    """Reached from the jitted function or its arguments (the user's module and what it holds),
    through reads and computed values alike (the first input of each), not through the
    function's globals, closure, defaults or code."""
    for _ in range(MAX_DEPTH):
        path = parse(pr)
        if any(s.kind is Read.ATTR and s.key in _FUNCTION_STATE for s in path.steps):
            return False
        if path.root in CALL_ROOTS:
            return True
        if path.base is None or not path.base.inputs:
            return False
        pr = path.base.inputs[0]
    return False


def through_module_tensors(pr: Any) -> bool:
    """Read through a module's ``_parameters`` or ``_buffers`` (a ``None`` bias): thunder's
    prologue unpacks those entries as tensors only."""
    return any(s.key in ("_parameters", "_buffers") for s in parse(pr).steps if s.known)


def reads_module_tensor(pr: Any) -> bool:
    """``module._parameters[name]`` or ``module._buffers[name]`` itself (buffers are plain tensors:
    only their provenance tells). Two reads, not a walk: asked of every tensor thunder proxies."""
    step = last_read(pr)
    if step is None or step.kind is not Read.ITEM:
        return False
    container = last_read(step.base)
    return container is not None and container.kind is Read.ATTR and container.key in ("_parameters", "_buffers")


# Marks the provenance of an installed package's or the standard library's module object
# (``torch`` read from globals): what is read through it (``torch.int64``) is code, not state
# (:mod:`metatrace.interpret.reads.library_code`); through the user's own modules it is state.
EXT_FLAG_LIBRARY_MODULE = 1 << 24


def through_library_module(pr: Any) -> bool:
    """Read through an installed package's or the standard library's module object."""
    return any(s.base.ext_flag & EXT_FLAG_LIBRARY_MODULE for s in parse(pr).steps)


def read_from_module_instance(pr: Any) -> bool:
    """``module.attr`` (an attribute lookup on a module object)."""
    step = last_read(pr)
    return (step is not None and step.kind is Read.ATTR and len(pr.inputs) == 2
            and bool(step.base.ext_flag & jit_ext.EXT_FLAG_IS_MODULE))


def submodule_path(pr: Any) -> tuple[Any, tuple[str, ...]]:
    """``self._modules['h']._modules['0']`` -> (``self``'s record, ('h', '0')): the record the
    module is reached from by ``_modules`` keys, and the keys."""
    path = parse(pr)
    steps, names = list(path.steps), []
    while (len(steps) >= 2 and steps[-1].kind is Read.ITEM and type(steps[-1].key) is str
           and steps[-2].kind is Read.ATTR and steps[-2].key == "_modules"):
        names.append(steps[-1].key)
        steps = steps[:-2]
    return (steps[-1].record if steps else path.base), tuple(reversed(names))


def may_register_for_prologue(pr: ProvenanceRecord) -> bool:
    """The top-level tests of ``jit_ext.should_register_for_prologue``, each of which makes it
    False: a provenance with no inputs (a constant), a tensor proxy's, or one whose instruction
    is not an input's (a value computed by the frame). A few attribute reads instead of a walk
    of the provenance, for the ~250k values a litgpt compile wraps."""
    if not pr.inputs or pr.ext_flag & jit_ext.EXT_FLAG_IS_TENSOR_PROXY:
        return False
    inst = pr.inst  # (``_value_``, not the ``value`` property: a plain attribute read)
    return (inst._value_ if type(inst) is PseudoInst else inst.opname) in jit_ext._input_provenance_inst


def rooted_in_prologue(pr: ProvenanceRecord) -> bool:
    """Whether thunder's prologue can read the value again (``jit_ext.should_register_for_prologue``;
    False where that walk raises)."""
    try:
        return jit_ext.should_register_for_prologue(pr)
    except Exception:
        return False


# ---------------------------------------------------------------------------------------------
# Reading the value again, and telling records apart
# ---------------------------------------------------------------------------------------------


def replay(pr: Any, *, call: tuple[tuple, dict] | None = None, fn: Any = None) -> Any:
    """The object a provenance reads, read again from the call's arguments (``args[0]``,
    ``kwargs['x'].weight``) or from the jitted function or module (``self.layers``), or
    ``NotImplemented`` when it is rooted elsewhere or cannot be read again."""
    path = parse(pr)
    roots = {Root.ARGS: call[0] if call else NotImplemented, Root.KWARGS: call[1] if call else NotImplemented,
             Root.FUNCTION: fn if fn is not None else NotImplemented}
    value = roots.get(path.root, NotImplemented)
    for step in path.steps:
        if value is NotImplemented:
            break
        value = step.read(value)
    return value


class _SameObject:
    """A key equal only to a key of the same object, which it holds: an ``id`` alone would name
    another object once this one is freed (keys outlive the compile in
    ``FunctionRecord.state_numbers``)."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any):
        self.obj = obj

    def __eq__(self, other: object) -> bool:
        return type(other) is _SameObject and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)


def key(pr: ProvenanceRecord, depth: int = 0) -> Any:
    """A hashable key equal for records that read the same value the same way (instructions and
    constants, not the interpreter's flags); by identity past MAX_DEPTH (and for an unhashable
    constant), holding the object (as a hashable constant is held)."""
    if depth > MAX_DEPTH:
        return _SameObject(pr)
    value = pr.value if pr.inst is PseudoInst.CONSTANT else None
    try:
        hash(value)
    except TypeError:
        value = _SameObject(value)
    return (pr.inst, value, tuple(key(i, depth + 1) for i in pr.inputs))


# ---------------------------------------------------------------------------------------------
# Names: how the user's code reads the value
# ---------------------------------------------------------------------------------------------

_SUBMODULE_NAME = re.compile(r"[\w.]+")
_GLOBAL_NAME = re.compile(r"\w+")


def _shown(pr: Any) -> tuple[Root, list[Step]]:
    """The root and reads shown for a value: an opaque call's result is shown as its last input."""
    path, outer = parse(pr), []
    for _ in range(MAX_DEPTH):
        if path.root is not Root.OPAQUE or not path.base.inputs:
            break
        outer[:0] = path.steps
        path = parse(path.base.inputs[-1])
    return path.root, [*path.steps, *outer]


def _render(pr: Any, fn: Any) -> tuple[str, bool, bool]:
    """(``G[0]``, ``self.h.0.attn``, ``conv.weight``, ``<value>[0]`` where the root is not the
    function; whether every part is known; whether it is read from the function or module itself,
    not its globals or closures: shown from ``self``)."""
    root, steps = _shown(pr)
    complete = own = root is Root.FUNCTION
    text, state = ("self", "self") if complete else ("<value>", None)
    free = getattr(getattr(fn, "__code__", None), "co_freevars", ())
    i = 0
    while i < len(steps):
        s = steps[i]
        k = s.key if s.known else "?"
        complete = complete and s.known
        attr = s.kind is Read.ATTR
        nxt = steps[i + 1] if i + 1 < len(steps) else None
        if state == "self" and k == "__globals__":
            text, state, own = "globals()", "globals", False  # fn.__globals__
        elif state == "self" and k == "__closure__":
            text, state, own = "closure", "closure", False
        elif state == "globals" and isinstance(k, str):
            text, state = k, None  # a global: G
        elif state == "self" and attr and k == "forward":
            text, state = text + ".forward", "forward"  # a module's forward.__func__.__globals__
        elif state in ("self", "forward") and attr and k == "__func__":
            text, state = text + ".__func__", "func"
        elif state in ("forward", "func") and attr and k == "__globals__":
            text, state = text + ".__globals__", "module globals"
        elif state == "module globals" and not attr and isinstance(k, str) and _GLOBAL_NAME.fullmatch(k):
            text, state, own = k, None, False
        elif state == "closure" and not attr and type(k) is int and k >= 0 and s.known:
            text, state = f"{text}[{k}]", k  # a cell: closure[0]
        elif type(state) is int and attr and k == "cell_contents":
            text, state = (free[state] if state < len(free) else f"{text}.cell_contents"), None  # its variable
        elif (attr and k == "_modules" and nxt is not None and nxt.kind is Read.ITEM and isinstance(nxt.key, str)
              and _SUBMODULE_NAME.fullmatch(nxt.key)):
            text, state, i = f"{text}.{nxt.key}", None, i + 1  # a submodule as thunder prints it: self.h.0
        else:
            text, state = (f"{text}.{k}" if attr else f"{text}[{k!r}]"), None
        i += 1
    return text, complete, own


def text(pr: Any, fn: Any = None) -> str:
    """How explain() shows the value read through ``pr``: ``G``, ``self.mode``, ``self.h.0.attn``,
    ``conv.weight`` (``fn``, the jitted function, names its closure cells), ``self.__defaults__[0]``;
    ``<value>`` for a root other than the function, ``?`` for a key that is not a constant."""
    return _render(pr, fn)[0]


def reads_own_state(pr: Any) -> bool:
    """Whether the value read through ``pr`` is the jitted function's or module's own state
    (shown as ``self.lin.weight``, ``self.__defaults__[0]``), not an argument, global or closure."""
    return _render(pr, None)[2]


def state_name(pr: Any, fn: Any = None) -> str | None:
    """:func:`text` where every part of it is known and it is read from the function's
    globals, closures or module (``conv.stride[0]``, ``self.k``), else None."""
    shown, complete, _ = _render(pr, fn)
    return shown if complete else None


def parameter_names(fn: Any) -> list[str]:
    """The positional parameter names of the jitted function (a module's ``forward``'s)."""
    import inspect

    if fn is None:
        return []
    try:
        target = fn.forward if hasattr(fn, "forward") and not inspect.isfunction(fn) else fn
        params = inspect.signature(target).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def argument_name(pr: Any, parameters: list[str] | None = None) -> str | None:
    """``l[1]`` (``args[1][1]`` without parameter names), ``s.start``, ``k[0]`` (``kwargs['k'][0]``)
    for a value read from the call's arguments through constant keys, else None."""
    path = parse(pr)
    if path.root not in ARGUMENT_ROOTS or not all(s.known for s in path.steps):
        return None
    shown = path.root.value
    for i, s in enumerate(path.steps):
        k = s.key
        if i == 0 and path.root is Root.ARGS and parameters and type(k) is int and k < len(parameters):
            shown = parameters[k]
        elif i == 0 and path.root is Root.KWARGS and type(k) is str:
            shown = k
        else:
            shown = f"{shown}[{k!r}]" if s.kind is Read.ITEM else f"{shown}.{k}"
    return shown
