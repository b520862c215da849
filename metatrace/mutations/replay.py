"""The epilogue operator that replays the recorded stores, and the undo after tracing.

After thunder interprets the function (``jit_ext.process_recorded_modifications``, still inside
the computation trace), the recorded mutations become one :class:`ReplayPlan` and one bound
symbol ``metatrace_replay('r3', ...)`` in the epilogue, whose arguments are the targets (thunder's
prologue unpacks them from their provenance, as it does for its own ``pack_attr``) and the
stored tensors and numbers (the computation returns them). thunder runs the epilogue after every
call, so the stores happen on every call, with that call's values, in the order the function
made them. thunder's own records of the same stores (``pack_attr``/``pack_buffer`` of a module's
member dicts, which it writes back only for proxied objects) are dropped: one mechanism, once.

When tracing ends (``jit_ext.jit_ctx`` exits, normally or by an exception), every pre-existing
object the trace mutated is restored from its snapshot, so no proxy is left in the caller's
objects and the first call's own replay starts from the state eager would see.
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from dataclasses import dataclass
from typing import Any

import thunder.core.jit_ext as jit_ext
import torch
from thunder.core.interpreter import PseudoInst
from thunder.core.prims import OpTags
from thunder.core.proxies import Proxy
from thunder.core.trace import tracectx

from metatrace.guards import provenance
from metatrace.state import registry
from metatrace.interpret.modules.wrapper_copies import follow_stores, wrapper_of_module
from metatrace.state.compile_session import session
from metatrace.mutations.templates import Templates, epilogue_operator_rows
from metatrace.mutations.unreplayable_stores import raise_dropped
from metatrace.patching import Patch, attribute
from metatrace.metas.proxy_edits import replace_record_input

NAME = "metatrace_replay"


@dataclass(frozen=True)
class ReplayStep:
    fn: object  # the mutating callable, unbound (list.append, setattr)
    target: object  # templates
    args: tuple
    kwargs: tuple  # (name, template) pairs


@dataclass(frozen=True)
class ReplayPlan:
    steps: tuple
    # the jitted module's ThunderModule (a weak reference), and the ``_buffers`` and
    # ``_parameters`` dicts of the model's modules the steps may store into: (target template,
    # dict name, dotted prefix, whether the target is the module rather than the dict)
    wrapper: Any = None
    module_dicts: tuple = ()

    def __reduce__(self):
        # a stored entry (metatrace.entry_cache): the ThunderModule is the loading process's own
        return _restored_plan, (self.steps, self.wrapper is not None, self.module_dicts)

    def run(self, leaves: tuple) -> None:
        memo: dict = {}
        dicts = [(_module_dict(t.build(leaves, memo), kind, of_module), kind, prefix)
                 for t, kind, prefix, of_module in self.module_dicts]
        before = [dict(d) for d, _, _ in dicts]
        for step in self.steps:
            step.fn(step.target.build(leaves, memo), *(a.build(leaves, memo) for a in step.args),
                    **{k: v.build(leaves, memo) for k, v in step.kwargs})
        wrapper = self.wrapper() if self.wrapper is not None else None
        if wrapper is not None:  # (``self.avg = ...``: the wrapper's copy moves with the model's buffer)
            for (d, kind, prefix), was in zip(dicts, before):
                follow_stores(wrapper, kind, prefix, was, d)


def _restored_plan(steps: tuple, had_wrapper: bool, module_dicts: tuple) -> ReplayPlan:
    from metatrace.state.compile_context import ENTRY_LOADING

    wrapper = ENTRY_LOADING.get().wrapper if had_wrapper else None
    return ReplayPlan(steps, None if wrapper is None else weakref.ref(wrapper), module_dicts)


def _module_dict(target, kind: str, of_module: bool) -> dict:
    return target.__dict__[kind] if of_module else target


def _replay(plan_id: str, *leaves) -> None:
    registry.REPLAYS[plan_id].run(leaves)


def _meta(plan_id: str, *leaves) -> None:
    return None


def _plan(log, computation_trace, epilogue_trace, fn) -> tuple[ReplayPlan, list]:
    proxies: dict[int, Proxy] = {}

    def object_proxy(pr) -> Proxy:
        """The target as the epilogue receives it: thunder's proxy of the record if it made one
        (its prologue unpacks that), else a new one the prologue unpacks from the record."""
        proxy = getattr(pr, "proxy", None)
        if proxy is None:
            proxy = proxies.get(id(pr))
        if proxy is None:
            with tracectx(computation_trace):  # named in the computation's namespace, as thunder does
                proxy = proxies[id(pr)] = Proxy(history=pr)
            epilogue_trace.add_name(proxy.name)
        return proxy

    templates = Templates(log, object_proxy)
    steps = []
    for m in log.mutations:
        where = m.line or "the jitted function"
        steps.append(ReplayStep(m.fn, templates.target(m.target), tuple(templates.of(a, where) for a in m.args),
                                tuple((k, templates.of(v, where)) for k, v in m.kwargs.items())))
    wrapper = wrapper_of_module(fn)
    module_dicts = _module_dicts(log, templates) if wrapper is not None else ()
    plan = ReplayPlan(tuple(steps), weakref.ref(wrapper) if module_dicts else None, module_dicts)
    return plan, templates.leaves


def _module_dicts(log, templates) -> tuple:
    """The ``_buffers``/``_parameters`` dicts of the model's modules the replay may store into,
    with their prefixes: of a module it stores an attribute on (``self.avg = ...``:
    ``nn.Module.__setattr__`` puts a tensor there), or the dict itself (``register_buffer``)."""
    out, seen = [], set()
    for m in log.mutations:
        known = log.sources.get(id(m.target))
        if id(m.target) in seen or known is None or known[0] is not m.target:
            continue
        seen.add(id(m.target))
        if isinstance(m.target, torch.nn.Module):
            root, path = provenance.submodule_path(known[1])
            kinds = ("_buffers", "_parameters")
        elif type(m.target) is dict:
            step = provenance.last_read(known[1])
            if step is None or step.kind is not provenance.Read.ATTR or step.key not in ("_buffers", "_parameters"):
                continue
            (root, path), kinds = provenance.submodule_path(step.base), (step.key,)
        else:
            continue
        if provenance.is_jitted_function(root):
            prefix = "".join(f"{name}." for name in path)
            out += [(templates.target(m.target), kind, prefix, type(m.target) is not dict) for kind in kinds]
    return tuple(out)


def _replayed(log):
    """Whether thunder's record of stores into a dict is covered by the replay: the dict is
    snapshotted, or it is the ``__dict__`` of a snapshotted object (as thunder reads it: its
    wrapper may hold another dict object than ``vars(obj)``, so the provenance decides too)."""
    ids, keys = set(), set()
    for obj, _ in log.snapshots.values():
        ids.add(id(obj))
        known = log.sources.get(id(obj))
        if known is not None and known[0] is obj:
            keys.add(provenance.key(known[1]))

    def covered(modified) -> bool:
        if id(modified.value) in ids:
            return True
        pr = getattr(modified, "provenance", None)
        if pr is None:
            return False
        if provenance.key(pr) in keys:
            return True
        step = provenance.last_read(pr)
        return step is not None and step.key == "__dict__" and provenance.key(step.base) in keys

    return covered


def _process(original):
    """``process_recorded_modifications``' one wrapper: (1) thunder's records of stores into
    objects replayed here are dropped; (2) the recorded mutations become the epilogue's replay;
    (3) the epilogue's names include the computation's; (4) a store thunder would skip raises
    (:mod:`metatrace.mutations.unreplayable_stores`); (5) thunder's."""

    @functools.wraps(original)
    def process_recorded_modifications(ctx, epilogue_trace):
        log = session(ctx).mutations
        if log is not None and log.snapshots:
            # thunder's records of stores into the objects replayed here: written once, by the replay
            covered = _replayed(log)
            for modified in [m for m in ctx._additional_outputs if covered(m)]:
                del ctx._additional_outputs[modified]
        if log is not None and log.mutations:
            from thunder.core.trace import get_tracectx

            plan, leaves = _plan(log, get_tracectx(), epilogue_trace, session(ctx).fn)
            plan_id = registry.new_id("r")
            registry.REPLAYS[plan_id] = plan
            with tracectx(epilogue_trace):
                bsym = registry._symbols["replay"].bind(plan_id, *leaves, output=None)
            epilogue_trace.bound_symbols.append(bsym)
        # The epilogue's own proxies (thunder's AnyProxy for an output it cannot return as is)
        # must not take a name the computation gave an input: thunder's prologue matches its
        # checks to inputs by name, and checked a device argument against a list item (stock too)
        from thunder.core.trace import get_tracectx

        epilogue_trace.names.update(get_tracectx().names)
        raise_dropped(ctx)  # a store thunder would skip (into no replayed object) raises, naming it
        return original(ctx, epilogue_trace)

    return process_recorded_modifications


