"""Stored entries on disk: one file per entry under its program's key, written atomically.

Layout: ``<directory>/<key>/program.json`` (what the key describes, for ``python -m metatrace
entries``) and ``<directory>/<key>/<digest>.entry``: a header line (magic, format, length and
digest of the payload) and the pickled :class:`~metatrace.entry_cache.stored_entry.StoredEntry`.
The digest names the file, so two processes storing the same entry write one file (each writes a
temporary file and renames it: the last rename wins, both are whole).

Nothing here fails a call: a file that is truncated, corrupted or from another format is skipped
with one warning and removed; a directory that cannot be written (read-only, disk full) gives one
warning per process and the entry stays in memory. Past the size bound the least recently used
entries are removed (loading an entry touches its file).
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import re
import tempfile
import warnings
from pathlib import Path

import metatrace.entry_cache.settings as settings
from metatrace.errors import MetatraceError
from metatrace.state.entry_cache_state import ENTRY_CACHE

MAGIC = b"metatrace-entry"
FORMAT = 1
SUFFIX = ".entry"


class EntryCacheWarning(MetatraceError, UserWarning):
    """A stored entry could not be read or written; the call compiled (or ran) as usual."""


def warn_once(kind: str, text: str) -> None:
    if kind in ENTRY_CACHE.warned:
        return
    ENTRY_CACHE.warned.add(kind)
    warnings.warn(f"metatrace entry cache: {text}", EntryCacheWarning, stacklevel=3)


# thunder's first comment line of a trace says how long its pass took
_TIMING = re.compile(r" \(took \d+ milliseconds\)")


def encode(stored) -> tuple[str, bytes]:
    """(file name, bytes) of a stored entry: the name is the digest of what it runs (not when it
    was made, nor how long thunder's passes took: one entry stored by two processes, two ranks, is
    one file)."""
    payload = pickle.dumps(stored, protocol=pickle.HIGHEST_PROTOCOL)
    h = hashlib.sha256()  # (field by field: a pickle's bytes depend on which equal strings are one object)
    for role, f in sorted(stored.functions.items()):
        h.update(repr((role, None if f is None else (f.name, _TIMING.sub("", f.text), f.function_obj))).encode())
        h.update(b"" if f is None else f.ctx)
    h.update(repr((stored.ids, sorted(stored.files.items()), stored.non_differentiable, stored.grad_mode_left,
                   stored.return_none_instead_of_grads)).encode())
    h.update(stored.tables)
    name = h.hexdigest()[:32]
    header = json.dumps({"format": FORMAT, "length": len(payload), "sha256": hashlib.sha256(payload).hexdigest()})
    return name + SUFFIX, MAGIC + b" " + header.encode() + b"\n" + payload


def decode(data: bytes):
    """The stored entry in ``data``; raises ValueError when it is not a whole file of this format."""
    head, sep, payload = data.partition(b"\n")
    if not sep or not head.startswith(MAGIC + b" "):
        raise ValueError("not a metatrace entry file")
    header = json.loads(head[len(MAGIC) + 1:])
    if header.get("format") != FORMAT:
        raise ValueError(f"an entry file of format {header.get('format')}, this metatrace reads {FORMAT}")
    if header.get("length") != len(payload) or header.get("sha256") != hashlib.sha256(payload).hexdigest():
        raise ValueError("a truncated or corrupted entry file")
    return pickle.loads(payload)


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=SUFFIX)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write(key: str, description: dict, stored) -> Path | None:
    """Stores ``stored`` under ``key``; None (one warning) when the directory cannot be written."""
    folder = settings.directory() / key
    name, data = encode(stored)
    try:
        program = folder / "program.json"
        if not program.exists():
            _atomic_write(program, json.dumps(description, indent=1, sort_keys=True).encode())
        path = folder / name
        if not path.exists():
            _atomic_write(path, data)
        evict(settings.size_bound_bytes())
        return path
    except OSError as e:
        warn_once("write", f"cannot write to {folder} ({e.strerror or e}); entries stay in this process "
                  "(set METATRACE_ENTRY_CACHE_DIR, or METATRACE_ENTRY_CACHE=0)")
        return None


def read_all(key: str) -> list[tuple[Path, object]]:
    """The entries stored under ``key``, oldest first; a file that cannot be read is skipped (one
    warning) and, when it is not a whole entry, removed."""
    folder = settings.directory() / key
    try:
        paths = sorted(folder.glob("*" + SUFFIX), key=_mtime)
    except OSError:
        return []
    found = []
    for path in paths:
        try:
            data = path.read_bytes()
        except OSError as e:
            warn_once("read", f"cannot read {path} ({e.strerror or e}); skipped")
            continue
        try:
            found.append((path, decode(data)))
        except Exception as e:  # noqa: BLE001 - any undecodable file is skipped, never trusted
            warn_once("corrupt", f"skipped {path}: {e}")
            _remove(path)
    return found


def touch(path: Path) -> None:
    try:
        os.utime(path)
    except OSError:
        pass


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def listing() -> list[dict]:
    """One row per stored program: key, what it is, entries, bytes."""
    root = settings.directory()
    rows = []
    for folder in sorted(p for p in root.glob("*") if p.is_dir()) if root.is_dir() else ():
        files = list(folder.glob("*" + SUFFIX))
        try:
            program = json.loads((folder / "program.json").read_text()).get("program", {})
        except (OSError, ValueError):
            program = {}
        rows.append({"key": folder.name, "program": program, "entries": len(files),
                     "bytes": sum(f.stat().st_size for f in files)})
    return rows


def clear() -> int:
    """Removes every stored entry; the number removed."""
    root = settings.directory()
    removed = 0
    for path in root.glob("*/*" + SUFFIX) if root.is_dir() else ():
        _remove(path)
        removed += 1
    for folder in root.glob("*") if root.is_dir() else ():
        _remove(folder / "program.json")
        try:
            folder.rmdir()
        except OSError:
            pass
    return removed


def evict(bound: int) -> None:
    """Removes the least recently used entries until the directory holds at most ``bound`` bytes."""
    root = settings.directory()
    files = [(p, p.stat()) for p in root.glob("*/*" + SUFFIX)]
    total = sum(st.st_size for _, st in files)
    if total <= bound:
        return
    for path, st in sorted(files, key=lambda f: f[1].st_mtime):
        _remove(path)
        total -= st.st_size
        if total <= bound:
            return
