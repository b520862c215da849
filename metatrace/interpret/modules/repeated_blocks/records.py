"""A block's record: what interpreting the first block of a list added to the compile (its bound
symbols, guards, constraints, producers, called-modules checks, views, the callee keys), the
values it read below itself (``ReadPaths``), and why a record cannot be stamped (``refusal``).
Recorded by diffing the compile's append-only lists before and after the call; what changes in
place (the called-modules constraint) is logged as it happens (``Recording``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from thunder.core.compile_data import get_compile_data
from thunder.core.interpreter import PseudoInst, ProvenanceRecord, WrappedValue
from thunder.core.prims import OpTags
from thunder.core.proxies import NumberProxy, Proxy, TensorProxy
from thunder.core.trace import get_tracectx

from metatrace.guards.value_checks import ExpectedPresence
from metatrace.interpret.modules.repeated_blocks.correspondence import ReadPaths, wrapped_objects
from metatrace.state import compile_context
from metatrace.state.registry import EXPECTED
from metatrace.state.view_families import VIEW_FAMILIES


@dataclass(eq=False)
class Recording:
    """What a call made that is not in an append-only list (logged as it happens)."""

    called_modules: list = field(default_factory=list)  # (module, provenance record) per check added


@dataclass(eq=False)
class Template:
    """The first block of a list, as recorded, or why it is not stamped (``refused``)."""

    module: Any
    record: ProvenanceRecord
    path: str
    wrapped_before: set
    arguments: list
    refused: str | None = None
    names_before: set = field(default_factory=set)
    bsyms: list = field(default_factory=list)
    guards: list = field(default_factory=list)
    recorded: list = field(default_factory=list)
    constraints: list = field(default_factory=list)
    called_modules: list = field(default_factory=list)
    views: list = field(default_factory=list)
    callees: list = field(default_factory=list)
    ambient: tuple = ()  # thunder's grad mode and autocast stack when the block was called
    result: Any = None
    read: Any = None  # ReadPaths


@dataclass(eq=False)
class BlockStamps:
    """One compile's blocks (the CompileSession's ``blocks``)."""

    templates: dict = field(default_factory=dict)  # (list's record key, class) -> [Template]
    recordings: list = field(default_factory=list)  # the first blocks being interpreted, outermost first
    # (the block's path, the first block's path or None, why it was interpreted or None)
    log: list = field(default_factory=list)


def known(runtimectx):
    wrappers = runtimectx._known_wrappers

    def known(obj) -> bool:
        cached = wrappers.get(id(obj))
        w = cached[0]() if cached is not None else None
        return w is not None and (w.value is obj or w.original_value is obj)

    return known


# ---------------------------------------------------------------------------------------------
# Step 2: the first block, recorded
# ---------------------------------------------------------------------------------------------



def arguments_of(args: tuple, kwargs: dict) -> tuple:
    return (tuple(a.value if isinstance(a, WrappedValue) else a for a in args),
            {k: v.value if isinstance(v, WrappedValue) else v for k, v in kwargs.items()})



def ambient() -> tuple:
    """What thunder's symbols read besides their arguments: grad mode (``torch.no_grad()``) and
    the autocast regions the call is in."""
    cd = get_compile_data()
    return (cd.is_grad_enabled, tuple(cd.autocast_stack.stack)) if cd is not None else ()



@dataclass
class _Before:
    nb: int
    last: Any
    ng: int
    nrec: int
    constraints: list
    names: set
    leaves: int
    callees: set
    defaults: int
    mutations: int
    outputs: int
    prologue: int
    views: dict


def record(templates, ctx, compile_session, runtimectx, fn, args, kwargs, path, interpret):
    trace = get_tracectx()
    collector = compile_context.collector()
    module = fn.value
    template = Template(module, fn.provenance, path, wrapped_objects(module, known(runtimectx)),
                        arguments_of(args, kwargs))
    template.ambient = ambient()
    before = _before(ctx, compile_session, collector, trace)
    recording = Recording()
    blocks = compile_session.blocks
    blocks.recordings.append(recording)  # (a block inside, recorded or stamped, is part of this record too)
    try:
        result = interpret()
    finally:
        blocks.recordings.pop()
    templates.append(template)
    template.refused = _refusal(before, ctx, compile_session, collector, trace, result)
    if template.refused is None and ambient() != template.ambient:
        template.refused = "the first block leaves grad mode or autocast changed"
    if template.refused is None:
        scope = trace.scopes[-1]
        template.names_before = before.names
        template.bsyms = scope[before.nb:]
        template.guards = collector.guards[before.ng:]
        template.recorded = list(collector.recorded.items())[before.nrec:]
        template.constraints = ctx._constraints[len(before.constraints):]
        template.called_modules = recording.called_modules
        template.views = _new_views(before.views, VIEW_FAMILIES.get(trace, False))
        template.callees = [k for k in compile_session.callees if k not in before.callees]
        template.result = result.value
        template.read = _read_paths(template)
    return result


def _read_paths(template: Template) -> ReadPaths:
    """The paths below the first block that its record reads: the provenance of every proxy it
    made (the prologue unpacks and checks each of them)."""
    read = ReadPaths()
    seen: set[str] = set()
    proxies = []
    todo = [*template.bsyms, *(b for _, b in template.recorded)]
    while todo:
        b = todo.pop()
        proxies.extend(b.flat_proxy_args)
        proxies.extend(b.flat_proxy_outs)
        todo.extend(b.subsymbols)
    for g in template.guards:
        proxies.extend(x for x in (g.lhs, g.rhs) if isinstance(x, Proxy))
    for c in template.constraints:
        presence = EXPECTED.get(getattr(c[0], "value_id", None))
        if type(presence) is ExpectedPresence and len(c) == 2 and isinstance(c[1], Proxy):
            # hasattr(obj, name) reads one name (the pairing compares every __dict__'s keys)
            path = _path_below(c[1].history, template.record)
            if path is not _OUTSIDE:
                read.add(None if path is None else (*path, presence.name))
            continue
        proxies.extend(x for x in c if isinstance(x, Proxy))
    # (the called-modules check reads hook dicts and tensors, which the pairing compares whole)
    for p in proxies:
        history = p if isinstance(p, ProvenanceRecord) else getattr(p, "history", None)
        if isinstance(p, Proxy) and p.name in seen or not isinstance(history, ProvenanceRecord):
            continue
        if isinstance(p, Proxy):
            seen.add(p.name)
        path = _path_below(history, template.record)
        if path is not _OUTSIDE:
            read.add(path)
    return read


_OUTSIDE = object()


def _path_below(pr: ProvenanceRecord, root: ProvenanceRecord) -> Any:
    """The attribute and item names from ``root`` to ``pr`` (a tuple), ``_OUTSIDE`` when ``pr`` is
    not read from ``root``, None when it is but not by names alone."""
    steps = []
    while pr is not root:
        if (pr.inst in (PseudoInst.LOAD_ATTR, PseudoInst.BINARY_SUBSCR) and len(pr.inputs) == 2
                and pr.inputs[1].inst is PseudoInst.CONSTANT):
            steps.append(pr.inputs[1].value)
            pr = pr.inputs[0]
            continue
        return None if _mentions(pr, root) else _OUTSIDE
    return tuple(reversed(steps))


def _mentions(pr: ProvenanceRecord, root: ProvenanceRecord) -> bool:
    todo, seen = [pr], set()
    while todo:
        x = todo.pop()
        if x is root:
            return True
        if id(x) not in seen:
            seen.add(id(x))
            todo.extend(x.inputs)
    return False


def _before(ctx, s, collector, trace) -> _Before:
    scope = trace.scopes[-1]
    families = VIEW_FAMILIES.get(trace, False)
    return _Before(len(scope), scope[-1] if scope else None, len(collector.guards), len(collector.recorded),
                   list(ctx._constraints), set(trace.names), len(s.number_leaves), set(s.callees),
                   len(s.mutable_defaults), _mutations(s), sum(map(len, ctx._additional_outputs.values())),
                   len(ctx.prologue_trace.bound_symbols),
                   {} if families is None else {k: len(v) for k, v in families.views_of.items()})


def _mutations(s) -> int:
    log = s.mutations
    return 0 if log is None else len(log.mutations) + len(log.snapshots) + len(log.sources)


def _refusal(before: _Before, ctx, s, collector, trace, result) -> str | None:
    """Why the first block's record cannot be stamped, or None."""
    if not isinstance(result, WrappedValue):
        return "the first block raised"
    scope = trace.scopes[-1]
    if len(trace.scopes) != 1 or len(scope) < before.nb or (before.nb and scope[before.nb - 1] is not before.last):
        return "the first block rewrote bound symbols recorded before it"
    if s.raised is not None:
        return "the first block raised"
    if _mutations(s) != before.mutations:
        return "the first block changes an object that existed before the call"
    if len(s.number_leaves) != before.leaves or len(s.mutable_defaults) != before.defaults:
        return "the first block reads numbers or defaults from outside its arguments and state"
    if sum(map(len, ctx._additional_outputs.values())) != before.outputs:
        return "the first block adds outputs to the trace"
    if len(ctx.prologue_trace.bound_symbols) != before.prologue:
        return "the first block writes to the prologue"
    allowed = s.called_modules.constraint if s.called_modules is not None else None
    now = ctx._constraints
    if len(now) < len(before.constraints) or any(
            a is not b and b is not allowed for a, b in zip(before.constraints, now)):
        return "the first block changed a prologue constraint made before it"
    for bsym in scope[before.nb:]:
        if _in_place(bsym):
            return f"the first block writes in place ({bsym.sym.name})"
    if not _stampable_result(result.value):
        return f"the first block returns a {type(result.value).__name__}"
    return None


def _in_place(bsym) -> bool:
    todo = [bsym]
    while todo:
        b = todo.pop()
        tags = getattr(b.sym, "tags", None) or ()
        if OpTags.IN_PLACE in tags or b.sym.name.endswith("_") and not b.sym.name.startswith("_"):
            return True
        todo.extend(b.subsymbols)
    return False


def _stampable_result(value) -> bool:
    if isinstance(value, (TensorProxy, NumberProxy)) or value is None:
        return True
    return type(value) is tuple and all(isinstance(v, (TensorProxy, NumberProxy)) or v is None for v in value)


def _new_views(before: dict, families) -> list:
    if families is None:
        return []
    out = []
    for root_id, views in families.views_of.items():
        start = before.get(root_id, 0)
        if len(views) > start:
            root = families.root_of.get(id(views[0]))
            out.extend((root, v) for v in views[start:])
    return out


# ---------------------------------------------------------------------------------------------
# Steps 3 and 4: a sibling, stamped
# ---------------------------------------------------------------------------------------------


