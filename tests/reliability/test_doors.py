"""Promise 14: every door checks what comes through it as the command line does.

An option's type and rule live on its field (`config.option(..., check=...)`), so the library, the command line
and a --config file accept and refuse the same values with the same message; a --config value of the wrong type
(the string "false" for a switch, 3.7 for a step count, a list where a path goes) is refused naming the file, the
key, the value and the type expected. JSON and YAML are read only from regular files of bounded size (a FIFO or
/dev/zero is refused at once, naming the file). A run directory's lock holds even when its lock file is deleted.
The faults are real: a FIFO, /dev/zero, a second process holding the lock.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from harness import pretrain_args, subprocess_env
from litebert.cli import main as cli_main
from litebert.errors import ConfigError

FINETUNE = ["finetune", "sst-2", "--model", "M", "--data", "D"]


@pytest.mark.parametrize("key, value, expected", [
    ("overwrite", "false", r"key 'overwrite' = 'false': expected true or false \(a boolean\), got a string"),
    ("steps", 3.7, r"key 'steps' = 3.7: expected an integer, got a number"),
    ("steps", True, r"key 'steps' = True: expected an integer, got a boolean"),
    ("out", ["a", "b"], r"key 'out' = \['a', 'b'\]: expected a string, got a list"),
    ("out", {"a": 1}, r"key 'out' = \{'a': 1\}: expected a string, got a mapping"),
    ("out", None, r"key 'out' = null: expected a string, not null"),
    ("data", 7, r"key 'data' = 7: expected a string, got an integer"),
    ("lr", 2.0, r"key 'lr' = 2.0: must be in \(0, 1\]"),
    ("optimizer", "sgd", r"key 'optimizer' = sgd: must be adamw, lamb or adamw_official"),
])
def test_a_config_value_of_the_wrong_type_is_refused_naming_file_key_and_type(tmp_path, capsys, key, value,
                                                                             expected):
    """Today "overwrite": "false" counts as true (it deleted a finished run), 3.7 steps trains 4, a list is a
    traceback. The finetune run is refused before it touches --out."""
    import re

    out = tmp_path / "out"
    config = tmp_path / "options.json"
    options = {"task": "sst-2", "model": "M", "data": "D", "out": str(out), key: value}
    config.write_text(json.dumps(options))
    assert cli_main(["finetune", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert re.search(rf"^litebert: error: --config {re.escape(str(config))}: {expected}", err), err
    assert "Traceback" not in err and not out.exists()


def test_pretrain_config_compile_no_is_refused(tmp_path, capsys):
    config = tmp_path / "options.yaml"
    config.write_text("data: S\ncompile: no\n")  # YAML 1.1 reads `no` as false: a real boolean, accepted
    assert cli_main(["pretrain", "--config", str(config), "--print-config"]) == 0
    assert json.loads(capsys.readouterr().out)["compile"] is False
    config = tmp_path / "options.json"
    config.write_text(json.dumps({"data": "S", "compile": "no"}))
    assert cli_main(["pretrain", "--config", str(config)]) == 2
    assert "key 'compile' = 'no': expected true or false" in capsys.readouterr().err


@pytest.mark.parametrize("options, message", [
    (dict(lr=0.0), "--lr 0.0: must be in (0, 1]"),  # today: silently the task's default
    (dict(lr=5.0), "--lr 5.0: must be in (0, 1]"),  # today: accepted by the library, refused by the CLI
    (dict(steps=3.7), "--steps 3.7: expected an integer, got a number"),
    (dict(overwrite="false"), "--overwrite 'false': expected true or false (a boolean), got a string"),
    (dict(optimizer="sgd"), "--optimizer sgd: must be adamw, lamb or adamw_official"),
])
def test_the_library_refuses_what_the_command_line_refuses(options, message, capsys):
    from litebert.finetune import FinetuneConfig

    with pytest.raises(ConfigError) as exc:
        FinetuneConfig(model="M", data="D", **options)
    assert str(exc.value) == message
    (name, value), = options.items()
    if name in ("lr", "optimizer"):  # values argparse can parse: the command line says the same words
        assert cli_main(FINETUNE + ["--" + name, str(value)]) == 2
        assert capsys.readouterr().err.strip() == f"litebert: error: {message}"


@pytest.mark.parametrize("options, message", [
    (dict(port=70000), "--port 70000: must be in [1, 65535]"),
    (dict(timeout_s=0), "--timeout-s 0.0: must be > 0"),
])
def test_serve_settings_are_checked_at_start(options, message, capsys):
    from litebert.serving import ServeConfig

    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        ServeConfig(model="M", **options)
    flag, value = "--" + next(iter(options)).replace("_", "-"), str(next(iter(options.values())))
    assert cli_main(["serve", "--model", "M", flag, value]) == 2
    assert f"litebert: error: {message}" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["pretrain", "finetune"])
def test_print_config_output_reproduces_the_options(tmp_path, capsys, command):
    """--print-config prints defaults + file + flags in the form --config reads, and runs nothing; --config of that
    output gives the same options back."""
    out = tmp_path / "out"
    first = tmp_path / "first.yaml"
    first.write_text("steps: 7\nseed: 3\n")
    args = ([command, "--data", "S", "--out", str(out), "--config", str(first), "--lr", "0.001"]
            + (["sst-2", "--model", "M"] if command == "finetune" else []))
    assert cli_main(args + ["--print-config"]) == 0
    printed = capsys.readouterr().out
    options = json.loads(printed)
    assert (options["steps"], options["seed"], options["lr"], options["data"]) == (7, 3, 0.001, "S")
    assert not out.exists()
    saved = tmp_path / "printed.json"
    saved.write_text(printed)
    assert cli_main([command, "--config", str(saved), "--print-config"]) == 0
    assert capsys.readouterr().out == printed


# --------------------------------------------------------------------------------- bounded reads


def test_a_fifo_or_dev_zero_as_config_is_refused_at_once(tmp_path, capsys):
    fifo = tmp_path / "options.json"
    os.mkfifo(fifo)  # no writer: reading it would block for ever
    started = time.monotonic()
    assert cli_main(["pretrain", "--config", str(fifo)]) == 2
    assert time.monotonic() - started < 5
    assert f"--config {fifo}: not a regular file (a FIFO)" in capsys.readouterr().err
    assert cli_main(["pretrain", "--config", "/dev/zero"]) == 2  # today: grows until the OOM killer
    assert "--config /dev/zero: not a regular file (a device)" in capsys.readouterr().err
    big = tmp_path / "big.json"
    big.write_text(" " * (2 ** 20 + 1))
    assert cli_main(["pretrain", "--config", str(big)]) == 2
    assert f"--config {big}: 1,048,577 bytes is over the 1,048,576-byte limit" in capsys.readouterr().err


# --------------------------------------------------------------------------------- the lock


def test_a_deleted_lock_file_does_not_let_a_second_pretrain_in(tiny_data, tmp_path, capsys):
    """A real second process holds the run directory's lock; its lock file is then deleted (as a tmp cleaner
    would). Today the next pretrain creates a new lock file, locks it, and trains alongside."""
    out = tmp_path / "run"
    out.mkdir()
    code = ("import sys, time; from litebert.files import lock_dir; lock_dir(sys.argv[1]); "
            "print('locked', flush=True); time.sleep(600)")
    holder = subprocess.Popen([sys.executable, "-c", code, str(out)], stdout=subprocess.PIPE, text=True,
                              env=subprocess_env())
    try:
        assert holder.stdout.readline().strip() == "locked"
        (out / ".lock").unlink()
        assert cli_main(pretrain_args(tiny_data, out)) == 2
    finally:
        holder.kill()
        holder.wait()
    err = capsys.readouterr().err
    assert f"--out {out}: in use by another litebert process" in err and "Traceback" not in err
    assert f"(pid {holder.pid}, which holds {out})" in err, err  # from /proc/locks (before: "pid unknown")
    assert sorted(p.name for p in out.iterdir()) == [".lock"]  # the refused run wrote nothing
