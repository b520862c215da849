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

_OFF = {"0", "false", "off", "no"}
# enable()'s entry_cache option (None: the environment's) and the digest of the metas it installed
_switch: dict = {"enabled": None, "metas": "none"}


def configure(enabled: bool | None, metas_digest: str) -> None:
    """Called by ``metatrace.enable``."""
    _switch["enabled"], _switch["metas"] = enabled, metas_digest


def metas_digest() -> str:
    """The generated metas' digest: entries compiled with other metas do not apply."""
    return _switch["metas"]


def enabled() -> bool:
    if _switch["enabled"] is not None:
        return _switch["enabled"]
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
