"""``pytest -p metatrace.pytest_plugin --metatrace-force-symbolic`` reruns tests under symbolic values."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import metatrace

INNER_TEST = textwrap.dedent(
    '''
    import torch
    import thunder
    import metatrace


    def test_forced():
        jf = thunder.jit(lambda a, i: a[:i], cache="constant values")
        for i in (2, 3):
            assert torch.equal(jf(torch.arange(6.0), i), torch.arange(6.0)[:i])
        assert metatrace.is_enabled()
        assert thunder.cache_misses(jf) == 1  # symbolic values: i = 2 and 3 share one entry
    '''
)


def _run(tmp_path, *options) -> subprocess.CompletedProcess:
    path = tmp_path / "test_inner.py"
    path.write_text(INNER_TEST)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "metatrace.pytest_plugin", *options, str(path)]
    return subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=300)


def test_plugin_forces_symbolic_values_and_enables_metatrace(tmp_path):
    result = _run(tmp_path, "--metatrace-force-symbolic")
    assert result.returncode == 0, result.stdout[-2000:]


def test_plugin_without_the_option_changes_nothing(tmp_path):
    result = _run(tmp_path)
    assert "1 failed" in result.stdout  # constant values: two compiles, metatrace off


LEAKING_TEST = textwrap.dedent(
    '''
    import pytest
    import torch
    import thunder


    def _append(x, n, acc):
        acc.append(n * 2)  # stock thunder leaves its IntegerProxy in acc (metatrace is off)
        return x * 2


    {marker}
    def test_leaks():
        jf = thunder.jit(_append, cache="symbolic values")
        jf(torch.ones(3), 3, [])
    '''
)


def _run_leaking(tmp_path, marker: str, *options) -> subprocess.CompletedProcess:
    path = tmp_path / "test_leaking.py"
    path.write_text(LEAKING_TEST.format(marker=marker))
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "metatrace.pytest_plugin",
               *options, str(path)]
    env = {**os.environ, "PYTHONPATH": str(Path(metatrace.__file__).resolve().parents[1])}  # this checkout's plugin
    return subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=300, env=env)


def test_the_sentinel_marker_fails_a_test_that_leaves_a_proxy(tmp_path):
    result = _run_leaking(tmp_path, "@pytest.mark.metatrace_sentinel")
    assert "thunder proxies left in the caller's objects after a jitted call: args[2][0]" in result.stdout


def test_the_sentinel_option_fails_a_test_that_leaves_a_proxy(tmp_path):
    result = _run_leaking(tmp_path, "", "--metatrace-sentinel")
    assert "1 failed" in result.stdout


def test_without_the_sentinel_the_leak_passes_unseen(tmp_path):
    result = _run_leaking(tmp_path, "")
    assert "1 passed" in result.stdout
