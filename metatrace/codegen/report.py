"""``python -m metatrace report``: the per-prim table of the manifest and its totals."""

from __future__ import annotations

import argparse
import sys

from metatrace.codegen import cache


def format_report(manifest: dict) -> str:
    rows = [(name, e["status"], e.get("reason", "")) for name, e in sorted(manifest["prims"].items())]
    width = max(len(r[0]) for r in rows)
    lines = [f"thunder {manifest['thunder_version']} (tested: {manifest['tested_thunder_version']})", ""]
    lines.append(f"{'prim':<{width}}  {'status':<8}  reason")
    lines += [f"{name:<{width}}  {status:<8}  {reason}".rstrip() for name, status, reason in rows]
    ported = sum(1 for r in rows if r[1] == "ported")
    lines += ["", f"{ported} ported, {len(rows) - ported} fallback, {len(rows)} prims in all"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m metatrace")
    parser.add_argument("command", choices=["report"])
    args = parser.parse_args(argv)
    if args.command == "report":
        print(format_report(cache.ensure().manifest))
    return 0


if __name__ == "__main__":
    sys.exit(main())
