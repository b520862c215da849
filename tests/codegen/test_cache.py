"""The codegen's cache directory: determinism, staleness, corruption, concurrency, bad input."""

from __future__ import annotations

import copy
import json
import multiprocessing
import subprocess
import sys
from pathlib import Path

import pytest

import metatrace.codegen.cli as cli
import metatrace.codegen.generate as codegen
import metatrace.codegen.version as version
from metatrace.codegen import cache

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def generated() -> tuple[str, dict]:
    """One generation of the metas (seconds of CPU), shared by the tests of what surrounds it."""
    return codegen.generate()


@pytest.fixture
def empty_cache_dir(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("METATRACE_CACHE_DIR", str(tmp_path))
    return tmp_path


@pytest.fixture
def cache_dir(empty_cache_dir, monkeypatch, generated) -> Path:
    """An empty cache directory where generating returns the module's one generation (it is
    deterministic: test_generation_is_deterministic): the tests using it check the cache around
    generation, not generation itself."""
    text, manifest = generated
    monkeypatch.setattr(codegen, "generate", lambda: (text, copy.deepcopy(manifest)))
    return empty_cache_dir


def test_generation_is_deterministic(generated):
    text1, manifest1 = generated
    text2, manifest2 = codegen.generate()
    assert text1 == text2 and manifest1 == manifest2


def test_generated_module_is_rewritten_thunder_code_not_a_copy(generated):
    text, manifest = generated
    assert manifest["sections"] == [
        "thunder.core.baseutils", "thunder.core.utils", "thunder.core.prims", "thunder.core.transforms"
    ]
    assert "def slice_meta(" in text and "_mt.floordiv(" in text
    # The autograd rule that converts sizes with tree_map(int, ...) gets the converter rewrite.
    assert manifest["grad_rules"] == ["_slice_prim_grad"]
    assert "tree_map(_mt.symbolic_int, padding)" in text
    assert f"# source-hash: {manifest['source_hash']}" in text


def test_check_reports_missing_then_current(cache_dir):
    assert cli.rewrite_metas(["--check"]) == 1
    assert cli.rewrite_metas([]) == 0
    assert cli.rewrite_metas(["--check"]) == 0
    (dir_,) = cache_dir.iterdir()
    assert dir_.name.startswith("thunder-0.2.6-")
    assert {p.name for p in dir_.iterdir()} == {cache.METAS_FILE, cache.MANIFEST_FILE}


def test_out_overrides_the_cache_directory(cache_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    assert cli.rewrite_metas(["--out", str(out)]) == 0
    assert list(out.iterdir()) and not list(cache_dir.iterdir())


@pytest.mark.parametrize("damage", ["truncate", "garbage_manifest", "edit"])
def test_corrupt_cache_is_detected_and_regenerated(cache_dir, damage):
    first = cache.ensure()
    metas, manifest = first.directory / cache.METAS_FILE, first.directory / cache.MANIFEST_FILE
    if damage == "truncate":
        metas.write_text(metas.read_text()[:1000])
    elif damage == "garbage_manifest":
        manifest.write_bytes(b"\x00{not json")
    else:
        metas.write_text(metas.read_text().replace("_mt.floordiv(", "_mt.add(", 1))
    assert cache.state().status.startswith("corrupt")
    assert cli.rewrite_metas(["--check"]) == 1
    again = cache.ensure()
    assert again.action.startswith("regenerated")
    assert again.text == first.text and cache.state().status == "current"


def test_stale_cache_from_other_sources_is_not_used(cache_dir, monkeypatch):
    cache.ensure()
    monkeypatch.setattr(codegen, "source_hash", lambda sources=None: "0" * 64)
    assert cache.state().status == "missing"


def _generate_into(path: str) -> str:
    import os

    os.environ["METATRACE_CACHE_DIR"] = path
    return cache.ensure(force=True).directory.name


def test_concurrent_generation_never_leaves_a_broken_file(empty_cache_dir):
    cache_dir = empty_cache_dir
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        names = pool.map(_generate_into, [str(cache_dir)] * 2)
    assert names[0] == names[1]
    assert cache.state().status == "current"
    assert not [p for p in (cache_dir / names[0]).iterdir() if p.name.endswith(".tmp")]


def test_other_thunder_version_runs_with_a_warning(monkeypatch):
    monkeypatch.setattr(version, "thunder_version", lambda: "9.9.9")
    with pytest.warns(UserWarning, match="tested against lightning-thunder 0.2.6, found 9.9.9"):
        version.warn_if_untested()


def test_unparsable_thunder_source_is_a_clear_error(monkeypatch, capsys, empty_cache_dir):
    real = codegen.read_sources

    def broken():
        sources = real()
        sources["thunder.core.prims"] = "def broken(:\n"
        return sources

    monkeypatch.setattr(codegen, "read_sources", broken)
    assert cli.rewrite_metas(["--force"]) == 2
    err = capsys.readouterr().err
    assert "cannot parse" in err and "thunder/core/prims.py" in err


def test_cli_script_runs_and_prints_totals(empty_cache_dir):
    cache_dir = empty_cache_dir
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "rewrite_metas.py")], capture_output=True, text=True,
                          env={**__import__("os").environ, "METATRACE_CACHE_DIR": str(cache_dir)})
    assert proc.returncode == 0, proc.stderr
    assert "ported" in proc.stdout and "of 171 prims" in proc.stdout
    manifest = json.loads(next(cache_dir.iterdir()).joinpath(cache.MANIFEST_FILE).read_text())
    assert len(manifest["prims"]) == 171


def test_unwritable_cache_directory_is_one_line_naming_it_and_the_variable(cache_dir, monkeypatch, capsys):
    # a directory under a regular file can never be created, whoever runs the test
    blocked = cache_dir / "a-file" / "cache"
    (cache_dir / "a-file").write_text("")
    monkeypatch.setenv("METATRACE_CACHE_DIR", str(blocked))
    assert cli.rewrite_metas([]) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [err]
    assert str(blocked) in err
    assert "METATRACE_CACHE_DIR" in err