@contextlib.contextmanager
def restoring(ctx):
    """When tracing ends (normally or by an exception), the objects the trace mutated are restored."""
    try:
        yield
    finally:
        log = session(ctx).mutations
        if log is not None:
            log.undo()


def _depth(record) -> int:
    depth = 0
    while record is not None and record.inputs:
        record, depth = record.inputs[0], depth + 1
    return depth


_ROOTS = (PseudoInst.INPUT_FN, PseudoInst.INPUT_ARGS, PseudoInst.INPUT_KWARGS)


def _share_roots(inputs) -> None:
    """One record per root (the jitted function, the arguments) across the histories of the
    prologue's inputs and checked values:
    metatrace reads a function's defaults from a record of its own (``fn.__defaults__[0]``, the
    interpreter binds defaults as constants), and thunder unpacks each root record anew, under
    the same name (``fn``: 'name already used')."""
    canonical: dict = {}
    seen: set = set()
    pending = [getattr(v, "history", None) for v in inputs]
    while pending:
        record = pending.pop()
        if record is None or id(record) in seen:
            continue
        seen.add(id(record))
        for i, base in enumerate(record.inputs):
            if base.inst in _ROOTS and not base.inputs:
                replace_record_input(record, i, canonical.setdefault(base.inst, base))
            else:
                pending.append(base)


