"""Objects a trace's context holds that have no importable name, named by their role instead.

An executor's operator calls functions thunder made at run time (the lambdas of
``register_operator(name, fn=...)``); they are named by the executor, the operator and the key
under which the operator's call context holds them. A distributed trace calls the jitted
callable's process groups; they are named by their role (ddp's group, a transform's, the default
one). ``metatrace.entry_cache.stable_refs``' pickler writes these names; the resolvers here find
the objects again in the loading process, or raise :class:`StaleReference`.
"""

from __future__ import annotations

from metatrace.errors import StaleReference


def resolve_executor_context(executor: str, operator: str, key: str):
    from thunder.extend import get_executor

    try:
        return call_context(get_executor(executor).opmap[operator])[key]
    except (AttributeError, KeyError, TypeError):
        raise StaleReference(f"executor {executor!r} has no operator {operator!r} calling {key!r}") from None


def executor_contexts() -> dict[int, tuple[str, str, str]]:
    """id(function) -> (executor, operator, name) for the functions executors' operators call (their
    call contexts: thunder's implementations, lambdas included), which a trace's context holds."""
    from thunder.extend import get_all_executors

    found: dict[int, tuple[str, str, str]] = {}
    for ex in get_all_executors():
        for op_name, sym in getattr(ex, "opmap", {}).items():
            for key, value in call_context(sym).items():
                found.setdefault(id(value), (ex.name, op_name, key))
    return found


def call_context(sym) -> dict:
    """The names an operator's bound symbols give their trace's context: thunder's
    ``register_operator(name, fn=...)`` keeps ``{name: fn}`` in the closure of the symbol's
    ``_bind_postprocess``, not on the symbol."""
    found = dict(getattr(sym, "_call_ctx", None) or {})
    post = getattr(sym, "_bind_postprocess", None)
    for cell in getattr(post, "__closure__", None) or ():
        contents = cell.cell_contents
        if type(contents) is dict and all(type(k) is str for k in contents):
            found.update(contents)
    return found


def process_groups(cd) -> dict[tuple, object]:
    """The process groups a jitted callable's traces may call, by role: ddp's group on the compile
    data, each transform's ``process_group``, the default group."""
    groups: dict[tuple, object] = {}
    if cd is None:
        return groups
    if getattr(cd, "process_group_for_ddp", None) is not None:
        groups[("ddp",)] = cd.process_group_for_ddp
    for i, t in enumerate(getattr(cd, "transforms", None) or ()):
        if getattr(t, "process_group", None) is not None:
            groups[("transform", i)] = t.process_group
    try:
        import torch.distributed as tdist

        if tdist.is_available() and tdist.is_initialized():
            groups[("default",)] = tdist.distributed_c10d._get_default_group()
    except Exception:  # noqa: BLE001 - no distributed package: no default group
        pass
    return groups


def resolve_process_group(role: tuple):
    from metatrace.state.compile_context import ENTRY_LOADING

    group = process_groups(ENTRY_LOADING.get().cd).get(role)
    if group is None:
        raise StaleReference(f"no process group {role} in this process")
    return group
