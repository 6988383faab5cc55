"""Promise 10: SIGTERM (a scheduler's notice before preemption) stops `pretrain` cleanly.

The trainer finishes the step it is in, saves a checkpoint of it, prints one line saying where, and exits with
code 143 (128 + SIGTERM); the same command then carries on as if nothing had happened. The signal is real: the test
sends SIGTERM to a real `litebert pretrain` process (stopped with LITEBERT_FAULT=stop:STEP while the signal is
sent, so the moment is exact) and lets it continue.
"""

from __future__ import annotations

import os
import signal

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
