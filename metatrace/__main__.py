"""``python -m metatrace report [--model SPEC]``: the per-prim table of the codegen's manifest
(:mod:`metatrace.codegen.report`), or with ``--model`` the pins of a model's cache entries and
what fixed each (:mod:`metatrace.model_report`)."""

import argparse
import sys
import warnings

warnings.filterwarnings("ignore", message="transformer_engine module not found")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m metatrace")
    parser.add_argument("command", choices=["report"])
    parser.add_argument("--model", help="run a model (litgpt:<config>, litgpt.lora:<config>, <module>:<function>) "
                                        "and list every pin of its cache entries with what fixed it")
    parser.add_argument("--lengths", default="8,12,16,24", help="sequence lengths for --model (default 8,12,16,24)")
    parser.add_argument("--eval", action="store_true", help="--model without a backward pass")
    args = parser.parse_args(argv)
    if args.model is None:
        from metatrace.codegen.report import main as table

        return table([args.command])
    from metatrace import model_report

    print(model_report.run(args.model, tuple(int(x) for x in args.lengths.split(",")), train=not args.eval))
    return 0


if __name__ == "__main__":
    sys.exit(main())
