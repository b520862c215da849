"""The two-process mode of ``tools/fuzz.py`` (``--two-process``): every program runs again in a
fresh process that loads the entries the first one stored (``metatrace.entry_cache``).

The parent (``run_batch``) writes a batch of generated programs as real modules, one ``.py`` file
per program in a package of a temporary directory (an entry of code made by ``exec`` from a
string stays in its process; a module imported under the same name in both processes does not),
and pickles each program with its call sequence. Then two child processes run the batch, one
after the other, with ``METATRACE_ENTRY_CACHE=1`` and the same fresh ``METATRACE_ENTRY_CACHE_DIR``:
the first compiles and stores, the second loads. Each child imports every program's module, jits
its module under ``cache="symbolic values"``, runs the sequence beside an eager copy of the program
(``exec``-ed, as in the one-process mode) with the same rules as ``check_program`` and
``check_family_program``, and writes per program one JSON line: the differences from eager, the
calls, the compiles, and what the entry cache did (loaded, stored, kept in the process and why,
skipped and why). A child that dies or hangs on a program is run again after it, the program
counted as differing.

Run a child by hand (a kept batch directory is printed with every differing program):

    METATRACE_ENTRY_CACHE=1 METATRACE_ENTRY_CACHE_DIR=<dir>/entries \\
        .venv/bin/python tools/fuzz_two_process.py <dir> 1    # then 2
"""

from __future__ import annotations

import collections
import faulthandler
import importlib
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path

TOOLS = Path(__file__).resolve().parent
TESTS = TOOLS.parent / "tests"
PACKAGE = "fuzzbatch"  # the package of a batch's modules (one per batch directory)
PROGRAM_TIMEOUT_S = 300  # a program running longer in a child is a hang (the child exits, the program differs)
SNAPSHOT_VARIABLE = "FUZZ_TWO_PROCESS_METATRACE"  # a directory holding the copy of metatrace the children import


