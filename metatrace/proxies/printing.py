"""Readable size symbols in traces and error messages.

thunder prints a number proxy as ``[IntegerProxy name=i3, value=8, static=CONSTRAINT.CONSTRAINABLE]``,
so under symbolic values a 3-d tensor's trace comment runs to 200 characters and thunder's errors
(``Attempting to broadcast a dimension of length [IntegerProxy ...]``) bury the number. While
metatrace is enabled a number proxy prints as its name and value, ``i3=8`` (``f32[i0=8, i1=16, i3=8]``).
Generated code names proxies by ``name`` and never by ``repr``, so only comments and messages change.

Printing a trace must not decide anything about its sizes. thunder asks of every printed value
whether it is one of its printable literals (``None``, ``...``, ``torch.strided``) with
``x in _printable_literals``, which hashes ``x``: a bound symbol's outputs ``(i6, i7, i8, i9) =
prims.shape(t)`` are a tuple, its hash hashes each size, and ``hash()`` of a symbolic number pins
it (``metatrace.proxies.python_number_semantics``). Printing runs while the compile's guards are still
collected, so a printed shape pinned all its sizes: ``keys.numel()`` in a Hugging Face cache
recompiled every decode step. The literals are singletons, so identity answers the question.
"""

from __future__ import annotations

import thunder.core.baseutils as baseutils
from thunder.core.proxies import FloatProxy, IntegerProxy

from metatrace.patching import Patch, attribute

def _repr(self) -> str:
    if self.value is None:  # read from tensor data (an unbacked size): no value to show
        return self.name
    return f"{self.name}={self.value!r}"


def _is_printable_literal(x, /) -> bool:
    """``x in _printable_literals`` without hashing ``x`` (the literals are singletons)."""
    return any(x is literal for literal in baseutils._printable_literals)


def patches() -> list[Patch]:
    return [
        attribute(IntegerProxy, "__repr__", _repr, "sizes print as name=value"),
        attribute(FloatProxy, "__repr__", _repr, "as IntegerProxy"),
        attribute(baseutils, "is_base_printable_literal", _is_printable_literal,
                  "printing a trace hashes no size: a hash pins it"),
    ]
