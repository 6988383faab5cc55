"""`litebert demo` end to end with no shared data: a tiny time budget still runs every stage for real."""

import json
import re
from pathlib import Path

import pytest
import torch

from litebert.demo import DEMO_MODEL, FILL_MASK_EXAMPLES, run_demo
from litebert.plot import read_metrics
from litebert.rundir import resolve_model_dir


@pytest.fixture
def two_threads():
    """Two torch threads for the test, so the demo's pace probe (2 threads against 1) runs even where pytest-xdist
    gives each worker one; the count before is restored after (the demo sets the process's threads)."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_demo_runs_every_stage_offline(tmp_path, capsys, two_threads):
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
    # with the distance bias on its attention (not ALBERT's, so saved in litebert's format, slopes kept)
    assert trained["distance_bias"] == DEMO_MODEL["distance_bias"] and trained["format"] == "litebert"
    assert json.loads((tmp_path / "demo" / "model.json").read_text())["num_hidden_layers"] == trained["num_hidden_layers"]
    # the demo dir itself is what `--model runs/demo` and `plot runs/demo` accept (README: "accepted by every
    # other command"): the model of its pretraining run, and that run's curves
    assert resolve_model_dir(tmp_path / "demo") == checkpoint
    assert read_metrics(tmp_path / "demo") == read_metrics(tmp_path / "demo" / "pretrain")
    captured = capsys.readouterr()
    assert step == 50 or "--max-time 0.6s reached" in captured.err
    # with no --threads the demo times a few steps at torch's thread count and at 1 and trains with the faster
    chosen = re.search(r"pace measured now: .*; pretraining with (\d+) \(--threads N", captured.err)
    assert chosen, captured.err[-2000:]
    recorded = json.loads((tmp_path / "demo" / "pretrain" / "run.json").read_text())["train"]["threads"]
    assert recorded == int(chosen.group(1))
    printed = captured.out
    assert printed.count("    -> ") == len(FILL_MASK_EXAMPLES)  # one line of top-5 answers per example
    # the summary leads with the [MASK]-position figure and ends with a verdict on it
    assert printed.index("words hidden behind [MASK]") < printed.index("Official masked_lm_accuracy")
    assert "Verdict: " in printed and 0 <= result["eval_mlm_acc_mask"] <= 1
    # `evaluate` on the demo dir, with the summary's batch of 32 in fp32, repeats the summary's figures (one code)
    from litebert.cli import main

    assert main(["evaluate", "--model", str(tmp_path / "demo"), "--batch-size", "32", "--precision", "fp32"]) == 0
    scored = json.loads(capsys.readouterr().out)
    figures = {k: v for k, v in result.items() if k.startswith("eval_")}
    assert len(figures) > 10 and {k: scored[k] for k in figures} == pytest.approx(figures, rel=1e-9, abs=1e-12)
    # a second demo in the same dir with another step count pretrains afresh (it used to resume the old
    # checkpoint past its own last step, then fail to find checkpoint-N)
    again = run_demo(tmp_path / "demo", steps=60, vocab_size=2000, threads=1)  # --threads reaches the run
    assert json.loads((tmp_path / "demo" / "pretrain" / "run.json").read_text())["train"]["threads"] == 1
    assert Path(again["checkpoint"]).name == "checkpoint-60" and Path(again["checkpoint"]).is_dir()
    assert not checkpoint.exists()


def test_the_summary_leads_with_the_mask_figure_and_judges_it_against_the_no_model_guesses():
    from litebert.demo import summary_lines

    scores = {"eval_targets_mask": 2137, "eval_base_mask_commonest": 0.055, "eval_base_mask_bigram": 0.123,
              "eval_mlm_acc": 0.149, "eval_base_copy_commonest": 0.141, "eval_sop_acc": 0.6, "tokens": 4.2e5}

    def verdict(acc):
        lines = summary_lines({**scores, "eval_mlm_acc_mask": acc}, minutes=5)
        assert "2,137 words hidden behind [MASK]" in lines[0] and f"{acc:6.1%}" in lines[1]
        return lines[-1]

    too_little = verdict(0.06)  # below 1.5x the commonest-piece guess (8.25%)
    assert too_little.startswith("Verdict: too little training") and "0.42M tokens in 5 minutes" in too_little
    assert "--minutes 10" in too_little and "--threads 1" in too_little
    assert "--threads 1" not in summary_lines({**scores, "eval_mlm_acc_mask": 0.06}, minutes=5, threads=1)[-1]
    assert verdict(0.09).startswith("Verdict: learning (0.42M tokens)")  # above 1.5x commonest, below the bigram
    assert verdict(0.13).startswith("Verdict: learned")