def snapshot_metatrace(directory: Path) -> str:
    """Copies metatrace's package into ``directory`` and has the children import that copy: a file
    of metatrace edited during the run changes the entries' key (``program_key.metatrace_digest``),
    and a second process under another key would load nothing. Returns the copy's digest."""
    import hashlib
    from importlib.util import find_spec

    source = Path(find_spec("metatrace").origin).resolve().parent
    copy = directory / "metatrace"
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns("__pycache__"))
    os.environ[SNAPSHOT_VARIABLE] = str(directory)
    h = hashlib.sha256()  # (program_key.metatrace_digest of the copy)
    for path in sorted(copy.rglob("*.py")):
        h.update(str(path.relative_to(copy)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:24]

# ---------------------------------------------------------------------------------------------
# The modules: a program's source beside the globals the one-process mode's namespace gives it
# ---------------------------------------------------------------------------------------------

_PROGRAM_HEADER = '''"""Fuzzed program {name} (tools/fuzz.py --two-process)."""

import math

import torch

from {package} import {name}_helpers as H

G = [1, 2]
DT = torch.float32
CL = [1]
ACT = torch.relu

'''
# (fuzz_programs._fresh_namespace's H: a module of the user's with double, triple and scale)
_HELPERS = '''"""The helper module H of fuzzed program {name}."""


def double(v):
    return v * 2


def triple(v):
    return v * 3


scale = double
'''
_FAMILY_HEADER = '''"""Fuzzed program {name} (tools/fuzz.py --two-process)."""

import dataclasses
import enum
import fractions
import math
import types

import torch

from fuzz_families import Cfg, Level, Mode

G = [1]
GD = {{}}

'''


def module_source(name: str, program) -> str:
    header = _FAMILY_HEADER if hasattr(program, "family") else _PROGRAM_HEADER
    return header.format(name=name, package=PACKAGE) + program.source()


def write_batch(directory: Path, cases: list) -> list[str]:
    """Writes ``cases`` ((program, sequence) pairs) under ``directory``; returns the module names."""
    package = directory / "src" / PACKAGE
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    names, stored = [], []
    for i, (program, sequence) in enumerate(cases):
        name = f"p{i:03d}"
        (package / f"{name}.py").write_text(module_source(name, program))
        if not hasattr(program, "family"):
            (package / f"{name}_helpers.py").write_text(_HELPERS.format(name=name))
        names.append(name)
        stored.append((name, program, sequence))
    with open(directory / "cases.pkl", "wb") as f:
        pickle.dump(stored, f)
    return names


# ---------------------------------------------------------------------------------------------
# A child: every program of the batch, jitted from its module, against eager
# ---------------------------------------------------------------------------------------------


def _check_module_program(program, sequence, mod):
    """``fuzz_programs.check_program`` with the jitted side the imported module ``mod`` (its
    namespace holds what the one-process mode's fresh namespace holds)."""
    from fuzz_programs import _fresh_namespace, check_program

    missing = set(_fresh_namespace()) - set(vars(mod))
    assert not missing, f"the module lacks the namespace's {sorted(missing)}"
    outcome = check_program(program, sequence, jit_namespace=vars(mod))
    if outcome.differences:
        outcome.differences.insert(0, f"sequence: {sequence!r}")
    return outcome, outcome.jitted


def _check_module_family_program(program, sequence, mod):
    """``fuzz_family_runner.check_family_program`` with the jitted side the imported module ``mod``."""
    import thunder

    import fuzz_families as ff
    from fuzz_family_runner import _Side, check_family_program

    class ModuleSide(_Side):
        def __init__(self):
            self.ns = vars(mod)
            missing = set(ff.fresh_namespace()) - {"__name__"} - set(self.ns)
            assert not missing, f"the module lacks the namespace's {sorted(missing)}"
            self.module = mod.Family()
            self.fn = thunder.jit(self.module, cache="symbolic values")
            self.a = self.state = None

    outcome = check_family_program(program, sequence, jitted_side=ModuleSide())
    return outcome, outcome.jitted


def _run_one(name: str, program, sequence) -> dict:
    from metatrace.entry_cache import entry_cache_stats

    record = {"name": name, "differences": [], "calls": 0, "compiles": 0, "loaded": 0, "stored": 0,
              "kept_local": [], "skipped": []}
    try:
        mod = importlib.import_module(f"{PACKAGE}.{name}")
        check = _check_module_family_program if hasattr(program, "family") else _check_module_program
        outcome, jitted = check(program, sequence, mod)
    except Exception:  # the harness itself failed: a difference to look at
        record["differences"] = [f"harness error: {traceback.format_exc(limit=8)}"]
        return record
    stats = entry_cache_stats(jitted)
    record.update(differences=outcome.differences, calls=outcome.calls, compiles=outcome.compiles,
                  compiled_calls=outcome.compiled_calls)
    if stats is None:
        record["differences"].append("the entry cache is off for this callable (entry_cache_stats is None)")
    else:
        record.update(loaded=stats.loaded, stored=stats.stored, kept_local=list(stats.kept_local),
                      skipped=list(stats.skipped))
    return record


def child(directory: Path, phase: int, start: int = 0) -> None:
    sys.path.insert(0, str(directory / "src"))
    sys.path.insert(0, str(TESTS))
    if snapshot := os.environ.get(SNAPSHOT_VARIABLE):  # (metatrace as it was when the run began)
        sys.path.insert(0, snapshot)
    warnings.filterwarnings("ignore")
    import metatrace
    from metatrace.entry_cache.program_key import metatrace_digest

    with open(directory / "cases.pkl", "rb") as f:
        cases = pickle.load(f)
    with open(directory / f"results{phase}.jsonl", "a") as out, metatrace.enable():
        out.write(json.dumps({"metatrace": metatrace_digest(), "file": metatrace.__file__}) + "\n")
        for name, program, sequence in cases[start:]:
            out.write(json.dumps({"name": name, "started": True}) + "\n")
            out.flush()
            faulthandler.dump_traceback_later(PROGRAM_TIMEOUT_S, exit=True)  # (a hang: the stacks, then exit)
            record = _run_one(name, program, sequence)
            faulthandler.cancel_dump_traceback_later()
            out.write(json.dumps(record) + "\n")
            out.flush()


# ---------------------------------------------------------------------------------------------
# The parent: a batch through both children, and the totals
# ---------------------------------------------------------------------------------------------


@dataclass
class Totals:
    programs: int = 0
    calls: int = 0
    compiles_first: int = 0
    compiles_second: int = 0
    stored: int = 0
    loaded: int = 0
    programs_loaded: int = 0  # the second run loaded at least one entry
    programs_kept_local: int = 0  # the first run kept an entry (or the callable) in its process
    programs_recompiled: int = 0  # the second run compiled although the first stored every compile
    programs_skipped: int = 0  # the second run skipped a stored entry
    differing: int = 0
    kept_local_reasons: collections.Counter = field(default_factory=collections.Counter)
    skipped_reasons: collections.Counter = field(default_factory=collections.Counter)
    examples: dict = field(default_factory=dict)  # a reason -> (the first program with it, the reason unabridged)
    warnings: list = field(default_factory=list)
    recompiled_examples: list = field(default_factory=list)  # (program, sequence, first record, second record)

    def line(self) -> str:
        return (f"programs: {self.programs}, calls: {self.calls} (each in both processes), "
                f"compiles: {self.compiles_first} first / {self.compiles_second} second, "
                f"stored: {self.stored}, loaded: {self.loaded} (programs whose second run loaded: "
                f"{self.programs_loaded}), programs with kept_local: {self.programs_kept_local}, "
                f"programs recompiled though all stored: {self.programs_recompiled}, "
                f"programs with skipped entries: {self.programs_skipped}, differing programs: {self.differing}")

    def reasons(self) -> str:
        lines = []
        for title, counter in (("kept_local", self.kept_local_reasons), ("skipped", self.skipped_reasons)):
            if counter:
                lines.append(f"top {title} reasons (entries):")
                for reason, n in counter.most_common(8):
                    program = self.examples[reason][0]
                    terms = "; ".join([*getattr(program, "statements", ()), *program.terms])
                    lines += [f"  {n:5d}  {reason}", f"         e.g. a program of: {terms[:400]}"]
        for program, sequence, one, two in self.recompiled_examples:
            lines += ["a program whose second run compiled although the first stored every compile "
                      f"(first: calls {one.get('compiled_calls')} compiled, {one['stored']} stored; second: calls "
                      f"{two.get('compiled_calls')} compiled, {two['loaded']} loaded):",
                      f"  terms: {'; '.join([*getattr(program, 'statements', ()), *program.terms])}",
                      f"  sequence: {sequence!r}"]
        return "\n".join(lines)


_VARYING = (
    (re.compile(rf"\b{PACKAGE}\.p\d+(_helpers)?\b"), f"{PACKAGE}.pNNN"),
    (re.compile(r"\b[0-9a-f]{16,}\b"), "<hex>"),
    (re.compile(r" at 0x[0-9a-f]+"), " at 0x.."),
    (re.compile(r"^[^:\s]+\.(pkl|entry|bin)\S*: "), ""),
)


def _reason(text: str) -> str:
    for pattern, replacement in _VARYING:
        text = pattern.sub(replacement, text)
    return text[:240]


def _run_child(directory: Path, phase: int, cache_dir: Path, names: list[str], digests: set) -> dict:
    """Runs the batch in fresh processes (phase 1 or 2); a program that kills or hangs its process is
    recorded as differing and the rest run in another process. Returns name -> record; adds the
    digests of the metatrace the processes ran to ``digests``."""
    env = {**os.environ, "METATRACE_ENTRY_CACHE": "1", "METATRACE_ENTRY_CACHE_DIR": str(cache_dir)}
    results_path = directory / f"results{phase}.jsonl"
    records: dict[str, dict] = {}
    start = 0
    while start < len(names):
        with open(directory / f"log{phase}.txt", "a") as log:
            try:
                proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), str(directory), str(phase),
                                       str(start)], env=env, stdout=log, stderr=subprocess.STDOUT, cwd=str(TOOLS.parent),
                                      timeout=120 + (PROGRAM_TIMEOUT_S + 30) * (len(names) - start))
                rc = proc.returncode
            except subprocess.TimeoutExpired:
                rc = "timeout"
        started = None
        for line in results_path.read_text().splitlines() if results_path.exists() else ():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:  # (a line cut short by the process's end)
                continue
            if "metatrace" in row:
                digests.add(row["metatrace"])
            elif row.get("started"):
                started = row["name"]
            else:
                records[row["name"]] = row
                started = None
        missing = [n for n in names if n not in records]
        if not missing:
            break
        culprit = started if started in missing else missing[0]
        tail = (directory / f"log{phase}.txt").read_text()[-1500:]
        records[culprit] = {"name": culprit, "differences": [f"the process ended ({rc}) running it; log tail:\n{tail}"],
                            "calls": 0, "compiles": 0, "compiled_calls": [], "loaded": 0, "stored": 0,
                            "kept_local": [], "skipped": []}
        start = names.index(culprit) + 1
    return records


