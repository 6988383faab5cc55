"""Promise 6: a full disk or a read-only output gives a clear error (exit code 2, the path and the reason, no
traceback), and what was there before is intact.

The faults are real: each run writes to a tmpfs of its own (tests/reliability/harness.SmallDisk), which the test
fills or remounts read-only while the trainer is stopped (LITEBERT_FAULT=stop:STEP sends it SIGSTOP), so the
errors come from the real writers: safetensors' Rust code, torch's zip writer, Python's file writes, mkdir.
Mounting needs root; elsewhere these tests skip, saying why.
"""

from __future__ import annotations

import json
import os
import signal
import sys

import pytest

from harness import (assert_same_weights, checkpoint_steps, finish, kill_tagged, leftovers, losses, pages,
                     pretrain_args, run_litebert, start, wait_stopped)
from litebert.checkpoint import validate_checkpoint


def file_sizes(ckpt) -> dict[str, int]:
    return {name: info["size"] for name, info in json.loads((ckpt / "COMMIT").read_text())["files"].items()}


def stopped_run(tiny_data, run, step: int, **overrides):
    """A `litebert pretrain` process that has stopped itself at the start of the step after `step`."""
    proc = start(pretrain_args(tiny_data, run, **overrides), fault=f"stop:{step}")
    wait_stopped(proc)
    return proc


def resume(proc) -> object:
    os.kill(proc.pid, signal.SIGCONT)
    return finish(proc)


