"""A stored entry is never a stale hit: a change between two processes to anything a compile read
gives a miss (or an entry whose prologue still holds), and the second process's output equals eager.

The matrix (``stale_cells``) changes, one per cell: the forward's code, a helper's code, a class
attribute (in the class's body, or a base class's in a file the compile never runs), a config
value on the module, a global (edited, rebound at run time, another module's), a default (edited,
``__defaults__`` rebound), an enum member (its value, the member the module holds), a callee swapped
on a module instance or on a Python module, a rebound submodule or buffer (another class, another
setting, another dtype, None), a parameter's dtype, an environment variable the trace reads, the
executors list and thunder's version string; each for a jitted module and, where it applies, for a
jitted function that calls no Python function of the user's. Two real processes share the entry
directory: the first compiles every cell's program (and stores its entry), the test then edits the
cells' files, the second runs every cell again with the run-time changes. A control cell of each kind
changes nothing: its second run loads the stored entry and compiles nothing, so the matrix can fail.
Each changed cell's change alters its output (a stale hit would show), and each cell whose change
decides the trace compiles in the second process; for a number that decides nothing (``value_only``
cells) a hit is as right as a miss, under symbolic values, and only the output is claimed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import stale_cells
from stale_cells import BY_NAME, CELL_NAMES

ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(stale_cells.__file__).resolve()
CONTROLS = ("control", "fn_control")


def _process(cells: Path, entries: Path, phase: str) -> dict:
    report = cells.parent / f"{phase}.json"
    env = {**os.environ, "METATRACE_ENTRY_CACHE": "1", "METATRACE_ENTRY_CACHE_DIR": str(entries),
           "PYTHONDONTWRITEBYTECODE": "1"}  # (an edit within the second of the import: no stale .pyc)
    env.pop("METATRACE_LOG", None)
    proc = subprocess.run([sys.executable, str(DRIVER), str(cells), phase, str(report)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(report.read_text())


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, dict]:
    """{"first": reports, "second": reports}: one process before the changes, one after."""
    base = tmp_path_factory.mktemp("stale_entries")
    cells, entries = base / "cells", base / "entries"
    cells.mkdir()
    entries.mkdir()
    stale_cells.write_cells(cells)
    first = _process(cells, entries, "first")
    stale_cells.apply_edits(cells)
    second = _process(cells, entries, "second")
    return {"first": first, "second": second}


def _report(runs, phase: str, name: str) -> dict:
    report = runs[phase][name]
    assert "error" not in report, f"{phase} process, cell {name}: {report.get('traceback', report['error'])}"
    return report


@pytest.mark.parametrize("name", CELL_NAMES)
def test_first_process_equals_eager(runs, name):
    report = _report(runs, "first", name)
    assert report["equals_eager"], report["mismatch"]


@pytest.mark.parametrize("name", CELL_NAMES)
def test_first_process_stored_its_entry(runs, name):
    report = _report(runs, "first", name)
    assert report["stored"] >= 1, report["kept_local"]


@pytest.mark.parametrize("name", CONTROLS)
def test_control_loads_its_stored_entry(runs, name):
    assert _report(runs, "second", name)["loaded"] >= 1


@pytest.mark.parametrize("name", CONTROLS)
def test_control_compiles_nothing(runs, name):
    assert _report(runs, "second", name)["cache_misses"] == 0


@pytest.mark.parametrize("name", CELL_NAMES)
def test_second_process_equals_eager(runs, name):
    report = _report(runs, "second", name)
    assert report["equals_eager"], f"{BY_NAME[name].notes}: {report['mismatch']}"


@pytest.mark.parametrize("name", [n for n in CELL_NAMES if n not in CONTROLS and BY_NAME[n].changes_output])
def test_change_reaches_the_output(runs, name):
    """(else a stale hit would go unseen: the cell would test nothing)"""
    assert _report(runs, "second", name)["differs_from_first"]


@pytest.mark.parametrize("name", [n for n in CELL_NAMES if n not in CONTROLS and BY_NAME[n].expect_miss])
def test_changed_program_compiles(runs, name):
    report = _report(runs, "second", name)
    assert report["cache_misses"] >= 1, f"{BY_NAME[name].notes}: loaded {report['loaded']}, no compile"
