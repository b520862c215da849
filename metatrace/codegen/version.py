"""The thunder version metatrace was built and tested against, and what happens with another."""

from __future__ import annotations

import warnings
from importlib.metadata import PackageNotFoundError, version

TESTED_THUNDER_VERSION = "0.2.6"


def thunder_version() -> str:
    try:
        return version("lightning-thunder")
    except PackageNotFoundError:
        import thunder

        return getattr(thunder, "__version__", "unknown")


def warn_if_untested() -> None:
    """Another thunder runs anyway (what can be ported is ported), with a warning saying so."""
    found = thunder_version()
    if found != TESTED_THUNDER_VERSION:
        warnings.warn(
            f"metatrace was tested against lightning-thunder {TESTED_THUNDER_VERSION}, found {found}: "
            "metas that the rewriter cannot port fall back to static values; check `python -m metatrace report`",
            stacklevel=2,
        )
