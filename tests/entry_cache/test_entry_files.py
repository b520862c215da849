"""The entry cache's disk (``metatrace.entry_cache.entry_files``) under faults, and its command.

A stored entry never fails a call: a damaged file (truncated, random bytes, another format, a
payload whose digest does not match) is skipped with one warning and removed, and the call
compiles as usual; a directory that cannot be written (read-only, no space left) gives one warning
and leaves no temporary file behind; two processes storing the same entry at once leave one whole
file that a third loads. Past the size bound the least recently used entries go; the switch
(``enable(entry_cache=False)``, ``METATRACE_ENTRY_CACHE=0``) stores nothing; ``python -m metatrace
entries list|clear`` shows and empties the directory.

The suite keeps the entry cache off (conftest); every test here turns it on with a directory of
its own. A jitted callable loads stored entries at its first call, so a test stores with one
``thunder.jit`` of a function and loads with a second, fresh one in the same process (the program
key is the same; the entry's prologue decides the hit). Subprocesses only where the point is
several processes.
"""

from __future__ import annotations

import copy
import errno
import json
import os
import random
import re
import subprocess
import sys
import time
import warnings
from contextlib import contextmanager
from pathlib import Path

import pytest
import thunder
import torch

import metatrace
from metatrace.state.entry_cache_state import ENTRY_CACHE
from metatrace.entry_cache import entry_cache_stats, entry_files, settings
from metatrace.entry_cache.entry_files import EntryCacheWarning

ROOT = Path(__file__).resolve().parents[2]


def two_ops(x):
    return (x * 2).sin()


def other_ops(x):
    return (x + 1).cos()


def third_ops(x):
    return (x - 3).exp()


def sample() -> torch.Tensor:
    return torch.arange(6, dtype=torch.float32).reshape(2, 3)


@pytest.fixture
def entry_dir(tmp_path, monkeypatch) -> Path:
    """The entry cache on, in a directory of this test's own, with a fresh record of warnings (the
    module warns once per process and kind)."""
    directory = tmp_path / "entries"
    monkeypatch.setenv("METATRACE_ENTRY_CACHE", "1")
    monkeypatch.setenv("METATRACE_ENTRY_CACHE_DIR", str(directory))
    monkeypatch.delenv("METATRACE_ENTRY_CACHE_MB", raising=False)
    monkeypatch.setattr(ENTRY_CACHE, "warned", set())
    return directory


@contextmanager
def entry_warnings():
    """The EntryCacheWarnings raised inside (every one: the suite's filter ignores UserWarnings)."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        found: list[warnings.WarningMessage] = []
        yield found
    found.extend(w for w in record if issubclass(w.category, EntryCacheWarning))


def jit(fn=two_ops):
    return thunder.jit(fn, cache="symbolic values")


def fresh_call(x=None):
    """A fresh jit of two_ops called once on ``x`` (the sample by default): the jitted callable, the
    call's output and the EntryCacheWarnings it raised."""
    jitted = jit()
    with entry_warnings() as found:
        out = jitted(sample() if x is None else x)
    return jitted, out, found


def entry_files_in(directory: Path) -> list[Path]:
    return sorted(directory.glob("*/*" + entry_files.SUFFIX))


def temporary_files_in(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob(".tmp-*")) if directory.exists() else []


def store(fn=two_ops) -> Path:
    """Compiles ``fn`` on the sample and returns the one file its entry was stored in."""
    before = set(entry_files_in(Path(os.environ["METATRACE_ENTRY_CACHE_DIR"])))
    jitted = jit(fn)
    jitted(sample())
    assert entry_cache_stats(jitted).stored == 1
    (path,) = set(entry_files_in(Path(os.environ["METATRACE_ENTRY_CACHE_DIR"]))) - before
    return path


def test_an_entry_stored_by_one_jit_is_loaded_by_a_fresh_one(enabled, entry_dir):
    store()
    jitted, out, found = fresh_call()
    assert thunder.cache_misses(jitted) == 0
    assert entry_cache_stats(jitted).loaded == 1
    assert torch.equal(out, two_ops(sample()))
    assert found == []


# --- damaged files --------------------------------------------------------------------------

