"""Promise 2: resume is exact.

Same world size: a run stopped (SIGKILL) at several points and resumed with `--resume auto` gives bit-identical
per-step losses, weights, optimizer state and data position to a run straight through, with 2 DataLoader workers,
across an epoch boundary (epoch 0 ends inside step 11, between the two micro-batches of that step).

Another world size: a 1-process run resumed by 2 processes deals the rest of the epoch's global sample order
among the new ranks, so no example is skipped or repeated within the epoch. Checked two ways: end to end (each
resumed step holds the same examples as the 1-process step, so the losses agree within fp32 rounding), and as a
property of the re-sharding for any world sizes, micro-batch sizes and stopping points.
"""

from __future__ import annotations

import shutil
import signal

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import (EPOCH_RUN, assert_same_weights, config_args, losses, pretrain_args, read_metrics,
                     run_litebert)
from litebert.checkpoint import load_state
from litebert.data.pretraining import BatchStream, ResumableSampler
from litebert.pretrain import PretrainConfig, pretrain


def test_stop_and_resume_is_bitwise_exact(tiny_data, reference_runs, tmp_path):
    reference, run = reference_runs["epochs"], tmp_path / "run"
    args = pretrain_args(tiny_data, run, **EPOCH_RUN)
    # Checkpoints every 3 steps. Killed at the start of step 5 (resumes from 3: mid-epoch), of step 11 (from 9:
    # step 11 takes the last micro-batch of epoch 0 and the first of epoch 1) and of step 14 (from 12: in epoch 1).
    for kill, resumed in ((4, None), (10, 3), (13, 9)):
        proc = run_litebert(args, fault=f"kill:{kill}")
        assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
        if resumed is not None:
            assert f"resumed from {run / f'checkpoint-{resumed}'} at step {resumed}" in proc.stderr
    proc = run_litebert(args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"resumed from {run / 'checkpoint-12'} at step 12" in proc.stderr

    assert load_state(run / "checkpoint-12" / "trainer_state.pt")["data"]["epoch"] == 1  # crossed the boundary
    assert losses(run) == losses(reference)
    for key in ("mlm_acc", "sop_acc", "grad_norm", "lr"):
        assert losses(run, key) == losses(reference, key)
    for step in (12, 14):
        assert_same_weights(run / f"checkpoint-{step}", reference / f"checkpoint-{step}")
        ours = load_state(run / f"checkpoint-{step}" / "trainer_state.pt")
        theirs = load_state(reference / f"checkpoint-{step}" / "trainer_state.pt")
        assert ours["data"] == theirs["data"] and ours["scheduler"] == theirs["scheduler"]
        for a, b in zip(ours["optimizer"]["state"].values(), theirs["optimizer"]["state"].values(), strict=True):
            assert all(torch.equal(a[k], b[k]) for k in a)


def test_resume_on_another_world_size_continues_the_epoch(tiny_data, reference_runs, tmp_path):
    """1 process to step 4, then 2 processes to step 8 (all inside epoch 0): every later step sees the examples
    the 1-process run saw, so the losses and weights agree with it within fp32 rounding (1e-5)."""
    single, run = reference_runs["single"], tmp_path / "run"
    run.mkdir()
    shutil.copytree(single / "checkpoint-4", run / "checkpoint-4")
    shutil.copy(single / "metrics.jsonl", run / "metrics.jsonl")  # resume cuts it back to step 4
    proc = run_litebert(pretrain_args(tiny_data, run), nproc=2)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"resumed from {run / 'checkpoint-4'} at step 4" in proc.stderr

    state = load_state(run / "checkpoint-8" / "trainer_state.pt")
    assert state["world_size"] == 2
    assert state["data"]["epoch"] == 0 and state["data"]["offset"] == 4 * 16  # 4 steps of 16 examples were done
    ours, theirs = losses(run), losses(single)
    assert ours[:4] == theirs[:4]
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-5)
    np.testing.assert_allclose(losses(run, "sop_acc"), losses(single, "sop_acc"), rtol=0, atol=1e-12)
    assert_same_weights(run / "checkpoint-8", single / "checkpoint-8", atol=1e-5)


@settings(max_examples=300, deadline=None, database=None)
@given(n=st.integers(1, 400), seed=st.integers(0, 2**31), epoch=st.integers(0, 5),
       worlds=st.lists(st.integers(1, 8), min_size=2, max_size=4), micros=st.lists(st.integers(1, 3), min_size=4,
       max_size=4), scale=st.sampled_from([1, 5]), stops=st.lists(st.floats(0, 1), min_size=3, max_size=3))
