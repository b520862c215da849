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

_originals: dict = {}


def install() -> None:
    try:
        from thunder.dynamo import ThunderCompiler
    except ImportError:  # thunder without its dynamo integration: nothing to change
        return
    original = ThunderCompiler.__init__

    @functools.wraps(original)
    def __init__(self, **thunder_options):
        thunder_options.setdefault("cache", "symbolic values")
        original(self, **thunder_options)

    _originals[ThunderCompiler] = original
    ThunderCompiler.__init__ = __init__


def uninstall() -> None:
    for cls, original in _originals.items():
        cls.__init__ = original
    _originals.clear()
