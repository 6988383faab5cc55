"""Promise 1: a checkpoint is complete or invisible.

The trainer is SIGKILLed at every stage of writing a checkpoint: once the temp dir exists but holds nothing, then
after each of its files in turn, the last time with every file written but no COMMIT marker and no rename. Each
relaunch with `--resume auto` must pick the newest complete checkpoint, remove what the killed save left, and carry
on; the run that finally gets through must end exactly where an uninterrupted run ends (the same per-step losses,
the same weights and optimizer state, bit for bit).
"""

from __future__ import annotations

import shutil
import signal
from concurrent.futures import ThreadPoolExecutor

import torch

from harness import (EPOCH_RUN, assert_same_weights, checkpoint_steps, leftovers, losses, pretrain_args,
                     run_litebert)
from litebert.checkpoint import COMMIT, find_latest_checkpoint, load_state, validate_checkpoint


def crash_through_stages(data, run, stages: list[int], junk_at: int | None = None) -> None:
    """Attempt j (j = 0, 1, ...) is killed while saving checkpoint-(j+2), after writing stages[j] of its files
    (0: only the temp dir exists). Every relaunch resumes; the last one runs to the end."""
    args = pretrain_args(data, run, **{**EPOCH_RUN, "save_every": 1, "keep": 2})
    for j, k in enumerate(stages):
        step = j + 2
        if j == junk_at:
            # Debris no save of ours leaves but a cruder writer could: a newer checkpoint dir without COMMIT,
            # holding a state file that must never be read.
            junk = run / "checkpoint-99"
            junk.mkdir()
            (junk / "trainer_state.pt").write_bytes(b"half a file")
        proc = run_litebert(args, fault=f"kill_after_file:{step}:{k}")
        assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
        if j:  # the previous attempt died saving checkpoint-(step-1)
            assert f"resumed from {run / f'checkpoint-{step - 2}'} at step {step - 2}" in proc.stderr
        # The killed save is only a temp dir holding exactly the k files written so far, and no COMMIT.
        (tmp,) = leftovers(run)
        assert tmp.name.startswith(f".tmp-checkpoint-{step}-")
        assert len(list(tmp.iterdir())) == k and not (tmp / COMMIT).exists()
        assert not (run / f"checkpoint-{step}").exists()
        # What resume will pick: the checkpoint before, complete down to every byte.
        assert find_latest_checkpoint(run) == run / f"checkpoint-{step - 1}"
        validate_checkpoint(run / f"checkpoint-{step - 1}", verify=True)
    final = run_litebert(args)
    assert final.returncode == 0, final.stderr[-3000:]
    last = len(stages)
    assert f"resumed from {run / f'checkpoint-{last}'} at step {last}" in final.stderr
    assert not leftovers(run) and not (run / "checkpoint-99").exists()
    assert checkpoint_steps(run) == [EPOCH_RUN["steps"] - 1, EPOCH_RUN["steps"]]  # keep=2 pruned the rest


def assert_same_end(run, reference) -> None:
    """The same per-step losses, weights, optimizer state and data position as the uninterrupted run, bit for bit."""
    assert losses(run) == losses(reference)
    end = f"checkpoint-{EPOCH_RUN['steps']}"
    assert_same_weights(run / end, reference / end)
    ours, theirs = load_state(run / end / "trainer_state.pt"), load_state(reference / end / "trainer_state.pt")
    for a, b in zip(ours["optimizer"]["state"].values(), theirs["optimizer"]["state"].values(), strict=True):
        assert a.keys() == b.keys() and all(torch.equal(a[key], b[key]) for key in a)
    assert ours["data"] == theirs["data"] and ours["step"] == theirs["step"]


def test_sigkill_at_every_stage_of_a_save_then_resume_auto(tiny_data, reference_runs, tmp_path):
    reference = reference_runs["epochs"]
    files = [p.name for p in (reference / "checkpoint-3").iterdir() if p.name != COMMIT]
    assert len(files) >= 5  # weights, config, tokenizer files, trainer state
    # Stages 0 .. len(files), the last one = every file written but no COMMIT and no rename; split over two
    # independent runs that go side by side (each crash costs a process start).
    stages = list(range(len(files) + 1))
    halves = {tmp_path / "a": stages[::2], tmp_path / "b": stages[1::2]}
    with ThreadPoolExecutor(2) as pool:
        jobs = [pool.submit(crash_through_stages, tiny_data, run, ks, junk_at=1 if i else None)
                for i, (run, ks) in enumerate(halves.items())]
        for job in jobs:
            job.result()
    for run in halves:
        assert_same_end(run, reference)


def test_a_checkpoint_whose_files_do_not_match_its_commit_is_skipped(tiny_data, reference_runs, tmp_path):
    """A committed checkpoint damaged afterwards (a truncated file) is never loaded: resume takes the one before,
    and the damaged one is kept for a person to look at."""
    run = tmp_path / "run"
    shutil.copytree(reference_runs["single"], run)
    weights = run / "checkpoint-8" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    proc = run_litebert(pretrain_args(tiny_data, run))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"resumed from {run / 'checkpoint-6'} at step 6" in proc.stderr
    assert_same_weights(run / "checkpoint-8", reference_runs["single"] / "checkpoint-8")
    assert losses(run) == losses(reference_runs["single"])
