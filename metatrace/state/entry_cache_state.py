"""What the entry cache (``metatrace.entry_cache``) keeps for the life of the process, in one object.

- ``enabled``: ``metatrace.enable(entry_cache=...)``'s choice (None: ``METATRACE_ENTRY_CACHE`` decides);
- ``metas_digest``: the digest of the generated metas ``enable()`` installed (part of every key);
- ``warned``: the kinds of disk trouble already warned about (one warning each per process);
- ``file_digests``: (path, size, mtime) -> digest of a source file's contents (a file read once).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class EntryCacheState:
    enabled: bool | None = None
    metas_digest: str = "none"
    warned: set[str] = field(default_factory=set)
    file_digests: dict[tuple, str] = field(default_factory=dict)


ENTRY_CACHE = EntryCacheState()
