"""The command line as a whole: one flag vocabulary, help that explains defaults and ends with an example,
`--version`, `--help` without torch, `--config` files and run records, run directories as `--model`."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from litebert.cli import COMMANDS, build_parser


def subcommand_parsers():
    """(name, parser) of every leaf command, `data build` and `tokenizer train` included."""
    out = []
    for command in COMMANDS:
        parser = build_parser(command)
        todo = [(command, parser)]
        while todo:
            name, p = todo.pop()
            subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
            if not subs:
                out.append((name, p))
            for action in subs:
                for child, cp in action.choices.items():
                    if p is parser and child != command:
                        continue
                    todo.append((name if p is parser else f"{name} {child}", cp))
    return out


def test_every_option_says_what_its_default_means_and_every_command_ends_with_an_example():
    seen = set()
    for name, parser in subcommand_parsers():
        seen.add(name)
        assert parser.epilog and parser.epilog.startswith("example:\n  litebert "), name
        for action in parser._actions:
            if action.help == argparse.SUPPRESS or isinstance(action, (argparse._HelpAction,)):
                continue
            where = f"{name} {'/'.join(action.option_strings) or action.dest}"
            assert action.help, f"{where}: no help"
            assert "default: None" not in action.help, where
            assert " object at 0x" not in action.help, f"{where}: a default printed as a Python object"
            if action.option_strings and not action.required and action.default not in (None, False):
                assert "default" in action.help, f"{where}: help does not say what the default {action.default!r} is"
    assert {"finetune", "pretrain", "data build", "tokenizer train", "predict"} <= seen


ALIASES = [  # (command, old spelling, new spelling, dest)
    ("pretrain", "--num-workers", "--workers", "num_workers"),
    ("tokenizer train", "--num-threads", "--threads", "num_threads"),
    ("finetune", "--grad-accum", None, "grad_accum"),
]


@pytest.mark.parametrize("command, old, new, dest", ALIASES, ids=[a[1] for a in ALIASES])
def test_old_spellings_still_parse_and_are_hidden(command, old, new, dest):
    parser = dict(subcommand_parsers())[command]
    shown = parser.format_help()
    assert old not in shown and (new is None or new in shown)
    required = {"pretrain": ["--data", "s"], "finetune": ["--model", "m", "--data", "d"]}.get(command, [])
    if command == "tokenizer train":
        required = ["--input", "x", "--out", "o"]
    for flag in (old, new):
        if flag:
            assert getattr(parser.parse_args(required + [flag, "3"]), dest) == 3


def test_one_seed_default_for_pretrain_and_finetune():
    from litebert.finetune import FinetuneConfig
    from litebert.pretrain import PretrainConfig

    assert FinetuneConfig().seed == PretrainConfig().seed == 0


def test_version_and_top_level_help_do_not_import_torch():
    code = ("import sys; from litebert.cli import main\n"
            "for argv in (['--version'], ['--help']):\n"
            "    try: main(argv)\n"
            "    except SystemExit as e: assert e.code == 0, e.code\n"
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[0].startswith("litebert ")
    assert "finetune" in out and "pretrain" in out
    assert out.strip().splitlines()[-1] == "False"


def test_a_yaml_config_sets_options_that_the_command_line_overrides(tmp_path):
    pytest.importorskip("yaml")
    from litebert.cli._common import apply_config_file

    (tmp_path / "run.yaml").write_text("data: store/\nmicro-batch-size: 8\nsteps: 50\nmax_time: 30m\n")
    parser = dict(subcommand_parsers())["pretrain"]
    apply_config_file(parser, str(tmp_path / "run.yaml"))
    args = parser.parse_args(["--steps", "70"])  # --data came from the file, so it is no longer required
    assert (args.data, args.micro_batch_size, args.steps, args.max_time) == ("store/", 8, 70, "30m")
