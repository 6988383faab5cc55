"""Promise 16: fine-tuning has pretraining's run directory.

SIGTERM during `finetune` finishes the step, saves checkpoint-STEP (atomic, like pretraining's) and exits 143 with
one line; the same command again resumes from it, and the result is bit-exact: the weights of a run stopped at
step 3 and resumed equal those of the same run made in one go. A resume with another recipe is refused; a
finished run is still refused without --overwrite. The signal is real (the process stops itself at the step with
LITEBERT_FAULT=stop:STEP, receives SIGTERM, and is continued).
"""

from __future__ import annotations

import json
import os
import signal

import pytest

from harness import assert_same_weights, finish, kill_tagged, run_litebert, start, wait_stopped


@pytest.fixture(scope="module")
def setup(tiny_data, tmp_path_factory):
    """(model dir, SST-2-format task folder): the tiny model (random weights) with its tokenizer, 24 rows."""
    import torch

    import litebert
    from litebert.tokenizer import load_tokenizer

    _, tokenizer, model_json = tiny_data
    root = tmp_path_factory.mktemp("ft")
    torch.manual_seed(0)
    config = litebert.AlbertConfig.from_json(model_json)
    litebert.AlbertForPreTraining(config).save_pretrained(root / "model", tokenizer=load_tokenizer(tokenizer))
    words = ["good", "bad", "fine", "dull", "great", "poor"]
    rows = [f"a {words[i % 6]} film number {i}\t{int(words[i % 6] in ('good', 'fine', 'great'))}" for i in range(24)]
    data = root / "sst"
    data.mkdir()
    (data / "train.tsv").write_text("sentence\tlabel\n" + "\n".join(rows) + "\n")
    (data / "dev.tsv").write_text("sentence\tlabel\n" + "\n".join(rows[:8]) + "\n")
    return root / "model", data


def args(setup, out, **extra):
    model, data = setup
    opts = {"model": model, "data": data, "out": out, "steps": 6, "batch-size": 4, "eval-every": 2, "threads": 1,
            "seed": 0, "lr": 1e-3, "albert-dropout": 0.1, "max-seq-length": 32, **extra}
    return ["finetune", "sst-2"] + [x for k, v in opts.items() for x in (f"--{k}", str(v))]


