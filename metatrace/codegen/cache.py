"""The cache directory of generated metas: location, validity, atomic writes.

Layout: ``<base>/thunder-<version>-<hash16>/{metas.py,manifest.json}`` where the hash covers
thunder's sources and metatrace's rewriter. ``<base>`` is ``$METATRACE_CACHE_DIR``, else
``$XDG_CACHE_HOME/metatrace``, else ``~/.cache/metatrace``. A file that does not match its
manifest (truncated, edited, half-written by a crash) is detected and regenerated.
"""

from __future__ import annotations

from metatrace.errors import MetatraceError

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from metatrace.codegen.version import thunder_version

METAS_FILE = "metas.py"
MANIFEST_FILE = "manifest.json"


class CorruptCacheError(MetatraceError):
    pass


class CacheDirectoryError(MetatraceError, OSError):
    """The cache directory cannot be created or written: the message names it and the variable
    that moves it."""


def base_directory() -> Path:
    if env := os.environ.get("METATRACE_CACHE_DIR"):
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "metatrace"


def directory(out: Path | None = None, key: str | None = None) -> Path:
    """Where the generated files for the installed thunder live (``out`` overrides the base)."""
    from metatrace.codegen.generate import source_hash

    key = source_hash() if key is None else key
    return (out if out is not None else base_directory()) / f"thunder-{thunder_version()}-{key[:16]}"


def atomic_write(path: Path, text: str) -> None:
    """Write to a temporary file in the same directory, then rename: readers never see a partial file."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as e:
        raise CacheDirectoryError(
            f"cannot write metatrace's cache directory {path.parent}: {e.strerror or e} "
            "(set METATRACE_CACHE_DIR to a writable directory)"
        ) from e
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read(dir_: Path, key: str) -> tuple[str, dict]:
    """(metas text, manifest) from ``dir_``; raises CorruptCacheError when they don't match."""
    manifest_path, metas_path = dir_ / MANIFEST_FILE, dir_ / METAS_FILE
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        text = metas_path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CorruptCacheError(f"{dir_}: unreadable cache file: {e}") from e
    if not isinstance(manifest, dict) or manifest.get("source_hash") != key:
        raise CorruptCacheError(f"{manifest_path}: manifest does not belong to this thunder and rewriter")
    if hashlib.sha256(text.encode()).hexdigest() != manifest.get("generated_sha256"):
        raise CorruptCacheError(f"{metas_path}: contents do not match the manifest's hash")
    return text, manifest


@dataclass(frozen=True)
class CacheState:
    directory: Path
    status: str  # "current", "missing" or "corrupt: <why>"


def state(out: Path | None = None) -> CacheState:
    from metatrace.codegen.generate import source_hash

    key = source_hash()
    dir_ = directory(out, key)
    try:
        read(dir_, key)
    except OSError:  # missing, or unreadable as a directory
        return CacheState(dir_, "missing")
    except CorruptCacheError as e:
        return CacheState(dir_, f"corrupt: {e}")
    return CacheState(dir_, "current")


@dataclass(frozen=True)
class CacheResult:
    directory: Path
    text: str
    manifest: dict
    action: str  # "reused", "generated" or "regenerated (<why>)"


def ensure(out: Path | None = None, *, force: bool = False) -> CacheResult:
    """The generated files for the installed thunder, generating them when missing, stale or corrupt."""
    from metatrace.codegen.generate import generate, source_hash

    key = source_hash()
    dir_ = directory(out, key)
    action = "generated"
    if not force:
        try:
            text, manifest = read(dir_, key)
            return CacheResult(dir_, text, manifest, "reused")
        except OSError:  # missing or unreadable (a path through a file): writing names the problem
            pass
        except CorruptCacheError as e:
            action = f"regenerated ({e})"
    text, manifest = generate()
    # metas.py first: a manifest on disk always describes a complete metas.py.
    atomic_write(dir_ / METAS_FILE, text)
    atomic_write(dir_ / MANIFEST_FILE, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return CacheResult(dir_, text, manifest, action)
