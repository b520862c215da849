"""What a function's code is, as a key another process can check: a digest of its code object,
and whether its qualified name is one an import can find at all.

A stored entry names a function by module and qualified name; the name alone could lead to other
code after an edit, so the digest of the code behind it is stored too and compared when the name
is resolved (``metatrace.entry_cache.stable_refs``), and the program key of a jitted callable
digests its code (``metatrace.entry_cache.program_key``). Kept apart because both read it and
neither is the other's concern.
"""

from __future__ import annotations

import hashlib
import types


def code_digest(code: types.CodeType) -> str:
    """A digest of what a code object does: bytecode, names, constants (nested code included)."""
    h = hashlib.sha256()
    _feed_code(h, code)
    return h.hexdigest()[:24]


def _feed_code(h, code: types.CodeType) -> None:
    h.update(code.co_code)
    h.update(repr((code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars, code.co_argcount,
                   code.co_kwonlyargcount, code.co_flags)).encode())
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _feed_code(h, const)
        else:
            h.update(repr(const).encode())


def made_at_run_time(qualname: str) -> bool:
    """A qualified name through a function's locals or a lambda (``f.<locals>.g``): no import finds it."""
    return any(part.startswith("<") for part in qualname.split("."))


def function_fingerprint(fn: types.FunctionType) -> tuple[str, str, str]:
    return (fn.__module__, fn.__qualname__, code_digest(fn.__code__))
