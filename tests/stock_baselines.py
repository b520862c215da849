"""Stock thunder's results over the opinfo samples, kept in the cache directory between runs.

A baseline depends on stock thunder only (metatrace disabled; the samples are seeded): on
thunder's and torch's versions, the harnesses' sources and the samples per op. It is kept under
``<cache directory>/test-baselines/`` keyed by a hash of all of these, computed again only when
one changes, and written atomically (two workers computing it at once write the same content).
A file that cannot be read or does not match the cases is computed again, never trusted.
Computing one holds a lock next to it: a second process that needs the same baseline meanwhile
waits for it and reads it instead of computing it a second time.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import torch

import thunder

import grad_harness
import opinfo_harness
from metatrace.codegen import cache


def baseline_file(name: str, *key: object) -> Path:
    h = hashlib.sha256(f"{thunder.__version__}\0{torch.__version__}\0{name}\0{key!r}".encode())
    for module in (grad_harness, opinfo_harness):
        h.update(Path(module.__file__).read_bytes())
    return cache.base_directory() / "test-baselines" / f"{name}-{h.hexdigest()[:16]}.json"


def cached(name: str, *key: object, valid: Callable[[object], bool]):
    """The stored baseline, or None when there is none or it does not pass ``valid``."""
    try:
        value = json.loads(baseline_file(name, *key).read_text())
    except (OSError, ValueError):
        return None
    return value if valid(value) else None


def store(name: str, *key: object, value) -> None:
    try:
        cache.atomic_write(baseline_file(name, *key), json.dumps(value, sort_keys=True))
    except OSError:
        pass  # an unwritable cache directory only costs the next run the computation


@contextlib.contextmanager
def _computing(name: str, *key: object):
    """An exclusive lock on the baseline's lock file while it is computed (none where the cache
    directory cannot be written: each process then computes its own, as before)."""
    path = baseline_file(name, *key).with_suffix(".lock")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path, "a")
    except OSError:
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # (released when the file closes, or the process ends)
        yield


def computed_once(name: str, *key: object, compute: Callable[[], object], valid: Callable[[object], bool]):
    """The cached baseline, else ``compute()``, stored for the next run; one process computes it
    while the others that need it wait (:func:`_computing`). (JSON: tuples come back as lists.)"""
    value = cached(name, *key, valid=valid)
    if value is None:
        with _computing(name, *key):
            value = cached(name, *key, valid=valid)  # (stored by another process while this one waited)
            if value is None:
                value = compute()
                store(name, *key, value=value)
                value = json.loads(json.dumps(value))  # the same shape whether computed or read
    return value


def sweep_cases(cache: str) -> list[tuple]:
    """The opinfo cases stock thunder's survey runs under ``cache``: each op's first default case
    (metatrace's sweeps run stock thunder themselves, on the samples where they need it)."""
    cases, _ = opinfo_harness.default_cases()
    seen: set = set()
    return [(op, sample) for op, sample in cases if not (op.name in seen or seen.add(op.name))]


def opinfo_sweep(cache: str) -> list[list]:
    """Per opinfo case of :func:`sweep_cases`, stock thunder (metatrace not enabled) under
    ``cache``: [status, first error line, whether a first computation trace is there]."""
    import metatrace

    cases = sweep_cases(cache)

    def compute() -> list[tuple]:
        assert not metatrace.is_enabled()
        result = []
        for op, sample in cases:
            r = opinfo_harness.run_case(op, sample, cache=cache)
            traced = r.status in ("ok", "mismatch") and thunder.last_traces(r.jfn)[0] is not None
            result.append((r.status, (r.error or "").splitlines()[0][:160] if r.error else "", traced))
        return result

    def valid(value) -> bool:
        return isinstance(value, list) and len(value) == len(cases) and all(len(v) == 3 for v in value)

    key = (cache, opinfo_harness.default_max_samples(), [op.name for op, _ in cases])
    return computed_once("opinfo-sweep", *key, compute=compute, valid=valid)
