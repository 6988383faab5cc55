"""Promise 4: a non-finite loss follows --nan-policy, the same way on every rank.

The fault `LITEBERT_FAULT=nan_loss:3[:1]` makes the loss of step 4 (the one after checkpoint-3) NaN, on rank 1
only when a rank is given; the NaN reaches the gradients through autograd, as an overflow would.

- error: every rank stops, rank 0 too although its own loss was finite; the message names the step; the exit code
  is 2; the last checkpoint is intact and nothing after it was saved.
- skip: the update of that step is not applied (weights and optimizer moments before and after it are equal), the
  step is counted (`skipped`, `nan_skipped` in metrics.jsonl), training goes on exactly as a 1-process run with
  the same skip, and --nan-budget is enforced, also across a restart.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

from harness import (assert_same_weights, checkpoint_steps, config_args, leftovers, losses, pretrain_args,
                     read_metrics, read_weights, run_litebert)
from litebert.checkpoint import load_state, validate_checkpoint
from litebert.cli import main as cli_main
from litebert.errors import TrainingError
from litebert.pretrain import PretrainConfig, pretrain


def test_error_policy_stops_every_rank_and_keeps_the_last_checkpoint(tiny_data, reference_runs, tmp_path):
    run = tmp_path / "run"
    proc = run_litebert(pretrain_args(tiny_data, run, nan_policy="error"), nproc=2, fault="nan_loss:3:1")
    assert proc.returncode != 0
    # Rank 0 never saw a NaN of its own: it stops because the decision is taken on all-reduced numbers.
    assert "[default0]:litebert: error: step 4: non-finite loss or gradient" in proc.stderr, proc.stderr[-3000:]
    assert "exitcode  : 2" in proc.stderr
    assert checkpoint_steps(run) == [2] and not leftovers(run)
    validate_checkpoint(run / "checkpoint-2", verify=True)
    assert_same_weights(run / "checkpoint-2", reference_runs["dual"] / "checkpoint-2")
    assert sorted(read_metrics(run)) == [1, 2, 3]


def test_error_policy_exits_2_with_the_step_on_stderr(tiny_data, tmp_path, monkeypatch, capsys):
    run = tmp_path / "run"
    monkeypatch.setenv("LITEBERT_FAULT", "nan_loss:3")
    assert cli_main(pretrain_args(tiny_data, run, nan_policy="error")) == 2
    err = capsys.readouterr().err
    assert "litebert: error: step 4: non-finite loss or gradient" in err and "Traceback" not in err
    assert checkpoint_steps(run) == [2]
    validate_checkpoint(run / "checkpoint-2", verify=True)


def test_skip_policy_skips_the_step_on_every_rank_and_counts_it(tiny_data, tmp_path, monkeypatch):
    run = tmp_path / "run"
    opts = dict(nan_policy="skip", nan_budget=1, save_every=1)
    proc = run_litebert(pretrain_args(tiny_data, run, **opts), nproc=2, fault="nan_loss:3:1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = read_metrics(run)
    assert [rows[s]["skipped"] for s in range(1, 9)] == [False] * 3 + [True] + [False] * 4
    assert [rows[s]["nan_skipped"] for s in range(1, 9)] == [0] * 3 + [1] * 5
    # Step 4 changed nothing: the weights and the optimizer's moments after it are those before it.
    assert_same_weights(run / "checkpoint-3", run / "checkpoint-4")
    before, after = (load_state(run / f"checkpoint-{s}" / "trainer_state.pt") for s in (3, 4))
    for a, b in zip(before["optimizer"]["state"].values(), after["optimizer"]["state"].values(), strict=True):
        assert all(torch.equal(a[k], b[k]) for k in a)
    assert after["nan_skipped"] == 1
    assert after["scheduler"]["last_epoch"] == before["scheduler"]["last_epoch"] + 1  # the schedule moves on
    w4, w5 = read_weights(run / "checkpoint-4"), read_weights(run / "checkpoint-5")
    assert any(not torch.equal(w4[k], w5[k]) for k in w4)  # and training goes on
    assert all(torch.isfinite(t).all() for t in read_weights(run / "checkpoint-8").values())

    # The same skip in one process: if any rank had applied the NaN update the runs would part ways.
    single = tmp_path / "single"
    monkeypatch.setenv("LITEBERT_FAULT", "nan_loss:3")
    pretrain(PretrainConfig(**config_args(tiny_data, single, **{**opts, "save_every": 8})))
    np.testing.assert_allclose(losses(run), losses(single), rtol=0, atol=1e-5)
    assert_same_weights(run / "checkpoint-8", single / "checkpoint-8", atol=1e-5)


def test_nan_budget_is_enforced_across_a_restart(tiny_data, tmp_path, monkeypatch):
    first, second = tmp_path / "first", tmp_path / "second"
    opts = dict(nan_policy="skip", nan_budget=1)
    monkeypatch.setenv("LITEBERT_FAULT", "nan_loss:1")
    pretrain(PretrainConfig(**config_args(tiny_data, first, **opts)))  # one skip: within the budget
    assert read_metrics(first)[8]["nan_skipped"] == 1
    # Restart from checkpoint-4 (which counts that skip); one more non-finite step is over the budget.
    second.mkdir()
    shutil.copytree(first / "checkpoint-4", second / "checkpoint-4")
    monkeypatch.setenv("LITEBERT_FAULT", "nan_loss:5")
    with pytest.raises(TrainingError, match=r"step 6: 2 non-finite steps skipped, over the budget --nan-budget 1"):
        pretrain(PretrainConfig(**config_args(tiny_data, second, **opts)))
    assert checkpoint_steps(second) == [4]
    validate_checkpoint(second / "checkpoint-4", verify=True)
