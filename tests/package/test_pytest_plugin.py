"""``pytest -p metatrace.pytest_plugin --metatrace-force-symbolic`` reruns tests under symbolic values."""

from __future__ import annotations

import subprocess
import sys
import textwrap

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
