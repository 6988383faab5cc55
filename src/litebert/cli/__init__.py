"""The `litebert` command line.

Each sub-module of this package registers its sub-commands through `register(subparsers)`; every command is a
thin typed wrapper over a library function. Heavy imports (torch, transformers) happen inside the handlers so
`litebert --help` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from litebert.errors import LitebertError


# Which module registers each command, so a command imports only its own module (and `litebert data build`
# never pays for torch). `litebert --help` imports them all.
COMMANDS = {"params": "params", "tokenizer": "tokenizer", "data": "data", "pretrain": "pretrain",
            "plot": "pretrain", "finetune": "finetune", "evaluate": "finetune", "predict": "finetune",
            "fill-mask": "finetune", "convert": "convert", "export-onnx": "convert", "bench": "bench",
            "ablate": "ablate", "demo": "demo", "serve": "serve"}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="litebert", description="ALBERT: pretrain, fine-tune, convert, serve.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    available = {m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")}
    modules = [COMMANDS[command]] if command in COMMANDS else sorted(available)
    for name in modules:
        if name in available:
            importlib.import_module(f"{__name__}.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv[0] if argv else None).parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except LitebertError as exc:
        print(f"litebert: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("litebert: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
