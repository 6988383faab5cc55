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

from litebert.cli._checks import check_args
from litebert.errors import LitebertError, Terminated


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
        check_args(args)
        return int(args.func(args) or 0)
    except Terminated as exc:
        print(f"litebert: {exc}", file=sys.stderr)
        return exc.exit_code
    except LitebertError as exc:
        print(f"litebert: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        # A full or read-only disk that reached here through a writer without its own message (or that
        # safetensors/torch reported as their own exception) is still the user's disk: say so, exit 2.
        from litebert.files import OUTPUT_ERRNOS, disk_error, reason

        err = disk_error(exc)
        if err is None or err.errno not in OUTPUT_ERRNOS:
            raise
        where = f"{err.filename}: " if err.filename else ""
        print(f"litebert: error: {where}cannot write: {reason(err)} ({type(exc).__name__}: "
              f"{(str(exc).strip().splitlines() or [''])[0][:200]})", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("litebert: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
