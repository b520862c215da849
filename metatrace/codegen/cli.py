"""Command lines over the codegen and its cache: ``tools/rewrite_metas.py`` and the
``metatrace-rewrite-metas`` entry point. (``python -m metatrace report`` is in metatrace.codegen.report.)

Kept apart from :mod:`metatrace.codegen.generate`, which generates, and :mod:`metatrace.codegen.cache`, which
stores what it generated and calls the codegen when stale: neither imports the other's caller.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from metatrace.codegen import cache, generate
from metatrace.codegen.version import warn_if_untested
from rewrites.pipeline import RewriteError


def rewrite_metas(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rewrite_metas", description=generate.__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="output directory (default: the cache directory; env METATRACE_CACHE_DIR)")
    parser.add_argument("--check", action="store_true", help="exit 1 if the cache is missing or stale, generate nothing")
    parser.add_argument("--force", action="store_true", help="regenerate even if the cache is current")
    args = parser.parse_args(argv)
    warn_if_untested()
    try:
        if args.check:
            state = cache.state(args.out)
            print(f"{state.directory}: {state.status}")
            return 0 if state.status == "current" else 1
        result = cache.ensure(args.out, force=args.force)
    except (RewriteError, cache.CacheDirectoryError) as e:
        print(f"rewrite_metas: {e}", file=sys.stderr)
        return 2
    counts = {"ported": 0, "fallback": 0}
    for entry in result.manifest["prims"].values():
        counts[entry["status"]] += 1
    print(f"{result.directory} ({result.action}): {counts['ported']} ported, {counts['fallback']} fallback "
          f"of {len(result.manifest['prims'])} prims")
    return 0
