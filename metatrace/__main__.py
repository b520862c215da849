"""``python -m metatrace report [--model SPEC]``: the per-prim table of the codegen's manifest
(:mod:`metatrace.codegen.report`), or with ``--model`` the pins of a model's cache entries and
what fixed each (:mod:`metatrace.model_report`).

``python -m metatrace entries [list|clear]``: the compiled entries stored on disk
(:mod:`metatrace.entry_cache`, under ``$METATRACE_ENTRY_CACHE_DIR`` or the cache base's
``entries``): ``list`` (the default) prints one row per stored program, ``clear`` removes every
stored entry."""

import argparse
import sys
import warnings

warnings.filterwarnings("ignore", message="transformer_engine module not found")


def _describe(program: dict) -> str:
    """A stored program as its ``program.json`` names it: a function (with its code's digest) or
    a module class."""
    if "function" in program:
        return f"{program['function']} (code {program.get('code', '?')})"
    if "module_class" in program:
        return f"module {program['module_class']}"
    return ", ".join(f"{k}={v}" for k, v in sorted(program.items())) or "?"


def entries(action: str) -> int:
    from metatrace.entry_cache import entry_files, settings

    directory = settings.directory()
    if action == "clear":
        removed = entry_files.clear()
        print(f"removed {removed} stored {'entry' if removed == 1 else 'entries'} from {directory}")
        return 0
    rows = entry_files.listing()
    print(f"stored entries in {directory}")
    if not rows:
        print("(none)")
        return 0
    width = max(len(r["key"]) for r in rows)
    described = [_describe(row["program"]) for row in rows]
    program_width = max(len("program"), *(len(d) for d in described))
    print(f"{'key':<{width}}  {'entries':>7}  {'bytes':>10}  {'program':<{program_width}}  directory")
    for row, description in zip(rows, described):
        print(f"{row['key']:<{width}}  {row['entries']:>7}  {row['bytes']:>10}  {description:<{program_width}}  "
              f"{directory / row['key']}")
    total_entries = sum(r["entries"] for r in rows)
    total_bytes = sum(r["bytes"] for r in rows)
    print(f"{len(rows)} programs, {total_entries} entries, {total_bytes} bytes")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m metatrace")
    parser.add_argument("command", choices=["report", "entries"])
    parser.add_argument("action", nargs="?", choices=["list", "clear"],
                        help="for entries: list the stored programs (default), or clear them all")
    parser.add_argument("--model", help="run a model (litgpt:<config>, litgpt.lora:<config>, <module>:<function>) "
                                        "and list every pin of its cache entries with what fixed it")
    parser.add_argument("--lengths", default="8,12,16,24", help="sequence lengths for --model (default 8,12,16,24)")
    parser.add_argument("--eval", action="store_true", help="--model without a backward pass")
    args = parser.parse_args(argv)
    if args.command == "entries":
        if args.model is not None:
            parser.error("--model is an option of report")
        return entries(args.action or "list")
    if args.action is not None:
        parser.error(f"report takes no action ({args.action})")
    if args.model is None:
        from metatrace.codegen.report import main as table

        return table([args.command])
    from metatrace import model_report

    print(model_report.run(args.model, tuple(int(x) for x in args.lengths.split(",")), train=not args.eval))
    return 0


if __name__ == "__main__":
    sys.exit(main())
