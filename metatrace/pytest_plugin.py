"""A pytest plugin that reruns any thunder test under symbolic values with metatrace enabled.

    pytest -p metatrace.pytest_plugin --metatrace-force-symbolic thunder/tests/test_ops.py -k ...

With the option, metatrace is enabled for the session and every ``thunder.jit`` call (also the
ones thunder's own test framework makes, and ``from thunder import jit`` in test modules imported
after this plugin) compiles with ``cache="symbolic values"``, whatever ``cache=`` it asked for:
thunder developers can gate a change on "what passes under constant values passes under symbolic
values". Without the option the plugin does nothing.
"""

from __future__ import annotations

import functools

_state: dict = {}


def pytest_addoption(parser) -> None:
    parser.getgroup("metatrace").addoption(
        "--metatrace-force-symbolic",
        action="store_true",
        default=False,
        help='enable metatrace and force cache="symbolic values" on every thunder.jit',
    )


def pytest_configure(config) -> None:
    if not config.getoption("--metatrace-force-symbolic"):
        return
    import thunder

    import metatrace

    original = thunder.jit

    @functools.wraps(original)
    def jit(fn=None, /, *args, **kwargs):
        kwargs["cache"] = "symbolic values"
        return original(fn, *args, **kwargs)

    _state["jit"] = original
    thunder.jit = jit
    _state["enabled"] = metatrace.enable()


def pytest_unconfigure(config) -> None:
    if "jit" not in _state:
        return
    import thunder

    import metatrace

    thunder.jit = _state.pop("jit")
    metatrace.disable()
    _state.clear()


def pytest_report_header(config) -> str | None:
    if config.getoption("--metatrace-force-symbolic"):
        return 'metatrace: enabled, every thunder.jit forced to cache="symbolic values"'
    return None
