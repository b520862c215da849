"""A string with a backslash or a quote, inside a list, tuple or dict a trace returns, prints as
the string it is.

thunder prints a collection by printing its elements to code text, putting the texts in the
collection and taking ``str`` of that, then stripping the quotes around each text: an element's
text is quoted a second time. A name survives that (thunder's reason for it); a string constant
whose ``repr`` escapes something does not: ``[x * 2, chr(3)]`` returned ``'\\\\x03'`` where eager
returned ``'\\x03'`` (stock thunder does the same; C calls on symbolic numbers made such strings
common: ``chr(n)``, ``"%r" % n``). While metatrace is enabled, such a collection (lists, tuples
and dicts of them) is printed element by element.
"""

from __future__ import annotations

import functools

import thunder.core.codeutils as codeutils

from metatrace.patching import Patch, attribute

_PLAIN = (list, tuple, dict)


def _needs_quoting_once(x) -> bool:
    if type(x) is str:
        return repr(x)[1:-1] != x or "'" in x or '"' in x
    if type(x) in (list, tuple):
        return any(_needs_quoting_once(e) for e in x)
    if type(x) is dict:
        return any(_needs_quoting_once(k) or _needs_quoting_once(v) for k, v in x.items())
    return False


def _only_plain(x) -> bool:
    """Lists, tuples and dicts all the way down (no named tuple or dataclass, printed by thunder)."""
    if type(x) in (list, tuple):
        return all(_only_plain(e) for e in x)
    if type(x) is dict:
        return all(_only_plain(v) for v in x.values())
    return not isinstance(x, _PLAIN)


def _printed(x, element) -> str:
    if type(x) is list:
        return "[" + ", ".join(_printed(e, element) for e in x) + "]"
    if type(x) is tuple:
        return "(" + "".join(_printed(e, element) + ", " for e in x).rstrip(" ")[: -1 if len(x) > 1 else None] + ")"
    if type(x) is dict:
        return "{" + ", ".join(f"{element(k)}: {_printed(v, element)}" for k, v in x.items()) + "}"
    return element(x)


def _printing(original):
    @functools.wraps(original)
    def prettyprint(x, **kwargs):
        if type(x) in _PLAIN and _needs_quoting_once(x) and _only_plain(x):
            kw = {k: v for k, v in kwargs.items() if k != "_quote_markers"}
            return _printed(x, lambda e: original(e, **{**kw, "with_type": False}))
        return original(x, **kwargs)

    return prettyprint


def patches() -> list[Patch]:
    return [attribute(codeutils, "prettyprint", _printing,
                      "a string constant with a backslash or a quote in a printed collection is quoted once",
                      wrap=True)]
