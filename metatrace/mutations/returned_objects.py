"""Objects the function creates and returns, rebuilt by the epilogue on every call.

thunder's epilogue builds the function's return value (``jit_ext.build_value_from_wrapped``):
the trace's tensors and numbers, the inputs, tuples, lists, dicts and dataclasses. Any other
object raised ``NotImplementedError: unhandled value of type DynamicCache``: a Hugging Face model
called with ``use_cache=True`` and no cache creates its ``DynamicCache`` inside the trace and
returns it in its ``ModelOutput``, so a manual decode loop could not start.

While metatrace is enabled such an object, where it is an instance of a plain Python class
(:func:`metatrace.mutations.templates.rebuildable`), is rebuilt by one bound symbol in the
epilogue, ``metatrace_new_object('o3', t0, t1, ...)``: its template (the rules of
:mod:`metatrace.mutations.templates`, which the replay of stores uses too) makes a new object of
the same class on every call, hits included, with that call's tensors and numbers, and the
objects that existed before the call as the prologue unpacks them. An object that cannot be
rebuilt raises a :class:`metatrace.MetatraceError` naming its type instead of thunder's
``NotImplementedError``.
"""

from __future__ import annotations

import functools

import thunder.core.jit_ext as jit_ext
from thunder.core.proxies import AnyProxy, Proxy
from thunder.core.trace import get_tracectx, tracectx

from metatrace.errors import MetatraceError
from metatrace.state import registry
from metatrace.state.compile_session import session
from metatrace.mutations.log import MutationLog
from metatrace.mutations.templates import Templates, epilogue_operator_rows, rebuildable
from metatrace.patching import Patch, attribute

NAME = "metatrace_new_object"
WHERE = "the function's return value"


def _new_object(plan_id: str, *leaves):
    return registry.REPLAYS[plan_id].build(leaves, {})


def _meta(plan_id: str, *leaves):
    return AnyProxy(None)


def _templates(ctx, epilogue_trace) -> Templates:
    log = session(ctx).mutations
    proxies: dict[int, Proxy] = {}
    computation_trace = ctx.computation_trace

    def object_proxy(pr) -> Proxy:
        """A pre-existing object the new one holds, as the epilogue receives it (as the replay's targets)."""
        proxy = getattr(pr, "proxy", None) or proxies.get(id(pr))
        if proxy is None:
            with tracectx(computation_trace):
                proxy = proxies[id(pr)] = Proxy(history=pr)
            epilogue_trace.add_name(proxy.name)
        return proxy

    return Templates(log if log is not None else MutationLog(), object_proxy)


def _build_value(original):
    @functools.wraps(original)
    def build_value_from_wrapped(wrapped_v):
        try:
            built = original(wrapped_v)
        except NotImplementedError:
            value = wrapped_v.value
            if not rebuildable(value):
                raise MetatraceError(
                    f"the function returns a {type(value).__name__} object it created ({value!r:.80}): thunder "
                    "returns tensors, numbers, containers and dataclasses, and metatrace rebuilds instances of "
                    "plain Python classes, which this is not. Return its tensors instead"
                ) from None
        else:
            _check_untracked_items(wrapped_v)
            return built
        ctx = jit_ext.get_jit_ctx()
        epilogue_trace = get_tracectx()
        templates = _templates(ctx, epilogue_trace)
        template = templates.of(wrapped_v, WHERE)
        plan_id = registry.new_id("o")
        registry.REPLAYS[plan_id] = template
        return registry._symbols["new_object"](plan_id, *templates.leaves)

    return build_value_from_wrapped


def _holds_proxy(value) -> bool:
    return any(isinstance(v, Proxy) for v in vars(value).values())


def _check_untracked_items(wrapped_v) -> None:
    """thunder puts an item of a returned list, tuple or dict that the interpreter did not track
    into the return value as the object itself: one the function created holds the trace's
    proxies, so every call would return that object with no values. Raised instead."""
    value, wrappers = wrapped_v.value, getattr(wrapped_v, "item_wrappers", None)
    if isinstance(value, Proxy) or not isinstance(value, (list, tuple, dict)):
        return
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, v in items:
        tracked = wrappers.get(key) if isinstance(wrappers, dict) else (
            wrappers[key] if isinstance(wrappers, list) and key < len(wrappers) else None)
        if tracked is None and rebuildable(v) and _holds_proxy(v):
            raise MetatraceError(
                f"the function returns a {type(v).__name__} object it created inside a {type(value).__name__} "
                "whose items thunder's interpreter did not track, so metatrace cannot tell it from an object that "
                "existed before the call. Return it directly or as a field of a dataclass"
            )


def patches() -> list[Patch]:
    why = "the epilogue rebuilds objects the function created and returns (a DynamicCache)"
    return [
        *epilogue_operator_rows(NAME, "new_object", _meta, _new_object, why),
        attribute(jit_ext, "build_value_from_wrapped", _build_value, why, wrap=True),
    ]
