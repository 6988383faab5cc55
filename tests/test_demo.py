"""`litebert demo` end to end with no shared data: a tiny time budget still runs every stage for real."""

import json
from pathlib import Path

import torch

from litebert.demo import DEMO_MODEL, FILL_MASK_EXAMPLES, run_demo
from litebert.plot import read_metrics
from litebert.rundir import resolve_model_dir


def test_demo_runs_every_stage_offline(tmp_path, capsys):
    result = run_demo(tmp_path / "demo", minutes=0.01, vocab_size=2000)
    checkpoint = Path(result["checkpoint"])
    # 0.6 s of budget: the schedule gets its floor of 50 steps, and the time budget stops the run within it
    step = int(checkpoint.name.removeprefix("checkpoint-"))
    assert 1 <= step <= 50 and (Path(result["final"]) / "step.txt").read_text().strip() == str(step)
    assert (checkpoint / "model.safetensors").is_file() and not (tmp_path / "demo" / "probe").exists()
    assert 0 <= result["eval_mlm_acc"] <= 1 and 0 <= result["eval_sop_acc"] <= 1
    # the model trained is albert-tiny in DEMO_MODEL's shape, and the run dir keeps its config
    trained = json.loads((Path(result["final"]) / "config.json").read_text())
    assert trained["num_hidden_layers"] == DEMO_MODEL["num_hidden_layers"] and trained["hidden_size"] == 128
    assert json.loads((tmp_path / "demo" / "model.json").read_text())["num_hidden_layers"] == trained["num_hidden_layers"]
    # the demo dir itself is what `--model runs/demo` and `plot runs/demo` accept (README: "accepted by every
    # other command"): the model of its pretraining run, and that run's curves
    assert resolve_model_dir(tmp_path / "demo") == checkpoint
    assert read_metrics(tmp_path / "demo") == read_metrics(tmp_path / "demo" / "pretrain")
    captured = capsys.readouterr()
    assert step == 50 or "--max-time 0.6s reached" in captured.err
    printed = captured.out
    assert printed.count("    -> ") == len(FILL_MASK_EXAMPLES)  # one line of top-5 answers per example
    # a second demo in the same dir with another step count pretrains afresh (it used to resume the old
    # checkpoint past its own last step, then fail to find checkpoint-N)
    threads = torch.get_num_threads()
    try:  # --threads reaches the pretraining run (it sets torch's threads for the process)
        again = run_demo(tmp_path / "demo", steps=60, vocab_size=2000, threads=1)
    finally:
        torch.set_num_threads(threads)
    assert json.loads((tmp_path / "demo" / "pretrain" / "run.json").read_text())["train"]["threads"] == 1
    assert Path(again["checkpoint"]).name == "checkpoint-60" and Path(again["checkpoint"]).is_dir()
    assert not checkpoint.exists()