@pytest.fixture(scope="module")
def straight(setup, tmp_path_factory):
    """The run made in one go, that the interrupted ones must end equal to."""
    out = tmp_path_factory.mktemp("straight") / "run"
    done = run_litebert(args(setup, out))
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def metrics(run_dir):
    """metrics.jsonl without the wall-clock field."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k != "elapsed"} for r in rows]


def test_sigterm_saves_and_a_rerun_resumes_bit_exactly(setup, straight, tmp_path):

    run = tmp_path / "run"
    proc = start(args(setup, run), fault="stop:3")  # step 3 is between two evaluations (2 and 4)
    try:
        wait_stopped(proc)
        os.kill(proc.pid, signal.SIGTERM)
        os.kill(proc.pid, signal.SIGCONT)
        stopped = finish(proc)
    finally:
        kill_tagged(proc.tag)
    assert stopped.returncode == 143, stopped.stderr[-3000:]  # today: killed by the signal, no message
    last = stopped.stderr.strip().splitlines()[-1]
    assert last == (f"litebert: SIGTERM: stopped after step 3 and saved checkpoint-3 in {run}; run the same command "
                    "again to resume"), stopped.stderr[-2000:]
    assert (run / "checkpoint-3" / "COMMIT").is_file() and not (run / "result.json").exists()

    resumed = run_litebert(args(setup, run))  # today: refused without --overwrite
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resumed from {run / 'checkpoint-3'} at step 3" in resumed.stderr
    assert_same_weights(run / "checkpoint-6", straight / "checkpoint-6")
    assert_same_weights(run / "best", straight / "best")
    assert metrics(run) == metrics(straight)  # every step once, the same values

    again = run_litebert(args(setup, run))  # finished: refused as before
    assert again.returncode == 2 and "already holds a fine-tuning run" in again.stderr


def test_a_resume_with_another_recipe_is_refused(setup, tmp_path):
    run = tmp_path / "run"
    proc = start(args(setup, run), fault="stop:3")
    try:
        wait_stopped(proc)
        os.kill(proc.pid, signal.SIGTERM)
        os.kill(proc.pid, signal.SIGCONT)
        assert finish(proc).returncode == 143
    finally:
        kill_tagged(proc.tag)
    other = run_litebert(args(setup, run, lr=2e-3))
    assert other.returncode == 2
    assert "was made with --lr 0.001 (now 0.002)" in other.stderr and "Traceback" not in other.stderr


def test_max_time_stops_with_a_checkpoint_and_the_same_command_goes_on_bit_exactly(setup, straight, tmp_path):
    """--max-time (pretrain's parser and stop line): the run stops after the step that crosses it, saves that step,
    exits 0 with one line and no result.json; the same command without the budget resumes and ends with the
    weights, best/ and log of the run made in one go (dropout 0.1 in the encoder and before the head: the resume
    must put the generator dropout draws from back where it was)."""
    run = tmp_path / "run"
    stopped = run_litebert(args(setup, run, **{"max-time": "0.001"}))  # crossed by the first step
    assert stopped.returncode == 0, stopped.stderr[-3000:]
    assert "stops after step 6 or at --max-time 0.001 of this session, whichever comes first" in stopped.stderr
    last = stopped.stderr.strip().splitlines()[-1]
    assert last == ("stopping at step 1 of 6: --max-time 0.001 reached; checkpoint-1 saved (the same command with "
                    "a larger --max-time, or none, goes on)"), stopped.stderr[-2000:]
    assert json.loads(stopped.stdout)["stopped"] == "--max-time 0.001 reached"
    assert (run / "checkpoint-1" / "COMMIT").is_file() and not (run / "result.json").exists()

    resumed = run_litebert(args(setup, run))  # the budget may change on resume
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resumed from {run / 'checkpoint-1'} at step 1" in resumed.stderr
    assert_same_weights(run / "checkpoint-6", straight / "checkpoint-6")
    assert_same_weights(run / "best", straight / "best")
    assert metrics(run) == metrics(straight)
    assert json.loads((run / "result.json").read_text())["steps"] == 6


def test_a_full_disk_before_the_first_checkpoint_restarts_keeping_best(setup, straight, small_disk):
    """The disk fills after step 2's best/ is saved and before checkpoint-2 is (a real ENOSPC on a tmpfs): exit 2.
    The same command on the still-full disk is refused and best/ is untouched; once there is space, it restarts
    from step 0 (there is no checkpoint to resume), keeps best/ until it has redone step 2, and ends with the
    weights, best/ and log of the run made in one go. (Before: refused without --overwrite, which deletes best/.)"""
    from harness import pages

    disk = small_disk.mount(16 << 20)
    run = disk / "run"
    proc = start(args(setup, run), fault="stop:2")  # stopped after step 2's evaluation and best/, before its save
    try:
        wait_stopped(proc)
        assert json.loads((run / "best" / "eval_metrics.json").read_text())["step"] == 2
        filler = small_disk.fill(disk, pages(100))  # a page: room for a line of log, not for a checkpoint
        os.kill(proc.pid, signal.SIGCONT)
        failed = finish(proc)
    finally:
        kill_tagged(proc.tag)
    assert failed.returncode == 2 and "the disk is full" in failed.stderr, failed.stderr[-3000:]
    assert "could not save checkpoint-2: the disk is full" in failed.stderr, failed.stderr[-3000:]
    assert "no checkpoint was saved before it" in failed.stderr and "intact" not in failed.stderr
    assert "Traceback" not in failed.stderr and not list(run.glob("checkpoint-*"))
    kept = {p.name: p.read_bytes() for p in (run / "best").iterdir()}

    still_full = run_litebert(args(setup, run))
    assert still_full.returncode == 2 and "already holds" not in still_full.stderr, still_full.stderr[-3000:]
    assert {p.name: p.read_bytes() for p in (run / "best").iterdir()} == kept

    filler.unlink()
    again = run_litebert(args(setup, run))  # today: "already holds a fine-tuning run"; only --overwrite goes on
    assert again.returncode == 0, again.stderr[-3000:]
    assert (f"restarting {run} from step 0: it stopped before its first checkpoint; its best/ (step 2, accuracy "
            in again.stderr), again.stderr[-2000:]
    assert_same_weights(run / "checkpoint-6", straight / "checkpoint-6")
    assert_same_weights(run / "best", straight / "best")
    assert metrics(run) == metrics(straight)
    assert json.loads((run / "result.json").read_text())["best"] == json.loads((straight / "result.json").read_text())[
        "best"]