def test_resharding_never_skips_or_repeats_within_an_epoch(fuzz_count, n, seed, epoch, worlds, micros, scale,
                                                          stops):
    """An epoch consumed under a chain of (world size, micro-batch size) changes, each stop at a random point, with
    the data state carried as resume_from carries it (BatchStream.load_state_dict, then the sampler BatchStream
    builds from its state): no example twice, and the ones never seen are only the drop_last tail of the last
    sharding (fewer than one global micro-batch). Micro-batch sizes from a small set, so that consecutive
    shardings are often equal (the exact-continuation path) as well as different (the re-dealing path)."""
    fuzz_count("resharding")
    seen: list[int] = []
    state = {"phase": 0, "epoch": epoch, "position": 0, "offset": 0}
    before = (micros[0] * scale, worlds[0])  # (micro-batch size, world size) the state was saved under
    for i, world in enumerate(worlds):
        micro = micros[i] * scale
        streams = [BatchStream(None, [(1.0, 8)], 1, micro, rank=r, world=world, seed=seed) for r in range(world)]
        for stream in streams:
            stream.load_state_dict(state, *before)
        shards = [np.asarray(list(s.sampler(n))) for s in streams]
        shards = [s[: len(s) // micro * micro] for s in shards]  # the DataLoader's drop_last
        steps = len(shards[0]) // micro  # micro-batches per rank in the rest of the epoch
        assert all(len(s) == steps * micro for s in shards)  # every rank as many: they stay in step
        taken = steps if i == len(worlds) - 1 else int(stops[i] * steps)
        for p in range(taken):  # the ranks take micro-batches in lockstep
            for s in shards:
                seen.extend(s[p * micro:(p + 1) * micro].tolist())
        state = {**streams[0].state_dict(), "position": streams[0].state["position"] + taken}  # next() counts so
        before = (micro, world)
    assert len(seen) == len(set(seen)), "an example was used twice in one epoch"
    order = ResumableSampler(n, seed=seed, shuffle=True, drop_last=True, epoch=epoch).global_order().tolist()
    assert set(seen) == set(order[: len(seen)]), "what was used is not a prefix of the epoch's global order"
    assert n - len(seen) < world * micro + world  # only the drop_last tail of the last sharding is left


def test_resume_is_exact_with_dropout(tiny_data, tmp_path):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    pretrain(PretrainConfig(**config_args(tiny_data, straight, dropout=0.1, steps=4)))
    resumed.mkdir()
    shutil.copytree(straight / "checkpoint-2", resumed / "checkpoint-2")
    pretrain(PretrainConfig(**config_args(tiny_data, resumed, dropout=0.1, steps=4)))
    assert losses(straight)[2:] == [read_metrics(resumed)[s]["loss"] for s in (3, 4)]


def test_resume_saved_at_the_end_of_an_epoch_starts_the_next_one(tiny_data, tmp_path):
    """A data state saved just as an epoch was used up resumes with the next epoch, not the same one again.
    (Micro-batches of 1 make every epoch end on a micro-batch boundary.)"""
    from functools import partial

    from litebert.data.store import TokenStore
    from litebert.pretrain_setup import train_dataset

    cfg = PretrainConfig(**config_args(tiny_data, tmp_path / "run", batch_size=1, micro_batch_size=1))
    make = partial(train_dataset, cfg, TokenStore.open(cfg.data))
    straight = BatchStream(make, [(1.0, cfg.max_seq_length)], cfg.steps, 1, seed=cfg.seed)
    batches = [straight.next(0) for _ in range(len(straight.dataset()) + 1)]  # all of epoch 0, then one more
    assert straight.state["epoch"] == 1 and straight.state["position"] == 1
    resumed = BatchStream(make, [(1.0, cfg.max_seq_length)], cfg.steps, 1, seed=cfg.seed)
    assert resumed.load_state_dict({"phase": 0, "epoch": 0, "position": len(batches) - 1}, 1, 1)
    first = resumed.next(0)
    assert resumed.state == straight.state
    assert all(torch.equal(first[k], batches[-1][k]) for k in first)


def test_a_token_budget_run_resumes_bitwise_exact(tiny_data, tmp_path):
    """A --max-tokens run's schedule follows the tokens trained, which a checkpoint restores exactly: killed and
    resumed, it has the lrs, losses and weights of the run straight through (512 tokens a step: the budget of
    4,000 is reached at step 8)."""
    straight, run = tmp_path / "straight", tmp_path / "run"
    budget = dict(steps=1000, max_tokens=4000, save_every=3)
    done = run_litebert(pretrain_args(tiny_data, straight, **budget))
    assert done.returncode == 0 and "stopping at step 8 of 1000" in done.stderr, done.stderr[-3000:]
    args = pretrain_args(tiny_data, run, **budget)
    proc = run_litebert(args, fault="kill:4")  # at the start of step 5: resumes from checkpoint-3
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    proc = run_litebert(args)
    assert proc.returncode == 0 and f"resumed from {run / 'checkpoint-3'} at step 3" in proc.stderr, proc.stderr[-3000:]
    for key in ("loss", "lr", "grad_norm"):
        assert losses(run, key) == losses(straight, key)
    assert losses(run, "lr")[0] == 0.0 and len(set(losses(run, "lr"))) == 8  # it did follow a schedule
    assert_same_weights(run / "checkpoint-8", straight / "checkpoint-8")
    ours = load_state(run / "checkpoint-8" / "trainer_state.pt")
    assert ours["scheduler"] == load_state(straight / "checkpoint-8" / "trainer_state.pt")["scheduler"]
    assert ours["scheduler"]["progress"] == 1.0
