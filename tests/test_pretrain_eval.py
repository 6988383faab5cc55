"""`litebert evaluate` on a pretraining directory (issue 34): the held-out MLM figures of the run's own eval lines
(at [MASK], kept and random targets, the headline, the model-free baselines, the pair accuracy), recomputed from
the saved weights with the run's recorded settings on its store: equal to the last eval record of metrics.jsonl,
whether the run, its final/, a demo directory around it, or a bare copy with --data and the settings is named."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "reliability"))
from harness import pretrain_args, tiny_setup  # noqa: E402

from litebert.cli import main as cli_main  # noqa: E402


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A 12-step pretraining run laid out as `litebert demo` lays it out (DEMO/pretrain), and its last eval record
    (LAMB 1e-2: enough for some right answers at [MASK])."""
    root = tmp_path_factory.mktemp("pretrain_eval")
    tiny = tiny_setup(root / "data", documents=300)
    run = root / "demo" / "pretrain"
    assert cli_main(pretrain_args(tiny, run, steps=12, lr=1e-2, eval_batches=2, save_every=100)) == 0
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    last_eval = [r for r in records if "eval_mlm_acc" in r][-1]
    assert last_eval["step"] == 12 and last_eval["eval_mlm_acc_mask"] > 0
    return tiny, run, last_eval


def _evaluate(capsys, *args) -> dict:
    capsys.readouterr()
    assert cli_main(["evaluate", *args]) == 0
    out = capsys.readouterr()
    assert "eval mlm at [MASK] " in out.err  # the eval line's own words first
    return json.loads(out.out)


def _same_figures(got: dict, logged: dict) -> None:
    figures = {k: v for k, v in logged.items() if k.startswith("eval_")}
    # every per-kind figure, baseline and count of the eval line, and the pair accuracies (sop and the nsp cross)
    assert {"eval_mlm_acc_mask", "eval_mlm_acc_kept", "eval_mlm_acc_random", "eval_base_copy_commonest",
            "eval_base_mask_bigram", "eval_sop_acc", "eval_nsp_acc"} <= set(figures)
    assert {k: got[k] for k in figures} == pytest.approx(figures, rel=1e-9, abs=1e-12)


def test_evaluate_repeats_the_final_eval_line(tiny_run, capsys):
    _, run, logged = tiny_run
    for named in (run, run.parent, run / "final"):  # the run, its demo directory, its final model
        got = _evaluate(capsys, "--model", str(named))
        _same_figures(got, logged)
        assert got["step"] == 12 and Path(got["run"]) == run and got["precision"] == "fp32"


def test_a_bare_model_dir_takes_data_and_settings(tiny_run, tmp_path, capsys):
    tiny, run, logged = tiny_run
    bare = tmp_path / "bare"
    shutil.copytree(run / "final", bare)
    assert cli_main(["evaluate", "--model", str(bare)]) == 2
    assert "without its run record (run.json); pass --data STORE" in capsys.readouterr().err
    # the harness run's settings, given by hand: the same figures
    got = _evaluate(capsys, "--model", str(bare), "--data", str(tiny[0]), "--max-seq-length", "32",
                    "--eval-batches", "2", "--batch-size", "8", "--precision", "fp32")
    _same_figures(got, logged)
    # other settings score other examples: longer pairs, more targets
    longer = _evaluate(capsys, "--model", str(bare), "--data", str(tiny[0]), "--max-seq-length", "64",
                       "--eval-batches", "2", "--batch-size", "8", "--precision", "fp32")
    assert longer["eval_targets_mask"] > got["eval_targets_mask"] and longer["settings"]["max_seq_length"] == 64


def test_refusals_name_the_reason(tiny_run, tmp_path, capsys, shared_data):
    from tiny_models import save_model, tokenizer

    _, run, _ = tiny_run
    assert cli_main(["evaluate", "--model", str(run), "--split", "dev"]) == 2
    assert "--split: for a fine-tuning TASK" in capsys.readouterr().err
    assert cli_main(["evaluate", "--model", str(run), "--eval-batches", "0"]) == 2
    assert "--eval-batches 0: must be >= 1" in capsys.readouterr().err
    clf = save_model(tmp_path / "clf", "AlbertForSequenceClassification", tokenizer(shared_data))
    assert cli_main(["evaluate", "--model", str(clf), "--data", str(tiny_run[0][0])]) == 2
    assert "not a pretraining directory" in capsys.readouterr().err
    assert cli_main(["evaluate", "sst-2", "--model", str(clf)]) == 2
    assert "--data is required" in capsys.readouterr().err
