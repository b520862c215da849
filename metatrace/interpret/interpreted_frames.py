"""Which code an interpreted frame runs: the helpers every interpret/ stage shares to tell the
user's code from thunder's, metatrace's and libraries' (a read or call decided in thunder's own
Python versions of builtins is not the user's)."""

from __future__ import annotations

import os


def calling_file() -> str | None:
    """The file of the interpreted frame that is running, None outside the interpreter."""
    from thunder.core.interpreter import get_interpreterruntimectx

    try:
        return get_interpreterruntimectx().frame_stack[-1].code.co_filename
    except (LookupError, IndexError, AttributeError):
        return None


def called_from_thunder() -> bool:
    """The interpreted frame calling is thunder's (its interpreter's own Python implementations
    of builtins ask ``type(x)`` of a proxy for its dunder methods) or metatrace's."""
    filename = calling_file()
    return filename is None or filename.startswith(OWN_CODE)


def package_dir(module) -> str:
    """The directory of a package's ``__init__``, ending in a separator (a prefix of its files)."""
    return os.path.dirname(module.__file__) + os.sep


OWN_CODE = (package_dir(__import__("thunder")), package_dir(__import__("metatrace")))
