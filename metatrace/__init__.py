"""metatrace: recorded shape arithmetic and prologue guards for thunder's symbolic-values cache.

``metatrace.enable()`` installs the rewritten metas of the installed thunder (generating them into
the cache directory first when needed); ``metatrace.disable()`` restores thunder exactly. Both are
idempotent; ``with metatrace.enable(): ...`` disables again on exit.
"""

from __future__ import annotations

from metatrace.checker import check_trace
from metatrace.guards.explain import explain
from metatrace.install import disable, enable, is_enabled

__all__ = ["enable", "disable", "is_enabled", "check_trace", "explain"]
