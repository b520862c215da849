"""A pytest plugin that reruns any thunder test under symbolic values with metatrace enabled.

    pytest -p metatrace.pytest_plugin --metatrace-force-symbolic thunder/tests/test_ops.py -k ...

With the option, metatrace is enabled for the session and every ``thunder.jit`` call (also the
ones thunder's own test framework makes, and ``from thunder import jit`` in test modules imported
after this plugin) compiles with ``cache="symbolic values"``, whatever ``cache=`` it asked for:
thunder developers can gate a change on "what passes under constant values passes under symbolic
values". Without the option the plugin does nothing.

The sentinel (issue 36 b): with ``--metatrace-sentinel`` for every test, or with the marker
``@pytest.mark.metatrace_sentinel`` for one test (or ``pytestmark`` for a module), every
``thunder.jit`` the test calls through the ``thunder`` module returns a jitted function or module
that, after each of its calls, walks the call's arguments, the module, and the globals and closure
cells its code names, and fails the test naming every path to a thunder proxy left there
(``metatrace.testing.sentinel``). A ``jit`` imported by name before the test starts is not watched.

    pytest -p metatrace.pytest_plugin --metatrace-sentinel tests/mutations/test_mutations.py
"""

from __future__ import annotations

import functools

import pytest

from metatrace.state.process_tables import PYTEST_FORCED_SYMBOLIC

SENTINEL_MARKER = "metatrace_sentinel"


def pytest_addoption(parser) -> None:
    parser.getgroup("metatrace").addoption(
        "--metatrace-force-symbolic",
        action="store_true",
        default=False,
        help='enable metatrace and force cache="symbolic values" on every thunder.jit',
    )
    parser.getgroup("metatrace").addoption(
        "--metatrace-sentinel",
        action="store_true",
        default=False,
        help="after each jitted call of every test, fail on any thunder proxy left in the caller's objects",
    )


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", f"{SENTINEL_MARKER}: after each jitted call of the test, fail on any thunder "
                            "proxy left in the caller's objects (metatrace.testing.sentinel)")
    if not config.getoption("--metatrace-force-symbolic"):
        return
    import thunder

    import metatrace

    original = thunder.jit

    @functools.wraps(original)
    def jit(fn=None, /, *args, **kwargs):
        kwargs["cache"] = "symbolic values"
        return original(fn, *args, **kwargs)

    PYTEST_FORCED_SYMBOLIC.original_jit = original
    thunder.jit = jit
    PYTEST_FORCED_SYMBOLIC.enabled = metatrace.enable()


def pytest_unconfigure(config) -> None:
    if PYTEST_FORCED_SYMBOLIC.original_jit is None:
        return
    import thunder

    import metatrace

    metatrace.disable()  # (first: enable() wrapped the forcing jit, and disable() puts that back)
    thunder.jit, PYTEST_FORCED_SYMBOLIC.original_jit = PYTEST_FORCED_SYMBOLIC.original_jit, None
    PYTEST_FORCED_SYMBOLIC.enabled = None


def pytest_report_header(config) -> str | None:
    if config.getoption("--metatrace-force-symbolic"):
        return 'metatrace: enabled, every thunder.jit forced to cache="symbolic values"'
    return None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    if not (item.config.getoption("--metatrace-sentinel") or item.get_closest_marker(SENTINEL_MARKER)):
        return (yield)
    from metatrace.testing import sentinel

    with sentinel():
        return (yield)
