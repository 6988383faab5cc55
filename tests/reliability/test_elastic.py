"""Promise 3: elastic restarts under torchrun, and data parallelism that changes nothing but speed.

- `torchrun --nproc-per-node 2 --max-restarts 1` (gloo, CPU): rank 1 SIGKILLs itself once at the start of step 6;
  torchrun restarts both workers, they resume from checkpoint-4, and the job ends with the loss curve and the
  weights of the uninterrupted 2-process run, bit for bit.
- When the restart budget is spent the job fails (non-zero exit) and the last checkpoint is intact.
- 2 processes (micro-batch 8, no accumulation) give the losses and weights of 1 process (micro-batch 8 x 2
  accumulation steps) at the same global batch of 16, within 1e-5 in fp32.
"""

from __future__ import annotations

import numpy as np

from harness import assert_same_weights, checkpoint_steps, leftovers, losses, pretrain_args, run_litebert
from litebert.checkpoint import validate_checkpoint


def test_torchrun_restart_after_a_rank_dies_matches_the_uninterrupted_run(tiny_data, reference_runs, tmp_path):
    run, once = tmp_path / "run", tmp_path / "fault-fired"
    proc = run_litebert(pretrain_args(tiny_data, run), nproc=2, max_restarts=1, fault="kill:5:1",
                        LITEBERT_FAULT_ONCE=str(once))
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert once.exists()  # rank 1 really died once
    assert f"resumed from {run / 'checkpoint-4'} at step 4" in proc.stderr
    dual = reference_runs["dual"]
    assert losses(run) == losses(dual)
    assert_same_weights(run / "checkpoint-8", dual / "checkpoint-8")
    assert not leftovers(run)


def test_torchrun_gives_up_when_the_restart_budget_is_spent(tiny_data, tmp_path):
    run = tmp_path / "run"
    proc = run_litebert(pretrain_args(tiny_data, run), nproc=2, max_restarts=1, fault="kill:5:1")  # every attempt
    assert proc.returncode != 0
    assert "ChildFailedError" in proc.stderr, proc.stderr[-3000:]
    assert f"resumed from {run / 'checkpoint-4'} at step 4" in proc.stderr  # the one restart was used
    assert checkpoint_steps(run) == [2, 4]
    validate_checkpoint(run / "checkpoint-4", verify=True)


def test_two_processes_match_one_process_at_the_same_global_batch(reference_runs):
    single, dual = reference_runs["single"], reference_runs["dual"]
    np.testing.assert_allclose(losses(dual), losses(single), rtol=0, atol=1e-5)
    for key in ("mlm_loss", "sop_loss", "grad_norm"):
        np.testing.assert_allclose(losses(dual, key), losses(single, key), rtol=0, atol=1e-5)
    for key in ("mlm_acc", "sop_acc"):
        assert losses(dual, key) == losses(single, key)
    assert_same_weights(dual / "checkpoint-8", single / "checkpoint-8", atol=1e-5)
