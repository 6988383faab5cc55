"""Promise 10: SIGTERM (a scheduler's notice before preemption) stops `pretrain` cleanly.

The trainer finishes the step it is in, saves a checkpoint of it, prints one line saying where, and exits with
code 143 (128 + SIGTERM); the same command then carries on as if nothing had happened. The signal is real: the test
sends SIGTERM to a real `litebert pretrain` process (stopped with LITEBERT_FAULT=stop:STEP while the signal is
sent, so the moment is exact) and lets it continue.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from harness import (assert_same_weights, checkpoint_steps, finish, kill_tagged, losses, pretrain_args,
                     run_litebert, start, wait_stopped)
from litebert.checkpoint import validate_checkpoint


def test_sigterm_saves_the_step_and_exits_143_then_resume_is_exact(tiny_data, reference_runs, tmp_path):
    single, run = reference_runs["single"], tmp_path / "run"
    proc = start(pretrain_args(tiny_data, run), fault="stop:2")  # about to train step 3 (checkpoints every 2)
    try:
        wait_stopped(proc)
        os.kill(proc.pid, signal.SIGTERM)  # pending until the process runs again
        os.kill(proc.pid, signal.SIGCONT)
        done = finish(proc)
    finally:
        kill_tagged(proc.tag)
    assert done.returncode == 143, done.stderr[-3000:]
    assert f"litebert: SIGTERM: stopped after step 3 and saved checkpoint-3 in {run}" in done.stderr
    assert "Traceback" not in done.stderr
    assert checkpoint_steps(run) == [2, 3]  # step 3 is not a save step: SIGTERM saved it
    validate_checkpoint(run / "checkpoint-3", verify=True)

    again = run_litebert(pretrain_args(tiny_data, run))
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"resumed from {run / 'checkpoint-3'} at step 3" in again.stderr
    assert losses(run) == losses(single)
    assert_same_weights(run / "checkpoint-8", single / "checkpoint-8")


def worker_pid(tag: str, rank: int) -> int:
    """The pid of the torchrun worker with RANK=rank among the processes tagged `tag`."""
    wanted = {f"LITEBERT_TEST_TAG={tag}".encode(), f"RANK={rank}".encode()}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if wanted <= set((entry / "environ").read_bytes().split(b"\0")):
                return int(entry.name)
        except OSError:
            continue
    raise AssertionError(f"no worker with RANK={rank}")


def test_sigterm_on_one_ddp_rank_stops_both_after_the_same_step_then_resume_is_exact(tiny_data, reference_runs,
                                                                                     tmp_path):
    # A scheduler may signal the ranks at different moments (or only one node): the ranks agree through the
    # all-reduce every step does anyway, so both finish step 3, the checkpoint is written once, and both exit 143.
    dual, run = reference_runs["dual"], tmp_path / "run"
    proc = start(pretrain_args(tiny_data, run), nproc=2, fault="stop:2:1")  # rank 1 stops before step 3
    try:
        deadline = time.monotonic() + 300
        while True:  # rank 1 stops itself; rank 0 waits for it in step 3's gradient all-reduce
            try:
                pid = worker_pid(proc.tag, 1)
                if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T":
                    break
            except (AssertionError, OSError):
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "rank 1 never stopped"
            time.sleep(0.05)
        os.kill(pid, signal.SIGTERM)  # rank 1 only
        os.kill(pid, signal.SIGCONT)
        done = finish(proc)
    finally:
        kill_tagged(proc.tag)
    err = done.stderr
    workers = "\n".join(line for line in err.splitlines() if line.startswith("[default"))  # torchrun prefixes
    # (torchrun's agent prints its own ChildFailedError traceback for a non-zero exit; the workers print none)
    assert done.returncode != 0 and "Traceback" not in workers, err[-3000:]
    for rank in (0, 1):  # both ranks stopped after the same step (the checkpoint is rank 0's to write)
        assert f"[default{rank}]:litebert: SIGTERM: stopped after step 3 and saved checkpoint-3 in {run}" in err, \
            err[-3000:]
    # torchrun's failure report: 143 = 128 + SIGTERM (whichever rank it saw exit first; it then signals the other)
    assert "exitcode  : 143" in err, err[-3000:]
    assert checkpoint_steps(run) == [2, 3]
    validate_checkpoint(run / "checkpoint-3", verify=True)

    again = run_litebert(pretrain_args(tiny_data, run), nproc=2)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"resumed from {run / 'checkpoint-3'} at step 3" in again.stderr
    assert losses(run) == losses(dual)
    assert_same_weights(run / "checkpoint-8", dual / "checkpoint-8")