def _unpack_inputs(original):
    @functools.wraps(original)
    def unpack_inputs(ctx, prologue_trace, pro_to_comp_inps, pro_to_epi_inps, args, kwargs):
        _share_roots([*(v.proxy for v in (*pro_to_comp_inps, *pro_to_epi_inps)),
                      *(a for _, *constrained in ctx._constraints for a in constrained if isinstance(a, Proxy))])
        # An object the replay mutates and a container read from it (``cfg`` and ``cfg.hist``)
        # are both epilogue inputs. thunder unpacks each in the order given, and unpacking
        # ``cfg.hist`` first reached ``cfg``'s record, which still held the proxy tracing gave it
        # and no place in the ordering: KeyError. Records nearer the arguments first (stable; the
        # result is sorted by thunder's ordering all the same).
        pro_to_epi_inps = sorted(pro_to_epi_inps, key=lambda v: _depth(getattr(v.proxy, "history", None)))
        return original(ctx, prologue_trace, pro_to_comp_inps, pro_to_epi_inps, args, kwargs)

    return unpack_inputs


def patches() -> list[Patch]:
    why = "the epilogue replays stores into objects that existed before the call"
    return [
        attribute(jit_ext, "unpack_inputs", _unpack_inputs,
                  "the epilogue's inputs are unpacked outer objects first (a replayed object and a container in it)",
                  wrap=True),
        *epilogue_operator_rows(NAME, "replay", _meta, _replay, why, tags=[OpTags.DONT_DCE]),
        attribute(jit_ext, "process_recorded_modifications", _process, why, wrap=True),
    ]
