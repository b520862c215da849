"""Test support: compare every rewritten meta against thunder's original on the same inputs.

``with compare_metas() as log: ...`` runs, after each rewritten meta, the original meta on the
same arguments (recording suspended) and logs whether their output metadata agree: tensor shapes
(by value), dtypes, devices and requires_grad; number types and values; the structure of
sequences; or that both raised the same exception type.

The sentinel: ``reachable_proxies`` and ``assert_no_proxies_after`` find thunder proxies left in
a call's objects; ``with sentinel():`` runs that check after every call of every function or
module jitted inside it (the pytest plugin's ``--metatrace-sentinel`` and marker).
"""

from __future__ import annotations

import contextlib
import types
from collections import defaultdict
from dataclasses import dataclass, field
from numbers import Number

from thunder.core.langctxs import Languages, langctx
from thunder.core.proxies import NumberProxy, TensorProxy, pyval

import metatrace.metas.recording as recording
from metatrace.state.compile_context import RECORDING_SUSPENDED


def metadata(x):
    """A comparable summary of a meta's output."""
    if isinstance(x, TensorProxy):
        return ("tensor", tuple(pyval(s) if isinstance(s, NumberProxy) else s for s in x._shape),
                str(x.true_dtype), str(x.device), x.requires_grad)
    if isinstance(x, NumberProxy):
        return ("number", x.python_type.__name__, x.value)
    if isinstance(x, Number):
        return ("number", type(x).__name__, x)
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, tuple(metadata(y) for y in x))
    if isinstance(x, dict):
        return ("dict", tuple((k, metadata(v)) for k, v in x.items()))
    if x is None:
        return None
    return ("object", type(x).__name__)


@dataclass
class MetaLog:
    calls: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    mismatches: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def observe(self, name, original, args, kwargs, result, error) -> None:
        self.calls[name] += 1
        try:
            with RECORDING_SUSPENDED.set_to(True):
                expected = langctx(Languages.PRIMS)(original)(*args, **kwargs)
            expected_error = None
        except Exception as e:  # the original's failure is part of its behaviour
            expected, expected_error = None, e
        if error is not None or expected_error is not None:
            if type(error) is not type(expected_error):
                self.mismatches[name].append(f"rewritten raised {error!r}, original raised {expected_error!r}")
            return
        got, want = metadata(result), metadata(expected)
        if got != want:
            self.mismatches[name].append(f"rewritten gave {got}, original gave {want}")


@contextlib.contextmanager
def compare_metas():
    log = MetaLog()
    previous = recording.OBSERVER
    recording.OBSERVER = log.observe
    try:
        yield log
    finally:
        recording.OBSERVER = previous


# ---------------------------------------------------------------------------------------------
# The sentinel: no thunder proxy is left in the caller's objects after a jitted call
# ---------------------------------------------------------------------------------------------

# Not walked into: code and library modules (a proxy there is thunder's business), and tensors.
_OPAQUE_KINDS = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
                 str, bytes, int, float, complex, bool, type(None))


def reachable_proxies(roots: dict, *, limit: int = 100_000) -> list[str]:
    """The paths (``acc[0]``, ``cfg.last``, ``self._buffers['b']``) from ``roots`` (name ->
    object) to every thunder ``Proxy`` reachable through containers and object attributes:
    after a jitted call there must be none (metatrace replays stores with real values)."""
    import torch
    from thunder.core.proxies import Proxy

    found, seen = [], set()
    stack = [(name, obj) for name, obj in roots.items()]
    while stack and len(seen) < limit:
        path, obj = stack.pop()
        if isinstance(obj, Proxy):
            found.append(path)
            continue
        if id(obj) in seen or isinstance(obj, _OPAQUE_KINDS) or isinstance(obj, torch.Tensor):
            continue
        seen.add(id(obj))
        if isinstance(obj, dict):
            stack += [(f"{path}[{k!r}]", v) for k, v in list(obj.items())]
            stack += [(f"{path} key {k!r}", k) for k in list(obj) if isinstance(k, Proxy)]
        elif isinstance(obj, (list, tuple, set, frozenset)):
            stack += [(f"{path}[{i}]", v) for i, v in enumerate(list(obj))]
        else:
            attributes = getattr(obj, "__dict__", None)
            if isinstance(attributes, dict):
                stack += [(f"{path}.{k}", v) for k, v in list(attributes.items())]
            for cls in type(obj).__mro__:
                for slot in cls.__dict__.get("__slots__", ()):
                    if isinstance(slot, str) and slot not in ("__dict__", "__weakref__") and hasattr(obj, slot):
                        stack.append((f"{path}.{slot}", getattr(obj, slot)))
    return sorted(found)


