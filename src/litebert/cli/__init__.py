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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="litebert", description="ALBERT: pretrain, fine-tune, convert, serve.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        importlib.import_module(f"{__name__}.{info.name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
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