@pytest.mark.parametrize("writer", ["safetensors", "torch.save"])
def test_disk_full_inside_a_checkpoint_writer(tiny_data, reference_runs, small_disk, writer):
    """The disk fills up while checkpoint-4's weights (safetensors) or training state (torch.save) are written:
    `could not save checkpoint-4: the disk is full` naming that file, exit 2, no temp dir left, checkpoint-2 intact;
    once there is space, --resume auto finishes the run bit for bit like the uninterrupted one."""
    single = reference_runs["single"]
    sizes = file_sizes(single / "checkpoint-4")
    # Room for what is written before the failing file, and half of that file; a page of slack for metrics.jsonl.
    before = {"safetensors": [], "torch.save": [s for n, s in sizes.items() if n != "trainer_state.pt"]}[writer]
    failing = {"safetensors": "model.safetensors", "torch.save": "trainer_state.pt"}[writer]
    disk = small_disk.mount()
    run = disk / "run"
    proc = stopped_run(tiny_data, run, 3)
    try:
        filler = small_disk.fill(disk, pages(*before) + sizes[failing] // 2 + 4096)
        done = resume(proc)
    finally:
        kill_tagged(proc.tag)
    assert done.returncode == 2, done.stderr[-3000:]
    assert f"{failing}: could not save checkpoint-4: the disk is full" in done.stderr, done.stderr[-700:]
    assert "earlier checkpoints" in done.stderr and "Traceback" not in done.stderr
    assert checkpoint_steps(run) == [2] and not leftovers(run)
    validate_checkpoint(run / "checkpoint-2", verify=True)
    assert_same_weights(run / "checkpoint-2", single / "checkpoint-2")

    filler.unlink()  # space again
    again = run_litebert(pretrain_args(tiny_data, run))
    assert again.returncode == 0, again.stderr[-3000:]
    assert losses(run) == losses(single)
    assert_same_weights(run / "checkpoint-8", single / "checkpoint-8")


@pytest.mark.parametrize("log_every, failing", [(8, "could not save checkpoint-4: the file system is read-only"),
                                                (1, "metrics.jsonl: cannot write the metrics log (Read-only")])
def test_file_system_turns_read_only_during_a_run(tiny_data, reference_runs, small_disk, log_every, failing):
    """The run's file system is remounted read-only after checkpoint-2: the next write (checkpoint-4's, or the
    metrics line of step 4) fails with exit 2 and the reason; checkpoint-2 is intact."""
    disk = small_disk.mount()
    run = disk / "run"
    proc = stopped_run(tiny_data, run, 3, log_every=log_every)
    try:
        small_disk.remount(disk, "ro")
        done = resume(proc)
    finally:
        kill_tagged(proc.tag)
    assert done.returncode == 2, done.stderr[-3000:]
    assert failing in done.stderr and "Traceback" not in done.stderr
    assert checkpoint_steps(run) == [2] and not leftovers(run)
    validate_checkpoint(run / "checkpoint-2", verify=True)
    assert_same_weights(run / "checkpoint-2", reference_runs["single"] / "checkpoint-2")


# ------------------------------------------------------------------------------------------ every command


def command_args(tiny_data, out, command: str) -> tuple[list[str], str]:
    """(arguments, flag) of `command` writing to `out`; the inputs are real but never reached when the output is
    checked first, as it must be."""
    store, tokenizer, model = tiny_data
    corpus = store.parent / "corpus.txt"
    return {
        "pretrain": (pretrain_args(tiny_data, out), "--out"),
        "tokenizer train": (["tokenizer", "train", "--input", str(corpus), "--out", str(out), "--vocab-size", "100"],
                            "--out"),
        "data build": (["data", "build", "--input", str(corpus), "--tokenizer", str(tokenizer), "--out", str(out),
                        "--workers", "1"], "--out"),
        "finetune": (["finetune", "sst-2", "--model", str(model), "--data", str(store), "--out", str(out)], "--out"),
        "convert": (["convert", str(store), "--out", str(out)], "--out"),
        "export-onnx": (["export-onnx", str(store), "--task", "classification", "--out", str(out)], "--out"),
        "predict": (["predict", "sst-2", "--model", str(store), "--input", str(corpus), "--output", str(out)],
                    "--output"),
    }[command]


COMMANDS = ["pretrain", "tokenizer train", "data build", "finetune", "convert", "export-onnx", "predict"]


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("where", ["existing file", "under a file", "read-only", "full"])
def test_an_unwritable_output_is_refused_at_start(tiny_data, small_disk, tmp_path, capsys, command, where):
    """Every command that writes refuses an output it cannot write before doing any work: exit 2, the flag, the
    path and the reason, no traceback. Read-only and full are real (a tmpfs remounted ro, a filled tmpfs)."""
    from litebert.cli import main as cli_main

    reason = {"existing file": "is an existing file", "under a file": "Not a directory",
              "read-only": "Read-only file system", "full": "No space left on device"}[where]
    if where in ("existing file", "under a file"):
        blocker = tmp_path / "blocker"
        blocker.write_text("not a directory\n")
        out = blocker if where == "existing file" else blocker / "out"
        if command == "predict" and where == "existing file":
            out, reason = tmp_path, "Is a directory"  # a file output is refused where a directory stands
    else:
        disk = small_disk.mount(size=1 << 20)
        if where == "read-only":
            small_disk.remount(disk, "ro")
        else:
            small_disk.fill(disk, 0)
        out = disk / "out"
    args, flag = command_args(tiny_data, out, command)
    assert cli_main(args) == 2
    err = capsys.readouterr().err
    assert f"litebert: error: {flag} {out}: cannot write there (" in err and reason in err, err
    assert "Traceback" not in err


def test_data_build_on_a_full_disk(tiny_data, small_disk, capsys):
    """The store does not fit: exit 2 with the reason, no temp dir and no store left behind."""
    from litebert.cli import main as cli_main

    store, tokenizer, _ = tiny_data
    disk = small_disk.mount(size=160 << 10)  # less than the store and its tokenizer copy
    out = disk / "store"
    args = ["data", "build", "--input", str(store.parent / "corpus.txt"), "--tokenizer", str(tokenizer),
            "--out", str(out), "--workers", "1", "--quiet"]
    assert cli_main(args) == 2
    err = capsys.readouterr().err
    assert f"litebert: error: --out {out}: the build stopped: the disk is full" in err and "Traceback" not in err
    assert sorted(p.name for p in disk.iterdir() if not p.name.endswith(".lock")) == []


def test_convert_on_a_full_disk(reference_runs, small_disk, capsys):
    """The converted weights do not fit (safetensors' own ENOSPC): exit 2 naming the file and the reason."""
    from litebert.cli import main as cli_main

    disk = small_disk.mount(size=64 << 10)
    out = disk / "model"
    assert cli_main(["convert", str(reference_runs["single"] / "checkpoint-8"), "--from", "hf", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "model.safetensors: cannot write (the disk is full" in err and "Traceback" not in err, err
    assert not [p for p in out.iterdir() if p.name.startswith(".model.safetensors.tmp")]


if sys.platform != "linux":  # tmpfs and /proc are Linux's
    pytestmark = pytest.mark.skip(reason="real disk faults use tmpfs mounts (Linux)")


def test_predict_on_a_full_disk(reference_runs, small_disk, tmp_path, capsys):
    """3,000 predictions do not fit: exit 2 naming the file and the reason, and no predictions file at all (it
    used to leave a truncated one that looked finished)."""
    from litebert.cli import main as cli_main
    from litebert.finetune import FinetuneConfig, finetune

    rows = ["text,label"] + [f"sentence number {i} about things,{i % 2}" for i in range(16)]
    for split in ("train", "dev"):
        (tmp_path / f"{split}.csv").write_text("\n".join(rows) + "\n")
    custom = dict(format="csv", text_columns="text", label_column="label")
    finetune(FinetuneConfig(task="custom", model=str(reference_runs["single"] / "checkpoint-8"), data=str(tmp_path),
                            out=str(tmp_path / "ft"), steps=2, batch_size=4, max_seq_length=32, precision="fp32",
                            **custom))
    many = tmp_path / "many.csv"
    many.write_text("text,label\n" + "".join(f"sentence {i} about other things,0\n" for i in range(3000)))
    disk = small_disk.mount(size=64 << 10)
    out = disk / "predictions.jsonl"
    args = ["predict", "custom", "--model", str(tmp_path / "ft"), "--input", str(many), "--output", str(out),
            "--max-seq-length", "32", *[x for k, v in custom.items() for x in (f"--{k.replace('_', '-')}", v)]]
    assert cli_main(args) == 2
    err = capsys.readouterr().err
    assert f"{out}: cannot write (the disk is full" in err and "Traceback" not in err, err
    assert list(disk.iterdir()) == []
