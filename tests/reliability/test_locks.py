"""Promise 9: one process at a time writes a run or store directory.

`pretrain`, `finetune` and `data build` take an exclusive lock on their output (flock on DIR/.lock, or
.STORE.lock beside a store, which is replaced by a rename); a second process is refused at once with exit code 2,
naming the holder's pid, and touches nothing. The holders here are real second processes: a `litebert pretrain`
that stopped itself (LITEBERT_FAULT=stop:STEP), or a Python process that took the lock and waits.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from harness import (assert_same_weights, finish, kill_tagged, losses, pretrain_args, start, subprocess_env,
                     wait_stopped)
from litebert.cli import main as cli_main


def test_a_second_pretrain_on_the_same_out_is_refused(tiny_data, reference_runs, tmp_path, capsys):
    run = tmp_path / "run"
    first = start(pretrain_args(tiny_data, run), fault="stop:3")  # holds the lock, checkpoint-2 written
    try:
        wait_stopped(first)
        before = sorted(p.name for p in run.rglob("*"))
        assert cli_main(pretrain_args(tiny_data, run)) == 2
        err = capsys.readouterr().err
        assert f"litebert: error: --out {run}: in use by another litebert process (pid {first.pid}" in err
        assert sorted(p.name for p in run.rglob("*")) == before  # the second run removed and wrote nothing
        os.kill(first.pid, signal.SIGCONT)
        done = finish(first)
    finally:
        kill_tagged(first.tag)
    assert done.returncode == 0, done.stderr[-3000:]
    assert losses(run) == losses(reference_runs["single"])  # the first run was not disturbed
    assert_same_weights(run / "checkpoint-8", reference_runs["single"] / "checkpoint-8")


def hold_lock(lock_file) -> subprocess.Popen:
    """A real second process that takes `lock_file` with litebert's lock and waits until killed."""
    code = ("import sys, time; from litebert.files import OutputLock; OutputLock(sys.argv[1], 'test').acquire(); "
            "print('locked', flush=True); time.sleep(600)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(lock_file)], stdout=subprocess.PIPE, text=True,
                            env=subprocess_env())
    assert proc.stdout.readline().strip() == "locked"
    return proc


@pytest.mark.parametrize("command", ["data build", "data merge", "finetune"])
def test_a_held_store_or_run_dir_is_refused(tiny_data, tmp_path, capsys, command):
    store, tokenizer, model = tiny_data
    out = tmp_path / "out"
    parts = [tmp_path / f"p{i}" for i in range(2)]
    if command == "data build":
        lock_file = tmp_path / ".out.lock"
        args = ["data", "build", "--input", str(store.parent / "corpus.txt"), "--tokenizer", str(tokenizer),
                "--out", str(out), "--workers", "1", "--quiet"]
    elif command == "data merge":  # a merge writes a store as a build does: it takes the same lock (before: none)
        docs = (store.parent / "corpus.txt").read_text().split("\n\n")
        halves = [tmp_path / "in" / f"{i}.txt" for i in range(2)]
        halves[0].parent.mkdir()
        for i, half in enumerate(halves):  # two files, so that each of two parts gets one
            half.write_text("\n\n".join(docs[i::2]))
        for i, part in enumerate(parts):
            assert cli_main(["data", "build", "--input", str(halves[0].parent), "--tokenizer", str(tokenizer),
                             "--out", str(part), "--shard", f"{i}/2", "--workers", "1", "--quiet"]) == 0
        capsys.readouterr()
        lock_file = tmp_path / ".out.lock"
        args = ["data", "merge", *map(str, parts), "--out", str(out)]
    else:
        out.mkdir()
        lock_file = out / ".lock"
        args = ["finetune", "sst-2", "--model", str(model), "--data", str(store), "--out", str(out)]
    holder = hold_lock(lock_file)
    try:
        assert cli_main(args) == 2
    finally:
        holder.kill()
        holder.wait()
    err = capsys.readouterr().err
    assert f"--out {out}: in use by another litebert process (pid {holder.pid}" in err and "Traceback" not in err
    assert not out.exists() or sorted(p.name for p in out.iterdir()) in ([], [".lock"])
    if command == "data merge":  # refused before anything moved: the parts are where they were
        assert all((part / "meta.json").is_file() for part in parts)


def test_the_lock_dies_with_its_holder(tiny_data, tmp_path):
    """A SIGKILLed holder leaves no stale lock: the kernel drops it, and the next build goes ahead."""
    from litebert.data.store_build import build_store

    store, tokenizer, _ = tiny_data
    holder = hold_lock(tmp_path / ".out.lock")
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    built = build_store([store.parent / "corpus.txt"], tokenizer, tmp_path / "out", workers=1)
    assert built.num_documents("train") > 0


def build_args(tiny_data, out) -> list[str]:
    store = tiny_data[0]
    return ["data", "build", "--input", str(store.parent / "corpus.txt"), "--tokenizer", str(tiny_data[1]),
            "--out", str(out), "--workers", "1", "--quiet"]


def test_a_deleted_store_lock_file_does_not_let_a_second_build_in(tiny_data, tmp_path, capsys):
    """A real `data build` holds the store's lock (stopped by LITEBERT_FAULT=stop:0 once its locks are taken); its
    .STORE.lock file is then really deleted. A second build of that store is still refused (before: it locked a new
    file and built alongside), while a build of another store in the same folder goes ahead; the first build then
    finishes with a store equal to one built alone."""
    from litebert.data.store import TokenStore

    out = tmp_path / "out"
    first = start(build_args(tiny_data, out), fault="stop:0")
    try:
        wait_stopped(first)
        (tmp_path / ".out.lock").unlink()
        assert cli_main(build_args(tiny_data, out)) == 2
        err = capsys.readouterr().err
        assert f"--out {out}: in use by another litebert process (pid {first.pid}" in err and "Traceback" not in err
        assert cli_main(build_args(tiny_data, tmp_path / "other")) == 0  # another store: not blocked
        os.kill(first.pid, signal.SIGCONT)
        done = finish(first)
    finally:
        kill_tagged(first.tag)
    assert done.returncode == 0, done.stderr[-3000:]
    built, alone = TokenStore.open(out), TokenStore.open(tmp_path / "other")
    assert built.content_fingerprint == alone.content_fingerprint
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith((".out.tmp-", ".out.old-"))]
