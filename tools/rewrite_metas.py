#!/usr/bin/env python
"""Rewrites the installed thunder's prim metas into the cache directory (see metatrace.codegen.generate and metatrace.codegen.cli).

    python tools/rewrite_metas.py            # generate (or reuse) and print the totals
    python tools/rewrite_metas.py --check    # exit 1 when missing or stale
    python tools/rewrite_metas.py --out DIR  # write under DIR instead (env: METATRACE_CACHE_DIR)
"""

import sys
import warnings

warnings.filterwarnings("ignore", message="transformer_engine module not found")

from metatrace.codegen.cli import rewrite_metas  # noqa: E402

if __name__ == "__main__":
    sys.exit(rewrite_metas())
