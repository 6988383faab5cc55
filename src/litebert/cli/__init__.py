"""The `litebert` command line.

Each sub-module of this package registers its sub-commands through `register(subparsers)`; every command is a
thin typed wrapper over a library function. Heavy imports (torch, transformers) happen inside the handlers, and
`litebert --help` imports no command module at all: it lists the commands from the table below.

One flag vocabulary across commands (old spellings stay as hidden aliases): `--batch-size` is the batch per
optimizer step and `--micro-batch-size` the batch per forward pass (accumulation makes up the rest);
`--warmup-steps` or `--warmup-ratio`; `--threads` (torch/trainer threads); `--workers` (data processes);
`--seed` (default 0). Every option's help says what its default means.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from litebert.cli._checks import check_args
from litebert.errors import LitebertError, Terminated

# command -> (module that registers it, one-line help). A command imports only its own module (so `litebert
# data build` never pays for torch); the top-level help needs none of them. A module missing from this table
# still works: it is imported and registers itself.
COMMANDS = {
    "params": ("params", "print parameter counts of the released configs and the paper's ablations"),
    "tokenizer": ("tokenizer", "train or try a tokenizer"),
    "data": ("data", "build and inspect pretraining token stores"),
    "pretrain": ("pretrain", "pretrain ALBERT (MLM + SOP, LAMB) on a token store; torchrun-ready"),
    "plot": ("pretrain", "plot the curves of a run dir's metrics.jsonl into a PNG"),
    "finetune": ("finetune", "fine-tune on a task (GLUE, SQuAD, RACE, NER, Chinese, custom CSV/JSONL)"),
    "evaluate": ("finetune", "score a fine-tuned model on a split"),
    "predict": ("finetune", "write JSONL predictions for a file in the task's format, or for --text"),
    "fill-mask": ("finetune", "top predictions for each [MASK] in a text"),
    "convert": ("convert", "convert a TF / TF-Hub / albert_zh checkpoint or a Hugging Face ALBERT dir"),
    "export-onnx": ("convert", "export a model directory to ONNX, checked in onnxruntime"),
    "bench": ("bench", "quick speed check of this machine, ours vs transformers"),
    "ablate": ("ablate", "reproduce the paper's ablations (embedding, sharing, objective, dropout, scale)"),
    "demo": ("demo", "the whole pipeline offline on text shipped with Python, in a few minutes"),
    "serve": ("serve", "serve a model directory over HTTP (JSON API; needs litebert[serve])"),
}



def _version() -> str:
    from litebert import __version__

    return f"litebert {__version__}"


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The full parser of `command`'s module, or (None, or not a command) the command list only."""
    parser = argparse.ArgumentParser(prog="litebert", description="ALBERT: pretrain, fine-tune, convert, serve.",
                                     epilog="Run `litebert COMMAND --help` for a command's options and an example.")
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    available = {m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")}
    if command in COMMANDS:
        modules = [COMMANDS[command][0]]
    elif command in available:  # a command module the table does not list yet
        modules = [command]
    else:  # the command list: stubs from the table, and any module the table does not know
        for name, (module, text) in COMMANDS.items():
            if module in available:
                sub.add_parser(name, help=text)
        known = {module for module, _ in COMMANDS.values()}
        modules = sorted(available - known)
    for name in modules:
        if name in available:
            importlib.import_module(f"{__name__}.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from litebert.cli._common import apply_config_file, config_path_in

    argv = sys.argv[1:] if argv is None else argv
    command = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(command)
    try:
        config = config_path_in(argv)
        sub = _subparser(parser, command)
        if config and sub is not None and hasattr(sub, "config_ignore"):  # (convert's --config is another thing)
            apply_config_file(sub, config, ignore=sub.config_ignore)
        args = parser.parse_args(argv)
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


def _subparser(parser: argparse.ArgumentParser, command: str | None):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            return action.choices[command]
    return None


if __name__ == "__main__":
    sys.exit(main())
