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
from dataclasses import replace
from typing import Any

import torch
from thunder.core.interpreter import PseudoInst, ProvenanceRecord, WrappedValue, wrap
from thunder.core.trace import get_tracectx

from metatrace.guards import provenance
from metatrace.interpret.modules.repeated_blocks.arguments import check_kept_sizes, match, template_numbers
from metatrace.interpret.modules.repeated_blocks.records import (BlockStamps, Template, ambient, arguments_of, known,
                                                                 record)
from metatrace.interpret.modules.repeated_blocks.renaming import NotRenamable, Renaming
from metatrace.interpret.modules.repeated_blocks.correspondence import NotACopy, paired_objects
from metatrace.state import compile_context
from metatrace.state.block_stamping import SETTINGS
from metatrace.state.compile_session import current_jit_ctx, session
from metatrace.state.view_families import VIEW_FAMILIES


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
    return record(templates, ctx, compile_session, runtimectx, fn, args, kwargs, path, interpret)


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


def _stamp(template: Template, ctx, s, runtimectx, fn, args, kwargs):
    """Step 4: ``template`` renamed for the sibling ``fn`` and added to the compile; NotACopy
    (before anything changes) where the sibling or its arguments do not fit the record."""
    if ambient() != template.ambient:
        raise NotACopy("called under another grad mode or autocast than the first block")
    pairs = paired_objects(template.module, fn.value, template.wrapped_before, known(runtimectx), template.read)
    arguments, numbers = [], {}
    match(template.arguments, arguments_of(args, kwargs), "the arguments", arguments, numbers)
    arguments += [(x, numbers[name]) for name, x in template_numbers(template.arguments).items()
                  if numbers.get(name) is not None and numbers[name] is not x]
    trace = get_tracectx()
    renaming = Renaming(trace, template.names_before, template.record, fn.provenance, arguments)
    bsyms = [renaming.bsym(b) for b in template.bsyms]
    check_kept_sizes(template, renaming, {n for n, y in numbers.items() if y.name != n})
    recorded = []
    for name, b in template.recorded:
        b = renaming.bsym(b)
        recorded.append((renaming.new_name(name), b))
    guards = [replace(g, lhs=renaming.value(g.lhs), rhs=renaming.value(g.rhs)) for g in template.guards]
    constraints = [tuple(renaming.value(x) for x in c) for c in template.constraints]
    views = [(renaming.value(root), renaming.value(v)) for root, v in template.views]
    result = renaming.value(template.result)
    called = []
    for module, pr in template.called_modules:
        if id(module) not in pairs:
            raise NotACopy(f"the first block called a module outside itself ({provenance.text(pr)})")
        called.append((pairs[id(module)], renaming.record(pr)))
    # everything renamed: now the compile's lists change
    trace.scopes[-1].extend(bsyms)
    collector = compile_context.collector()
    for name, b in recorded:
        collector.recorded.setdefault(name, b)
    for g in guards:
        collector.add_stamped(g)
    for c in constraints:
        ctx.add_constraint(c)
    for module, pr in called:
        s.called_modules.add(ctx, module, pr)
    for key in template.callees:  # (the checks are among the constraints; these keys only spare repeats)
        s.callees.add((id(pairs[key[0]]), *key[1:]) if type(key) is tuple and key and key[0] in pairs else key)
    if views:
        families = VIEW_FAMILIES.get(trace)
        for root, v in views:
            families.add_view(root, v)
    return wrap(result, provenance=ProvenanceRecord(PseudoInst.OPAQUE, inputs=[fn.provenance]))


@contextlib.contextmanager
def stamping(enabled: bool):
    """Blocks stamped (True) or every block interpreted (False) in the block."""
    old, SETTINGS.enabled = SETTINGS.enabled, enabled
    try:
        yield
    finally:
        SETTINGS.enabled = old
