"""ThunderFX (``thunder.dynamo.thunderfx(fn)``, ``torch.compile(fn, backend=thunder.dynamo.ThunderCompiler())``)
under symbolic values.

Two defaults change while metatrace is enabled:

- a ThunderCompiler built without a ``cache`` option jits each Dynamo subgraph with
  ``cache="symbolic values"`` (thunder's default is constant values: a subgraph Dynamo marked dynamic,
  whose sizes arrive as SymInts, would be recompiled by thunder for every new size);
- ``torch.compile`` given a ThunderCompiler backend (``thunderfx`` calls it so) and no ``dynamic``
  argument captures with ``dynamic=True``: Dynamo's graph is dynamic from the first call, where by
  default its first graph is static and the second length brings a dynamic one (and thunder compiles
  every subgraph twice). Dynamo's options, not the backend: a backend sees the graph after Dynamo
  chose its sizes. Dynamo keeps its own 0/1 specialization.

An explicit ``cache=`` or ``dynamic=`` (``False`` included) is respected. And thunder's splitter
asks whether thunder runs a node several times per node (``fx.split_module``'s regions), each
answer running the node's meta and vjp: it is answered once per node (``state/thunderfx_checks.py``).
"""

from __future__ import annotations

import functools
import inspect

import torch

from metatrace.patching import Patch, attribute
from metatrace.state.thunderfx_checks import SUPPORT


def _init(original):
    @functools.wraps(original)
    def __init__(self, **thunder_options):
        thunder_options.setdefault("cache", "symbolic values")
        original(self, **thunder_options)

    return __init__


_UNSET = object()
_COMPILE_OPTIONS = ["fullgraph", "dynamic", "backend", "mode", "options", "disable"]


def _compile(original):
    from thunder.dynamo import ThunderCompiler

    # torch.compile's own keyword-only signature (torch 2.9.1): thunderfx splits its options by
    # ``inspect.getfullargspec(inspect.unwrap(torch.compile)).kwonlyargs``, and rebinds
    # ``torch.compile`` to what ``inspect.unwrap`` finds, so this function has no ``__wrapped__``
    def compile(model=None, *, fullgraph=False, dynamic=_UNSET, backend="inductor", mode=None, options=None,
                disable=False):
        if dynamic is _UNSET:
            dynamic = True if isinstance(backend, ThunderCompiler) else None
        return original(model, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode, options=options,
                        disable=disable)

    compile.__doc__, compile.__name__, compile.__qualname__ = original.__doc__, original.__name__, original.__qualname__
    compile.__module__ = original.__module__
    return compile


def _answered_once(original):
    @functools.wraps(original)
    def is_node_supported_by_thunder(node, thunder_options):
        found = SUPPORT.get(node)
        if found is not None and found[0] == id(thunder_options):
            return found[1]
        answer = original(node, thunder_options)
        SUPPORT[node] = (id(thunder_options), answer)
        return answer

    return is_node_supported_by_thunder


def patches() -> list[Patch]:
    try:
        from thunder.dynamo import ThunderCompiler
    except ImportError:  # thunder without its dynamo integration: nothing to change
        return []
    from thunder.dynamo import splitter, utils

    once = "the splitter's question whether thunder runs a node is answered once per node"
    rows = [attribute(ThunderCompiler, "__init__", _init,
                      "ThunderFX without a cache option jits Dynamo's subgraphs under symbolic values", wrap=True),
            attribute(splitter, "is_node_supported_by_thunder", _answered_once, once, wrap=True),
            attribute(utils, "is_node_supported_by_thunder", _answered_once, once, wrap=True)]
    if inspect.getfullargspec(inspect.unwrap(torch.compile)).kwonlyargs != _COMPILE_OPTIONS:
        return rows  # (another torch.compile: its options are not the wrapper's; Dynamo's defaults stay)
    return rows + [attribute(torch, "compile", _compile,
                      "torch.compile with a ThunderCompiler and no dynamic= captures dynamic graphs from the first call",
                      wrap=True)]
