"""Routes thunder's ``check(cond, msg, ...)`` helpers through the runtime.

``utils.check(a <= b, lambda: "...")`` becomes ``_mt.check(a <= b, lambda: "...")``: the runtime
turns the condition into a guard and then defers to thunder's own ``check`` so the error type and
the (still lazy) message are exactly thunder's.
"""

from __future__ import annotations

from rewrites.call_renamer import CallRenamer

# Where thunder defines or re-exports its check helper. The bare "check" covers calls inside
# baseutils itself, where check is a module-local function.
CHECK_QUALIFIED_NAMES = frozenset(
    {
        "thunder.core.baseutils.check",
        "thunder.core.utils.check",
        "check",
    }
)


class CheckCallTransformer(CallRenamer):
    """``utils.check(...)``/``baseutils.check(...)``/``check(...)`` -> ``_mt.check(...)``."""

    TABLE = {name: "check" for name in CHECK_QUALIFIED_NAMES}
