"""``pytest -p metatrace.pytest_plugin --metatrace-force-symbolic`` reruns tests under symbolic values.

Each inner session runs in this process (pytest's ``pytester``, in-process): a subprocess would
import torch and thunder again, 5-10 s per test. The plugin enables metatrace in the inner
session's ``pytest_configure`` and disables it in ``pytest_unconfigure``, as in a real session;
each test checks that it left metatrace as it found it."""

from __future__ import annotations

import textwrap

import pytest

import metatrace

pytest_plugins = ("pytester",)

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


@pytest.fixture
def inner(pytester):
    """Runs an inner pytest session on ``source`` with the plugin: (its outcomes, its output)."""
    was_enabled = metatrace.is_enabled()

    def run(source: str, *options):
        pytester.makepyfile(test_inner=source)
        result = pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider", "-p", "metatrace.pytest_plugin", *options)
        counts = {k: v for k, v in result.parseoutcomes().items() if k in ("passed", "failed", "errors", "skipped")}
        return counts, result.stdout.str()

    yield run
    assert metatrace.is_enabled() == was_enabled  # the inner session gave metatrace back as it was


def test_plugin_forces_symbolic_values_and_enables_metatrace(inner):
    outcomes, output = inner(INNER_TEST, "--metatrace-force-symbolic")
    assert outcomes == {"passed": 1}, output[-2000:]


def test_plugin_without_the_option_changes_nothing(inner):
    outcomes, _ = inner(INNER_TEST)
    assert outcomes == {"failed": 1}  # constant values: two compiles, metatrace off


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


def test_the_sentinel_marker_fails_a_test_that_leaves_a_proxy(inner):
    _, output = inner(LEAKING_TEST.format(marker="@pytest.mark.metatrace_sentinel"))
    assert "thunder proxies left in the caller's objects after a jitted call: args[2][0]" in output


def test_the_sentinel_option_fails_a_test_that_leaves_a_proxy(inner):
    outcomes, _ = inner(LEAKING_TEST.format(marker=""), "--metatrace-sentinel")
    assert outcomes == {"failed": 1}


def test_without_the_sentinel_the_leak_passes_unseen(inner):
    outcomes, _ = inner(LEAKING_TEST.format(marker=""))
    assert outcomes == {"passed": 1}
