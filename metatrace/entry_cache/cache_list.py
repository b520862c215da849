"""Where stored entries meet thunder's cache: the entry list of a jitted callable loads and stores.

thunder keeps a jitted callable's entries in ``CompileStats.interpreter_cache``, a list it reads
on every call (``for entry in reversed(...)``: the first whose prologue passes is a hit) and
appends to after a compile. While metatrace is enabled, ``thunder.jit`` under symbolic values
gives the callable a :class:`StoredEntryList` instead:

1. the first read of the list (the first call) loads the entries stored under the callable's
   program key (``program_key``) and rebuilds them (``stored_entry.rebuild``): thunder then tries
   their prologues as it tries its own, so a passing prologue is a hit (``thunder.cache_misses``
   stays 0 when every call found a loaded entry);
2. an appended entry (a compile) is stored, unless something it needs has no stable key
   (``ProcessLocal``: it stays in the process, and the log says why).

Entries that cannot be rebuilt (stale: a file of the code changed, a name now leads elsewhere) are
skipped, so the call compiles as usual. Statistics per callable: :func:`entry_cache_stats`.
Logger ``metatrace.entry_cache`` (``METATRACE_LOG=cache``) says what was loaded, stored or kept.
"""

from __future__ import annotations

import functools
import logging
import time
import weakref
from dataclasses import dataclass, field

import thunder
from thunder.core.compile_data import compile_data_and_stats
from thunder.core.options import CACHE_OPTIONS

import metatrace.entry_cache.entry_files as entry_files
import metatrace.entry_cache.program_key as program_key
import metatrace.entry_cache.settings as settings
import metatrace.entry_cache.stored_entry as stored_entry
from metatrace.errors import ProcessLocal, StaleReference
from metatrace.state import registry

logger = logging.getLogger("metatrace.entry_cache")


@dataclass
class EntryCacheStats:
    loaded: int = 0  # entries rebuilt from disk
    stored: int = 0  # entries written by this process
    kept_local: list[str] = field(default_factory=list)  # why an entry stays in this process
    skipped: list[str] = field(default_factory=list)  # why a stored entry was not loaded
    load_seconds: float = 0.0


class StoredEntryList(list):
    """thunder's entry list of one jitted callable, loading stored entries on first read and
    storing appended ones."""

    def __init__(self, cd, cs):
        super().__init__()
        self._cd, self._cs = weakref.ref(cd), weakref.ref(cs)
        self._key: tuple[str, dict] | None = None
        self._loaded = False
        self.stats = EntryCacheStats()

    def _program_key(self) -> tuple[str, dict] | None:
        if self._key is None:
            cd = self._cd()
            if cd is None:
                return None
            try:
                self._key = program_key.program_key(cd.fn, cd)
            except ProcessLocal as e:
                self.stats.kept_local.append(str(e))
                logger.info("entries of %s stay in this process: %s", _name(cd.fn), e)
                self._key = ("", {})
        return self._key if self._key[0] else None

    def _load(self) -> None:
        self._loaded = True
        if not settings.enabled():
            return
        key = self._program_key()
        cd, cs = self._cd(), self._cs()
        if key is None or cd is None or cs is None:
            return
        start = time.perf_counter()
        rebuilt = []
        for path, stored in entry_files.read_all(key[0]):
            try:
                with compile_data_and_stats(cd, cs):  # (thunder's module map, as for a compile)
                    rebuilt.append(stored_entry.rebuild(stored, cd, cs))
            except (StaleReference, ProcessLocal) as e:
                self.stats.skipped.append(f"{path.name}: {e}")
                logger.info("stored entry %s of %s skipped: %s", path.name, _name(cd.fn), e)
                continue
            except Exception as e:  # noqa: BLE001 - a stored entry never fails a call
                entry_files.warn_once("rebuild", f"skipped {path}: {type(e).__name__}: {e}")
                continue
            entry_files.touch(path)
        list.extend(self, rebuilt)
        self.stats.loaded += len(rebuilt)
        self.stats.load_seconds += time.perf_counter() - start
        if rebuilt:
            logger.info("loaded %d stored entries of %s in %.3f s", len(rebuilt), _name(cd.fn),
                        self.stats.load_seconds)

    def _ensure(self) -> None:
        if not self._loaded:
            self._load()

    def __reversed__(self):
        self._ensure()
        return list.__reversed__(self)

    def __iter__(self):
        self._ensure()
        return list.__iter__(self)

    def __len__(self) -> int:
        self._ensure()
        return list.__len__(self)

    def __getitem__(self, i):
        self._ensure()
        return list.__getitem__(self, i)

    def append(self, entry) -> None:
        list.append(self, entry)
        self._store(entry)

    def _store(self, entry) -> None:
        cd, cs = self._cd(), self._cs()
        if not settings.enabled() or cd is None or cs is None:
            return
        key = self._program_key()
        if key is None:
            return
        record = registry.function_record(cs)
        codes, record.interpreted_codes = record.interpreted_codes, set()
        try:
            stored = stored_entry.capture(entry, cd, codes)
        except ProcessLocal as e:
            self.stats.kept_local.append(str(e))
            logger.info("an entry of %s stays in this process: %s", _name(cd.fn), e)
            return
        if entry_files.write(key[0], key[1], stored) is not None:
            self.stats.stored += 1
            logger.info("stored an entry of %s under %s", _name(cd.fn), key[0])


def _name(fn) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__qualname__


def entry_cache_stats(jitted) -> EntryCacheStats | None:
    """What the entry cache did for ``jitted`` (a ``thunder.jit`` result): entries loaded, stored,
    kept in the process and why; None when its entries are not cached (another cache option,
    the entry cache off)."""
    cs = thunder.compile_stats(jitted)
    entries = getattr(cs, "interpreter_cache", None)
    return entries.stats if isinstance(entries, StoredEntryList) else None


def jit_hook(original):
    @functools.wraps(original)
    def jit(fn, *args, **kwargs):
        jitted = original(fn, *args, **kwargs)
        cd, cs = thunder.compile_data(jitted), thunder.compile_stats(jitted)
        if (settings.enabled() and cd is not None and cs is not None
                and cd.cache_option is CACHE_OPTIONS.SYMBOLIC_VALUES and not cs.interpreter_cache):
            cs.interpreter_cache = StoredEntryList(cd, cs)
        return jitted

    return jit
