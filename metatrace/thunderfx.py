"""ThunderFX (``torch.compile(fn, backend=thunder.dynamo.ThunderCompiler())``) under symbolic values.

ThunderCompiler jits each Dynamo subgraph with thunder's default cache, constant values, so a
subgraph Dynamo already marked dynamic (its sizes arrive as SymInts) is recompiled by thunder for
every new size: attention over 7 sequence lengths compiles 7 times. While metatrace is enabled a
ThunderCompiler built without a ``cache`` option uses ``cache="symbolic values"``, which
metatrace makes sound (guards for every concretized number): 2 compiles, Dynamo's static first
graph and its dynamic one. An explicit ``cache=`` is respected.
"""

from __future__ import annotations

import functools

from metatrace.patching import Patch, attribute


def _init(original):
    @functools.wraps(original)
    def __init__(self, **thunder_options):
        thunder_options.setdefault("cache", "symbolic values")
        original(self, **thunder_options)

    return __init__


def patches() -> list[Patch]:
    try:
        from thunder.dynamo import ThunderCompiler
    except ImportError:  # thunder without its dynamo integration: nothing to change
        return []
    return [attribute(ThunderCompiler, "__init__", _init,
                      "ThunderFX without a cache option jits Dynamo's subgraphs under symbolic values", wrap=True)]