def _truncated(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _random_bytes(data: bytes) -> bytes:
    return random.Random(0).randbytes(len(data))


def _another_format(data: bytes) -> bytes:
    head, _, payload = data.partition(b"\n")
    header = json.loads(head[len(entry_files.MAGIC) + 1:])
    header["format"] = entry_files.FORMAT + 1
    return entry_files.MAGIC + b" " + json.dumps(header).encode() + b"\n" + payload


def _digest_mismatch(data: bytes) -> bytes:
    head, _, payload = data.partition(b"\n")
    middle = len(payload) // 2
    flipped = payload[:middle] + bytes([payload[middle] ^ 0xFF]) + payload[middle + 1:]
    return head + b"\n" + flipped


DAMAGES = {"truncated": _truncated, "random_bytes": _random_bytes, "another_format": _another_format,
           "digest_mismatch": _digest_mismatch}


@pytest.mark.parametrize("damage", DAMAGES)
def test_damage_is_what_decode_refuses(enabled, entry_dir, damage):
    """(The damages below are the ones this test means: each one decode refuses.)"""
    data = store().read_bytes()
    with pytest.raises(ValueError):
        entry_files.decode(DAMAGES[damage](data))


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_file_is_skipped_warned_about_once_and_removed(enabled, entry_dir, damage):
    stored = store()
    damaged = stored.with_name("damaged" + entry_files.SUFFIX)  # (a name no store writes)
    damaged.write_bytes(DAMAGES[damage](stored.read_bytes()))
    stored.unlink()
    jitted, out, found = fresh_call()
    assert thunder.cache_misses(jitted) == 1
    assert entry_cache_stats(jitted).loaded == 0
    assert torch.equal(out, two_ops(sample()))
    assert len(found) == 1
    assert not damaged.exists()


@pytest.mark.parametrize("damage", DAMAGES)
def test_after_a_damaged_file_the_compile_is_stored_again(enabled, entry_dir, damage):
    stored = store()
    stored.write_bytes(DAMAGES[damage](stored.read_bytes()))
    jitted = jit()
    with entry_warnings():
        jitted(sample())
    assert entry_cache_stats(jitted).stored == 1
    for path in entry_files_in(entry_dir):
        entry_files.decode(path.read_bytes())  # (raises if anything damaged is left)


# --- a directory that cannot be written -----------------------------------------------------

def _read_only(directory: Path, monkeypatch) -> None:
    """``directory`` read-only: chmod where that binds, else (as root) every write refused."""
    directory.chmod(0o500)
    if os.access(directory, os.W_OK):  # (root: the mode does not bind)
        def refused(path, data):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))

        monkeypatch.setattr(entry_files, "_atomic_write", refused)


@pytest.mark.parametrize("where", ["cache directory", "program directory"])
def test_a_read_only_directory_warns_once_and_the_call_runs(enabled, entry_dir, monkeypatch, where):
    if where == "cache directory":  # (nothing stored yet: the program's directory cannot be made)
        entry_dir.mkdir(parents=True)
        target, x = entry_dir, sample()
    else:  # (the program's directory holds an entry for float32: a float64 call compiles and stores)
        target, x = store().parent, sample().to(torch.float64)
    try:
        _read_only(target, monkeypatch)
        jitted, out, found = fresh_call(x)
        assert thunder.cache_misses(jitted) == 1
        assert torch.equal(out, two_ops(x))
        assert entry_cache_stats(jitted).stored == 0
        assert len(found) == 1
        assert temporary_files_in(entry_dir) == []
    finally:
        target.chmod(0o700)