def state_of_call(fn, args: tuple, kwargs: dict) -> dict:
    """What a call could have written to, named: its arguments, the module or function itself,
    and the function's globals and closure that its code names (modules and code excluded)."""
    roots = {f"args[{i}]": a for i, a in enumerate(args)} | {f"kwargs[{k!r}]": v for k, v in kwargs.items()}
    target = getattr(fn, "_model", fn)  # a ThunderModule's user module
    if not isinstance(target, types.FunctionType):
        roots["self"] = target
        target = getattr(type(target), "forward", None)
    code = getattr(target, "__code__", None)
    if code is not None:
        for name in code.co_names:
            if name in target.__globals__:
                roots[name] = target.__globals__[name]
        for name, cell in zip(code.co_freevars, target.__closure__ or ()):
            try:
                roots[name] = cell.cell_contents
            except ValueError:
                pass
    return roots


def assert_no_proxies_after(fn, args: tuple = (), kwargs: dict | None = None) -> None:
    """Fails naming every path from the call's state to a thunder proxy."""
    leaked = reachable_proxies(state_of_call(fn, args, kwargs or {}))
    if leaked:
        raise AssertionError(f"thunder proxies left in the caller's objects after a jitted call: {', '.join(leaked)}")


@contextlib.contextmanager
def sentinel():
    """While open, every ``thunder.jit`` call (made through the ``thunder`` module) returns a
    jitted function or module that runs :func:`assert_no_proxies_after` after each of its calls:
    a jitted function is wrapped (``functools.wraps`` keeps thunder's ``_lc_*`` attributes, so
    ``thunder.cache_misses`` and ``thunder.last_traces`` work on the wrapper), a jitted module
    gets a forward hook, removed when the sentinel closes. Used by the pytest plugin's
    ``--metatrace-sentinel`` option and ``metatrace_sentinel`` marker."""
    import functools

    import thunder
    import torch

    original, hooks = thunder.jit, []

    def watched(fn=None, /, *args, **kwargs):
        jitted = original(fn, *args, **kwargs)
        if isinstance(jitted, torch.nn.Module):
            def after(module, call_args, call_kwargs, output):
                assert_no_proxies_after(module, call_args, call_kwargs)

            hooks.append(jitted.register_forward_hook(after, with_kwargs=True))
            return jitted

        @functools.wraps(jitted)
        def checked(*call_args, **call_kwargs):
            result = jitted(*call_args, **call_kwargs)
            assert_no_proxies_after(fn, call_args, call_kwargs)
            return result

        return checked

    thunder.jit = watched
    try:
        yield
    finally:
        thunder.jit = original
        for handle in hooks:
            handle.remove()


def compiles_over(fn, calls, cache: str = "symbolic values") -> int:
    """Calls ``thunder.jit(fn, cache=cache)`` with each argument tuple in ``calls``, asserts each
    result equals eager ``fn``'s (``torch.testing.assert_close``), and returns the number of
    compiles (thunder's cache misses) the calls took."""
    import thunder
    import torch

    jf = thunder.jit(fn, cache=cache)
    for args in calls:
        torch.testing.assert_close(jf(*args), fn(*args))
    return thunder.cache_misses(jf)