def run_batch(cases: list, totals: Totals) -> float:
    """Runs ``cases`` through both processes, adds to ``totals`` and prints every program that differs
    (its batch directory is kept); returns the seconds it took."""
    began = time.monotonic()
    directory = Path(tempfile.mkdtemp(prefix="fuzz_two_process_"))
    keep = False
    try:
        names = write_batch(directory, cases)
        cache_dir = directory / "entries"
        digests: set[str] = set()
        first = _run_child(directory, 1, cache_dir, names, digests=digests)
        second = _run_child(directory, 2, cache_dir, names, digests=digests)
        if len(digests) > 1:
            totals.warnings.append(f"a batch ran under {len(digests)} versions of metatrace's source")
            print(f"warning: {totals.warnings[-1]} (its second process could load nothing)", flush=True)
        for name, (program, sequence) in zip(names, cases):
            one, two = first[name], second[name]
            totals.programs += 1
            totals.calls += one["calls"]
            totals.compiles_first += one["compiles"]
            totals.compiles_second += two["compiles"]
            totals.stored += one["stored"]
            totals.loaded += two["loaded"]
            totals.programs_loaded += two["loaded"] > 0
            for kind, counter, reasons in (("kept_local", totals.kept_local_reasons, one["kept_local"]),
                                           ("skipped", totals.skipped_reasons, two["skipped"])):
                if reasons:
                    totals.programs_kept_local += kind == "kept_local"
                    totals.programs_skipped += kind == "skipped"
                for raw in reasons:
                    counter[_reason(raw)] += 1
                    totals.examples.setdefault(_reason(raw), (program, raw))
            if two["compiles"] and one["compiles"] and one["stored"] >= one["compiles"] and not one["kept_local"]:
                totals.programs_recompiled += 1
                if len(totals.recompiled_examples) < 3:
                    totals.recompiled_examples.append((program, sequence, one, two))
            if one["differences"] or two["differences"]:
                totals.differing += 1
                keep = True
                parts = [f"---- differs from eager ({directory}/src/{PACKAGE}/{name}.py):", program.source()]
                for title, record in (("first process (compiles, stores)", one), ("second process (loads)", two)):
                    if record["differences"]:
                        parts.append(f"-- {title}: compiles {record['compiles']}, stored {record['stored']}, "
                                     f"loaded {record['loaded']}, kept_local {record['kept_local']}")
                        parts += record["differences"]
                print("\n".join(parts), flush=True)
    finally:
        if not keep:
            shutil.rmtree(directory, ignore_errors=True)
    return time.monotonic() - began


if __name__ == "__main__":
    child(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 0)