def _no_space(monkeypatch, how: str, directory: Path) -> None:
    """Writes under ``directory`` fail with ENOSPC: at the rename, or halfway through the data."""
    no_space = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    if how == "at the rename":
        replace = os.replace

        def failing_replace(src, dst, *args, **kwargs):
            if str(dst).startswith(str(directory)):
                raise no_space
            return replace(src, dst, *args, **kwargs)

        monkeypatch.setattr(entry_files.os, "replace", failing_replace)
        return
    fdopen = os.fdopen

    class HalfWritten:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, data):
            self.f.write(data[: len(data) // 2])
            self.f.flush()
            raise no_space

    monkeypatch.setattr(entry_files.os, "fdopen", lambda fd, *a, **k: HalfWritten(fdopen(fd, *a, **k)))


@pytest.mark.parametrize("how", ["at the rename", "halfway through the data"])
def test_no_space_left_warns_once_and_leaves_no_temporary_file(enabled, entry_dir, monkeypatch, how):
    _no_space(monkeypatch, how, entry_dir)
    jitted, out, found = fresh_call()
    assert torch.equal(out, two_ops(sample()))
    assert entry_cache_stats(jitted).stored == 0
    assert len(found) == 1
    assert temporary_files_in(entry_dir) == []
    assert entry_files_in(entry_dir) == []


def test_a_second_write_failure_in_the_process_does_not_warn_again(enabled, entry_dir, monkeypatch):
    _no_space(monkeypatch, "at the rename", entry_dir)
    with entry_warnings() as found:
        jit(two_ops)(sample())
        jit(other_ops)(sample())
    assert len(found) == 1


# --- several processes ----------------------------------------------------------------------

PROCESS = '''
import json, sys, time
from pathlib import Path
import thunder, torch
import metatrace
from metatrace.entry_cache import entry_cache_stats

def two_ops(x):
    return (x * 2).sin()

role, barrier = sys.argv[1], Path(sys.argv[2])
metatrace.enable()
x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
jitted = thunder.jit(two_ops, cache="symbolic values")
if role == "writer":  # (both writers call at once: each waits until the other is ready)
    barrier.joinpath(sys.argv[3]).touch()
    deadline = time.monotonic() + 60
    while len(list(barrier.iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.001)
out = jitted(x)
stats = entry_cache_stats(jitted)
print(json.dumps({"misses": thunder.cache_misses(jitted), "loaded": stats.loaded, "stored": stats.stored,
                  "equal": bool(torch.equal(out, two_ops(x)))}))
'''


def _environment(directory: Path) -> dict[str, str]:
    env = dict(os.environ, METATRACE_ENTRY_CACHE="1", METATRACE_ENTRY_CACHE_DIR=str(directory))
    env.pop("METATRACE_ENTRY_CACHE_MB", None)
    return env


def _finish(process: subprocess.Popen) -> dict:
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def two_writers(tmp_path_factory) -> tuple[Path, list[dict]]:
    """Two processes that compile and store ``two_ops`` into one directory at once (each waits
    for the other before its call), then a third that loads: the directory and what each said."""
    tmp = tmp_path_factory.mktemp("two_writers")
    directory, barrier = tmp / "entries", tmp / "barrier"
    barrier.mkdir()
    script = tmp / "program.py"
    script.write_text(PROCESS)
    start = lambda *args: subprocess.Popen(  # noqa: E731
        [sys.executable, str(script), *args], cwd=ROOT, env=_environment(directory),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    writers = [start("writer", str(barrier), str(i)) for i in range(2)]
    results = [_finish(w) for w in writers]
    return directory, results + [_finish(start("reader", str(barrier)))]


def test_two_writers_at_once_leave_whole_entries_a_third_process_loads(two_writers):
    directory, (first, second, third) = two_writers
    assert first["equal"] and second["equal"]
    files = entry_files_in(directory)
    assert files
    for path in files:
        entry_files.decode(path.read_bytes())  # (raises unless whole)
    assert temporary_files_in(directory) == []
    assert third["misses"] == 0
    assert third["loaded"] >= 1
    assert third["equal"]


def test_two_writers_at_once_leave_exactly_one_entry_file(two_writers):
    directory, _ = two_writers
    assert len(entry_files_in(directory)) == 1


def test_an_entry_is_named_by_what_it_runs_not_by_how_long_its_compile_took(enabled, entry_dir):
    stored = entry_files.decode(store().read_bytes())
    prologue = stored.functions["prologue"]
    slower = copy.deepcopy(stored)
    slower.functions["prologue"].text = re.sub(r"took (\d+) milliseconds",
                                               lambda m: f"took {int(m.group(1)) + 1} milliseconds", prologue.text)
    assert slower.functions["prologue"].text != prologue.text  # (the header is there to change)
    assert entry_files.encode(slower)[0] == entry_files.encode(stored)[0]


# --- the size bound -------------------------------------------------------------------------

def test_past_the_size_bound_the_least_recently_used_entries_go(enabled, entry_dir, monkeypatch):
    first, second = store(two_ops), store(other_ops)
    now = time.time()
    os.utime(first, (now - 20, now - 20))  # (stored first, then the second)
    os.utime(second, (now - 10, now - 10))
    loaded = jit(two_ops)
    loaded(sample())  # (loading the first entry makes it the most recently used)
    assert entry_cache_stats(loaded).loaded == 1
    # room for two entries of this size, not three
    bound = 2.5 * max(first.stat().st_size, second.stat().st_size)
    monkeypatch.setenv("METATRACE_ENTRY_CACHE_MB", str(bound / 2**20))
    third = store(third_ops)
    assert not second.exists()
    assert first.exists()
    assert third.exists()


def test_a_bound_below_one_entry_keeps_the_directory_below_it(enabled, entry_dir, monkeypatch):
    monkeypatch.setenv("METATRACE_ENTRY_CACHE_MB", str(100 / 2**20))
    for fn in (two_ops, other_ops, third_ops):
        jit(fn)(sample())
    assert sum(p.stat().st_size for p in entry_files_in(entry_dir)) <= 100


# --- the switch -----------------------------------------------------------------------------

def test_enable_with_entry_cache_false_stores_nothing(entry_dir):
    assert not metatrace.is_enabled()  # (a test without ``enabled`` starts disabled: conftest)
    with metatrace.enable(entry_cache=False):
        jitted = jit()
        out = jitted(sample())
        assert torch.equal(out, two_ops(sample()))
        assert entry_cache_stats(jitted) is None
    assert not entry_dir.exists()


def test_disable_ends_enables_entry_cache_option(entry_dir):
    with metatrace.enable(entry_cache=False):
        pass
    assert settings.enabled()  # (the environment's choice again: METATRACE_ENTRY_CACHE=1 here)


def test_the_environment_switch_off_stores_nothing(enabled, entry_dir, monkeypatch):
    monkeypatch.setenv("METATRACE_ENTRY_CACHE", "0")
    jitted = jit()
    out = jitted(sample())
    assert torch.equal(out, two_ops(sample()))
    assert entry_cache_stats(jitted) is None
    assert not entry_dir.exists()


# --- python -m metatrace entries ------------------------------------------------------------

def _entries(directory: Path, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "metatrace", "entries", *args], cwd=ROOT, capture_output=True,
                          text=True, env=_environment(directory), timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_entries_list_shows_a_stored_program_and_clear_empties_the_directory(enabled, entry_dir):
    key = store().parent.name
    listed = _entries(entry_dir, "list")
    assert key in listed
    assert f"{__name__}.two_ops" in listed
    assert str(entry_dir / key) in listed
    cleared = _entries(entry_dir, "clear")
    assert "removed 1 stored entry" in cleared
    assert entry_files_in(entry_dir) == []
    assert list(entry_dir.iterdir()) == []


# --- an entry whose epilogue replays stores into the module ---------------------------------

class Accumulating(torch.nn.Module):
    """``self.total = self.total + r``: the epilogue replays the store (a mutation replay plan that
    names the jitted module's ThunderModule: the loading process's own)."""

    def __init__(self):
        super().__init__()
        self.total = 0.0

    def forward(self, x, r):
        self.total = self.total + r
        return x * 2


def _accumulate(model, rs=(0.5, 0.25, 1.0)):
    jitted = thunder.jit(model, cache="symbolic values")
    for r in rs:
        jitted(sample(), r)
    return jitted


def test_an_entry_that_stores_into_the_module_is_stored(enabled, entry_dir):
    jitted = _accumulate(Accumulating())
    assert entry_cache_stats(jitted).kept_local == []


def test_a_module_that_stores_into_itself_loads_its_entries(enabled, entry_dir):
    _accumulate(Accumulating())
    assert thunder.cache_misses(_accumulate(Accumulating())) == 0


def test_a_loaded_entry_replays_the_stores_into_the_loading_module(enabled, entry_dir):
    _accumulate(Accumulating())
    model = Accumulating()
    _accumulate(model)
    assert model.total == 0.5 + 0.25 + 1.0
