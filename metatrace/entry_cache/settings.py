"""Whether compiled entries are stored on disk, where, and how much.

On by default, as torch.compile's caches are. Off with ``metatrace.enable(entry_cache=False)`` or
``METATRACE_ENTRY_CACHE=0``; the directory is ``<base>/entries`` under the metas' cache base
(``$METATRACE_CACHE_DIR``, else ``~/.cache/metatrace``), or ``$METATRACE_ENTRY_CACHE_DIR``; the size
bound is ``$METATRACE_ENTRY_CACHE_MB`` (default 1024): past it the least recently used entries go.
"""

from __future__ import annotations

import os
from pathlib import Path

from metatrace.codegen.cache import base_directory
from metatrace.state.entry_cache_state import ENTRY_CACHE

_OFF = {"0", "false", "off", "no"}


def configure(enabled: bool | None, metas_digest: str) -> None:
    """Called by ``metatrace.enable``: its ``entry_cache`` option and the metas it installed."""
    ENTRY_CACHE.enabled, ENTRY_CACHE.metas_digest = enabled, metas_digest


def reset() -> None:
    """Called by ``metatrace.disable``: enable()'s option lasts until then."""
    ENTRY_CACHE.enabled = None


def metas_digest() -> str:
    """The generated metas' digest: entries compiled with other metas do not apply."""
    return ENTRY_CACHE.metas_digest


def enabled() -> bool:
    if ENTRY_CACHE.enabled is not None:
        return ENTRY_CACHE.enabled
    return os.environ.get("METATRACE_ENTRY_CACHE", "1").strip().lower() not in _OFF


def directory() -> Path:
    if env := os.environ.get("METATRACE_ENTRY_CACHE_DIR"):
        return Path(env)
    return base_directory() / "entries"


def size_bound_bytes() -> int:
    try:
        return int(float(os.environ.get("METATRACE_ENTRY_CACHE_MB", "1024")) * 2**20)
    except ValueError:
        return 1024 * 2**20
