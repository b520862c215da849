"""C code that changes a container it is given: run as Python where the standard library has it,
refused with a clear error otherwise.

thunder's interpreter sees a list, dict or set change only through the methods it has lookasides
for (``append``, ``__setitem__``, ...). A C function that changes one in place (``heapq.heappush``,
``bisect.insort``) changed it unseen: the interpreter's record of the list's items no longer
matched the list (thunder's ``AssertionError: 2 1``), and a pre-existing list's change was
neither undone after tracing nor replayed on later calls.

- heapq and bisect (and ``Counter``'s tally, ``collections._count_elements``) have pure-Python
  versions in the standard library (their C accelerators replace them at import); those run under
  the interpreter instead (:data:`PYTHON_VERSIONS`), so each of their list and dict operations is
  seen, recorded and replayed like the user's own, and a number counted is hashed as a proxy
  (pinned to its value).
- Any other opaque call that receives a list, dict or set is checked after it returns
  (:func:`changed_containers`): a changed container raises :class:`CMutationError` naming the
  function and the line, inside the user's code (a ``try`` there sees it).
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

from thunder.core.interpreter import _interpret_call, is_opaque, unwrap

from metatrace.errors import MetatraceError
from metatrace.patching import Patch, item

import thunder.core.jit_ext as jit_ext


class CMutationError(MetatraceError):
    pass


def _pure_python(module: str, accelerator: str):
    """``module`` loaded afresh with its C accelerator blocked (its ``from _x import *`` fails)."""
    saved = sys.modules.get(accelerator)
    sys.modules[accelerator] = None  # type: ignore[assignment]  (import of it raises ImportError)
    try:
        spec = importlib.util.find_spec(module)
        loaded = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(loaded)
        return loaded
    finally:
        if saved is None:
            del sys.modules[accelerator]
        else:
            sys.modules[accelerator] = saved


def _python_versions() -> dict:
    """C function -> its pure-Python twin, for the accelerated functions of heapq and bisect, and
    collections' ``_count_elements`` (``Counter(l)``, ``c.update(l)``: it filled the Counter
    unseen, and thunder's record of it raised ``KeyError``)."""
    import bisect
    import collections
    import heapq

    out = {}
    # (collections: only the function; its twin classes are other classes than the user's)
    for module, accelerator, names in ((heapq, "_heapq", None), (bisect, "_bisect", None),
                                       (collections, "_collections", ("_count_elements",))):
        python = _pure_python(module.__name__, accelerator)
        for name in names or dir(module):
            fn, py_fn = getattr(module, name), getattr(python, name, None)
            if callable(fn) and is_opaque(fn) and py_fn is not None and not is_opaque(py_fn):
                out[fn] = py_fn
    return out


PYTHON_VERSIONS = _python_versions()


def _interpreted(py_fn):
    def lookaside(*args, **kwargs):
        return _interpret_call(py_fn, *args, **kwargs)

    lookaside.__name__ = f"metatrace_python_{py_fn.__name__}"
    return lookaside


_WATCHED = (list, dict, set)
_INITIALIZERS = frozenset({list.__init__, dict.__init__, set.__init__})


def fingerprints(fn: Any, args: tuple) -> list | None:
    """What to compare after an opaque call of ``fn``: each list, dict or set argument and its
    items' identities; None when ``fn`` is not C code or gets no container."""
    if not is_opaque(fn):
        return None
    if fn in _INITIALIZERS:
        args = args[1:]  # (``set(names)``: the new object is the one initialized)
    found = [c for a in args if type(c := unwrap(a)) in _WATCHED]
    return [(c, _fingerprint(c)) for c in found] or None


def _fingerprint(c) -> tuple:
    if type(c) is dict:
        return len(c), tuple(map(id, c)), tuple(map(id, c.values()))
    return (len(c), tuple(map(id, c))) if type(c) is list else (len(c), frozenset(map(id, c)))


def changed_containers(before: list) -> list:
    return [c for c, fp in before if _fingerprint(c) != fp]


def error(fn: Any, changed: list, where: str | None) -> CMutationError:
    name = getattr(fn, "__qualname__", None) or repr(fn)
    kinds = ", ".join(type(c).__name__ for c in changed)
    return CMutationError(
        f"{name}() (C code) changed the {kinds} it was given{f' at {where}' if where else ''}: thunder's "
        "interpreter does not see such a change, so it can be neither traced nor replayed on later calls. "
        "Change the container with its own methods in the jitted function, or outside it"
    )


def patches() -> list[Patch]:
    return [item(jit_ext._general_jit_lookaside_map, fn, _interpreted(py_fn),
                 f"{fn.__module__}.{fn.__name__} runs as its pure-Python version (its list changes are seen)",
                 label="thunder.core.jit_ext._general_jit_lookaside_map")
            for fn, py_fn in PYTHON_VERSIONS.items()]
