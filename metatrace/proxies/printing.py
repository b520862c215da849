"""Readable size symbols in traces and error messages.

thunder prints a number proxy as ``[IntegerProxy name=i3, value=8, static=CONSTRAINT.CONSTRAINABLE]``,
so under symbolic values a 3-d tensor's trace comment runs to 200 characters and thunder's errors
(``Attempting to broadcast a dimension of length [IntegerProxy ...]``) bury the number. While
metatrace is enabled a number proxy prints as its name and value, ``i3=8`` (``f32[i0=8, i1=16, i3=8]``).
Generated code names proxies by ``name`` and never by ``repr``, so only comments and messages change.
"""

from __future__ import annotations

from thunder.core.proxies import FloatProxy, IntegerProxy

from metatrace.patching import Patch, attribute

def _repr(self) -> str:
    if self.value is None:  # read from tensor data (an unbacked size): no value to show
        return self.name
    return f"{self.name}={self.value!r}"


def patches() -> list[Patch]:
    return [
        attribute(IntegerProxy, "__repr__", _repr, "sizes print as name=value"),
        attribute(FloatProxy, "__repr__", _repr, "as IntegerProxy"),
    ]
