"""The source files of the code a compile ran, by content digest: a stored entry is valid only
while they are unchanged.

Inside a process a function's code cannot change under a cache entry; across processes it can
(an edited model file, a helper, a library installed from a checkout). Each stored entry lists the
files of every Python function the interpreter ran while compiling it (noted by
``interpret.call_hooks``) with the digest of their contents, and a process loading the entry
checks them first. Code with no file (``<string>``: made by ``exec``) other than what
``dataclasses`` and ``collections.namedtuple`` generate from a class's definition (which is in a
file) makes the entry process-local. Digests are remembered by (path, size, mtime): a file read
once per process.
"""

from __future__ import annotations

import hashlib
import os
import types

from metatrace.errors import ProcessLocal
from metatrace.state.entry_cache_state import ENTRY_CACHE

_GENERATED = ("__create_fn__", "__init__", "__repr__", "__eq__", "__hash__", "__new__", "__setattr__", "__delattr__",
              "__lt__", "__le__", "__gt__", "__ge__", "__getstate__", "__setstate__", "_make", "_replace", "_asdict")


def file_digest(path: str) -> str | None:
    """The digest of the file's contents; None when it cannot be read (gone, a directory)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    key = (path, st.st_size, st.st_mtime_ns)
    found = ENTRY_CACHE.file_digests.get(key)
    if found is None:
        try:
            with open(path, "rb") as f:
                found = hashlib.sha256(f.read()).hexdigest()[:24]
        except OSError:
            return None
        ENTRY_CACHE.file_digests[key] = found
    return found


def files_of(codes: set[types.CodeType]) -> dict[str, str]:
    """{path: digest} for the files of ``codes``; raises ProcessLocal for code made by ``exec``."""
    files: dict[str, str] = {}
    for code in codes:
        path = code.co_filename
        if path in files:
            continue
        if path.startswith("<"):
            if path.startswith("<frozen ") or code.co_name in _GENERATED:
                continue  # (the standard library's frozen modules: Python's version is in the key)
            raise ProcessLocal(f"the compile ran {code.co_qualname} from {path}, code with no source file")
        digest = file_digest(path)
        if digest is None:
            raise ProcessLocal(f"the compile ran code from {path}, which cannot be read")
        files[path] = digest
    return files


def changed_files(files: dict[str, str]) -> list[str]:
    """The files among ``files`` whose contents differ now (or that are gone)."""
    return [path for path, digest in files.items() if file_digest(path) != digest]
