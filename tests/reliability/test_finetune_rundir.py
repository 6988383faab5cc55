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


def test_sigterm_saves_and_a_rerun_resumes_bit_exactly(setup, tmp_path):
    straight = run_litebert(args(setup, tmp_path / "straight"))
    assert straight.returncode == 0, straight.stderr[-3000:]

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
    assert_same_weights(run / "checkpoint-6", tmp_path / "straight" / "checkpoint-6")
    assert_same_weights(run / "best", tmp_path / "straight" / "best")
    metrics = lambda d: [json.loads(line) for line in (d / "metrics.jsonl").read_text().splitlines()]  # noqa: E731
    strip = lambda rows: [{k: v for k, v in r.items() if k != "elapsed"} for r in rows]  # noqa: E731
    assert strip(metrics(run)) == strip(metrics(tmp_path / "straight"))  # every step once, the same values

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
