"""A block of a module list (a transformer layer) interpreted once per compile and stamped out for
its siblings: the interpreter's cost stops growing with depth.

thunder's interpreter runs every opcode of every layer again, although the layers run the same
code on the same shapes. While it interprets the first block called from a ``ModuleList`` (or
``Sequential``, any module reached as ``parent._modules[key]``), metatrace records what the call
added to the compile: the bound symbols, the guards, the prologue's constraints, the numbers'
producers, the modules whose state the prologue checks. A later block of the same list is not
interpreted when it is a copy of the first for every read its forward can make, and is called
with equivalent arguments; the first block's record is renamed for it instead
(``block_renaming``): its own parameters and state numbers get proxies the prologue unpacks from
the sibling's path (``h[7].attn.qkv.weight``), and every check the first block's reads produced
is made on the sibling's reads.

A call, in order:

1. only a module read as an item of its parent's ``_modules`` (a list's layer, a named
   submodule), under symbolic values, at the trace's top level, is a candidate; anything else is
   interpreted;
2. the candidate is tried against the records kept for its list and class: paired with the
   recorded block (``block_correspondence``: same class, every value its forward read equal,
   every other object the same, two distinct sets of tensors, none read before through another
   path), called under the same grad mode and autocast, with matching arguments (the same
   dtypes, grad flags and values; a size may be another symbol of the same value, which the
   record is renamed to); the first record that fits is stamped (step 4);
3. a candidate no record fits is interpreted and, while its list has fewer than
   ``MAX_TEMPLATES`` records, recorded: the first block of a list, and the second where the first
   took the model's input (other sizes than the previous block's output). A record is kept
   only if everything the call changed is something the renaming copies (no mutation of a
   pre-existing object, no in-place operator, no exception, no constraint changed in place but
   the called-modules check, no numbers read from outside the arguments and state, grad mode
   and autocast as they were), else the list's later blocks are interpreted, and ``explain``
   says why;
4. a stamp appends the renamed bound symbols to the trace, adds the renamed guards, constraints
   and producers, has the called-modules check cover the sibling's submodules, and returns the
   renamed result.

A record recorded inside another (an attention inside the first layer) is part of the outer
one too: stamping the second layer stamps its attention with it.

What is not equivalent to interpreting: the first block's first reads of a shared value (a
function object a global also names) made checks that an interpreted sibling, finding the
wrapper thunder's interpreter cached, does not make; the stamp makes them on the sibling's own
path. The prologue checks the same values or more, never fewer (tests/interpret/test_repeated_blocks.py
compares both ways on litgpt and Hugging Face models).

The switch: ``METATRACE_STAMP_BLOCKS=0`` in the environment, or :func:`stamping` (tests compare
both ways). What was stamped and what was interpreted, and why, is in ``explain()``.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from thunder.core.interpreter import PseudoInst, ProvenanceRecord, WrappedValue, wrap
from thunder.core.prims import OpTags
from thunder.core.proxies import Proxy, TensorProxy, NumberProxy
from thunder.core.compile_data import get_compile_data
from thunder.core.trace import get_tracectx

from metatrace.guards import provenance
from metatrace.interpret.modules import block_correspondence
from metatrace.interpret.modules.block_correspondence import NotACopy
from metatrace.interpret.modules.block_renaming import NotRenamable, Renaming
from metatrace.guards.value_checks import ExpectedPresence
from metatrace.state import compile_context
from metatrace.state.registry import EXPECTED
from metatrace.state.block_stamping import SETTINGS
from metatrace.state.compile_session import current_jit_ctx, session
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
    read: Any = None  # block_correspondence.ReadPaths


@dataclass(eq=False)
class BlockStamps:
    """One compile's blocks (the CompileSession's ``blocks``)."""

    templates: dict = field(default_factory=dict)  # (list's record key, class) -> [Template]
    recordings: list = field(default_factory=list)  # the first blocks being interpreted, outermost first
    # (the block's path, the first block's path or None, why it was interpreted or None)
    log: list = field(default_factory=list)


def call(runtimectx, fn: WrappedValue, args: tuple, kwargs: dict, interpret):
    """The module call ``fn(*args, **kwargs)``: stamped from its list's first block, or
    ``interpret()`` (recording it when it is the first)."""
    module = fn.value
    if not SETTINGS.enabled or not isinstance(module, torch.nn.Module):
        return interpret()
    parent = _list_of(fn.provenance)
    ctx = current_jit_ctx()
    if parent is None or ctx is None or compile_context.collector() is None:
        return interpret()
    trace = get_tracectx()
    if trace is None or len(trace.scopes) != 1:
        return interpret()
    compile_session = session(ctx)
    blocks = compile_session.blocks
    if blocks is None:
        blocks = compile_session.blocks = BlockStamps()
    path = provenance.text(fn.provenance, compile_session.fn)
    key = (parent, type(module))
    templates = blocks.templates.setdefault(key, [])
    reasons = []
    for template in templates:
        if template.refused is not None:
            reasons.append(template.refused)
            continue
        try:
            result = _stamp(template, ctx, compile_session, runtimectx, fn, args, kwargs)
        except (NotACopy, NotRenamable) as e:
            reasons.append(str(e))
            continue
        blocks.log.append((path, template.path, None))
        return result
    if templates:
        blocks.log.append((path, templates[0].path, "; ".join(dict.fromkeys(reasons))))
    if len(templates) >= MAX_TEMPLATES or any(t.refused is not None for t in templates):
        return interpret()
    # the first block of the list, or one called with other arguments (the first took the
    # model's input, the next ones the previous block's output): recorded for those after it
    return _record(templates, ctx, compile_session, runtimectx, fn, args, kwargs, path, interpret)


# Records kept per list and class: a block whose arguments or state match none of them is
# interpreted (and recorded, while there are fewer).
MAX_TEMPLATES = 3


def _list_of(pr) -> Any:
    """The key of the module list ``pr`` reads an item of (``parent._modules[key]``), or None."""
    if pr is None or pr.inst is not PseudoInst.BINARY_SUBSCR or len(pr.inputs) != 2:
        return None
    dict_pr, key_pr = pr.inputs
    if dict_pr.inst is not PseudoInst.LOAD_ATTR or len(dict_pr.inputs) != 2:
        return None
    if dict_pr.inputs[1].inst is not PseudoInst.CONSTANT or dict_pr.inputs[1].value != "_modules":
        return None
    if key_pr.inst is not PseudoInst.CONSTANT or not isinstance(key_pr.value, str):
        return None
    return provenance.key(dict_pr)


def _known(runtimectx):
    wrappers = runtimectx._known_wrappers

    def known(obj) -> bool:
        cached = wrappers.get(id(obj))
        w = cached[0]() if cached is not None else None
        return w is not None and (w.value is obj or w.original_value is obj)

    return known


# ---------------------------------------------------------------------------------------------
# Step 2: the first block, recorded
# ---------------------------------------------------------------------------------------------


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


def _record(templates, ctx, compile_session, runtimectx, fn, args, kwargs, path, interpret):
    trace = get_tracectx()
    collector = compile_context.collector()
    module = fn.value
    template = Template(module, fn.provenance, path, block_correspondence.wrapped_objects(module, _known(runtimectx)),
                        _arguments(args, kwargs))
    template.ambient = _ambient()
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
    if template.refused is None and _ambient() != template.ambient:
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


def _read_paths(template: Template) -> block_correspondence.ReadPaths:
    """The paths below the first block that its record reads: the provenance of every proxy it
    made (the prologue unpacks and checks each of them)."""
    read = block_correspondence.ReadPaths()
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


def _arguments(args: tuple, kwargs: dict) -> tuple:
    return (tuple(a.value if isinstance(a, WrappedValue) else a for a in args),
            {k: v.value if isinstance(v, WrappedValue) else v for k, v in kwargs.items()})


def _ambient() -> tuple:
    """What thunder's symbols read besides their arguments: grad mode (``torch.no_grad()``) and
    the autocast regions the call is in."""
    cd = get_compile_data()
    return (cd.is_grad_enabled, tuple(cd.autocast_stack.stack)) if cd is not None else ()


def _stamp(template: Template, ctx, s, runtimectx, fn, args, kwargs):
    if _ambient() != template.ambient:
        raise NotACopy("called under another grad mode or autocast than the first block")
    pairs = block_correspondence.pairs(template.module, fn.value, template.wrapped_before, _known(runtimectx),
                                      template.read)
    arguments, numbers = [], {}
    _match(template.arguments, _arguments(args, kwargs), "the arguments", arguments, numbers)
    arguments += [(x, numbers[name]) for name, x in template_numbers(template.arguments).items()
                  if numbers.get(name) is not None and numbers[name] is not x]
    trace = get_tracectx()
    renaming = Renaming(trace, template.names_before, template.record, fn.provenance, arguments)
    bsyms = [renaming.bsym(b) for b in template.bsyms]
    _check_kept_sizes(template, renaming, {n for n, y in numbers.items() if y.name != n})
    recorded = [(b, name) for name, b in ((n, renaming.bsym(b)) for n, b in template.recorded)]
    recorded = [(renaming.new_name(name), b) for b, name in recorded]
    guards = [replace(g, lhs=renaming.value(g.lhs), rhs=renaming.value(g.rhs)) for g in template.guards]
    constraints = [tuple(renaming.value(x) for x in c) for c in template.constraints]
    views = [(renaming.value(root), renaming.value(v)) for root, v in template.views]
    result = renaming.value(template.result)
    # everything renamed: now the compile's lists change
    trace.scopes[-1].extend(bsyms)
    collector = compile_context.collector()
    for name, b in recorded:
        collector.recorded.setdefault(name, b)
    for g in guards:
        collector.add_stamped(g)
    for c in constraints:
        ctx.add_constraint(c)
    if template.called_modules:
        for module, pr in template.called_modules:
            sibling = pairs.get(id(module))
            if sibling is None:
                raise AssertionError(f"a called module outside the block: {pr}")
            s.called_modules.add(ctx, sibling, renaming.record(pr))
    for key in template.callees:  # (the checks are among the constraints; these keys only spare repeats)
        s.callees.add((id(pairs[key[0]]), *key[1:]) if type(key) is tuple and key and key[0] in pairs else key)
    if views:
        families = VIEW_FAMILIES.get(trace)
        for root, v in views:
            families.add_view(root, v)
    return wrap(result, provenance=ProvenanceRecord(PseudoInst.OPAQUE, inputs=[fn.provenance]))


def _match(a: Any, b: Any, where: str, out: list, numbers: dict) -> None:
    """Appends (the first block's tensor, the sibling's) for each tensor argument, and maps the
    first block's numbers (sizes, number arguments) to the sibling's (``numbers``: name -> the
    sibling's proxy); NotACopy where the arguments could make the block's code take another path
    (another dtype, grad flag, value of a number, a constant size for a symbol, a symbol for two)."""
    if isinstance(a, TensorProxy) and isinstance(b, TensorProxy):
        if (type(a) is not type(b) or a.dtype != b.dtype or a.device != b.device
                or a.requires_grad != b.requires_grad or len(a._shape) != len(b._shape)):
            raise NotACopy(f"{where}: tensor {b} differs from the first block's {a}")
        for i, (x, y) in enumerate(zip(a._shape, b._shape)):
            _match_number(x, y, f"{where}.shape[{i}]", numbers)
        out.append((a, b))
    elif isinstance(a, NumberProxy) or isinstance(b, NumberProxy):
        _match_number(a, b, where, numbers)
    elif isinstance(a, Proxy) or isinstance(b, Proxy):
        if a is not b:
            raise NotACopy(f"{where}: {b} where the first block had {a}")
    elif type(a) is not type(b):
        raise NotACopy(f"{where}: a {type(b).__name__} where the first block had a {type(a).__name__}")
    elif type(a) in (tuple, list):
        if len(a) != len(b):
            raise NotACopy(f"{where}: {len(b)} items where the first block had {len(a)}")
        for i, (x, y) in enumerate(zip(a, b)):
            _match(x, y, f"{where}[{i}]", out, numbers)
    elif type(a) is dict:
        if list(a) != list(b):
            raise NotACopy(f"{where}: keys {list(b)} where the first block had {list(a)}")
        for k in a:
            _match(a[k], b[k], f"{where}[{k!r}]", out, numbers)
    elif a is not b and not (isinstance(a, (int, float, str, bool)) and a == b):
        raise NotACopy(f"{where}: {b!r:.40} where the first block had {a!r:.40}")


def _match_number(x: Any, y: Any, where: str, numbers: dict) -> None:
    """A number of the first block's arguments (a size, a number argument) against the sibling's:
    two symbols of one value and type pair up (the first block's record is renamed to the
    sibling's symbol), each of the first block's symbols with one of the sibling's; constants
    must be equal."""
    if isinstance(x, NumberProxy) and isinstance(y, NumberProxy):
        if type(x) is not type(y) or x.value != y.value or x.python_type is not y.python_type:
            raise NotACopy(f"{where}: {y} where the first block had {x}")
        paired = numbers.setdefault(x.name, y)
        if paired is not y and paired.name != y.name:
            raise NotACopy(f"{where}: {y} where the first block's {x} stands for {paired} elsewhere")
    elif isinstance(x, NumberProxy) or isinstance(y, NumberProxy) or x != y or type(x) is not type(y):
        raise NotACopy(f"{where}: {y!r} where the first block had {x!r}")


def template_numbers(arguments: Any) -> dict:
    """The number proxies among the first block's arguments and their sizes, by name."""
    found: dict = {}
    todo = [arguments]
    while todo:
        x = todo.pop()
        if isinstance(x, TensorProxy):
            todo.extend(x._shape)
        elif isinstance(x, NumberProxy):
            found.setdefault(x.name, x)
        elif type(x) in (tuple, list):
            todo.extend(x)
        elif type(x) is dict:
            todo.extend(x.values())
    return found


def _check_kept_sizes(template: Template, renaming: Renaming, renamed: set) -> None:
    """Where a size of the arguments is renamed (the sibling's input has its own symbol), no
    tensor the record keeps as it is (one read from outside the block) may have that size: it
    would keep the first block's symbol where the record's operations assume the sibling's."""
    if not renamed:
        return
    todo = list(template.bsyms)
    while todo:
        b = todo.pop()
        for p in (*b.flat_proxy_args, *b.flat_proxy_outs):
            if isinstance(p, TensorProxy) and renaming.proxy(p) is p and any(
                    isinstance(d, NumberProxy) and d.name in renamed for d in p._shape):
                raise NotACopy(f"{p.name}, read from outside the block, has the size the sibling renames")
        todo.extend(b.subsymbols)


def _size(x) -> Any:
    return ("proxy", x.name) if isinstance(x, Proxy) else ("value", x)


@contextlib.contextmanager
def stamping(enabled: bool):
    """Blocks stamped (True) or every block interpreted (False) in the block."""
    old, SETTINGS.enabled = SETTINGS.enabled, enabled
    try:
        yield
    finally:
        SETTINGS.enabled = old
