"""The rough edges of the outside report, one test each: what a run says and logs when it is rerun, refused or
stopped must be true."""

from __future__ import annotations

import json

from harness import pretrain_args, run_litebert
from litebert.cli import main as cli_main


def _eval_lines(run):
    return [r for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if "eval_mlm_loss" in r]


def test_a_rerun_of_a_finished_run_appends_no_second_final_eval(tiny_data, tmp_path, capsys):
    run = tmp_path / "run"
    assert cli_main(pretrain_args(tiny_data, run, steps=2)) == 0
    before = (run / "metrics.jsonl").read_text()
    assert len(_eval_lines(run)) == 1
    assert cli_main(pretrain_args(tiny_data, run, steps=2)) == 0  # today: another final eval line
    assert (run / "metrics.jsonl").read_text() == before


def test_a_refused_resume_does_not_first_say_resumed(tiny_data, tmp_path, capsys):
    run = tmp_path / "run"
    assert cli_main(pretrain_args(tiny_data, run, steps=2)) == 0
    capsys.readouterr()
    assert cli_main(pretrain_args(tiny_data, run, steps=4, lr=1e-3)) == 2
    err = capsys.readouterr().err
    assert "this run was made with --lr 0.002 (now 0.001)" in err and "resumed from" not in err, err


def test_a_failure_before_any_checkpoint_does_not_claim_one_is_intact(tiny_data, tmp_path):
    done = run_litebert(pretrain_args(tiny_data, tmp_path / "run"), fault="nan_loss:0")
    assert done.returncode == 2
    last = done.stderr.strip().splitlines()[-1]
    assert "non-finite loss" in last and "no checkpoint was saved yet" in last and "intact" not in last, last


def test_a_config_files_vocab_size_is_not_replaced_silently(tiny_data, tmp_path, capsys):
    _, _, model_json = tiny_data
    other = tmp_path / "model.json"
    other.write_text(json.dumps({**json.loads(model_json.read_text()), "vocab_size": 999}))
    assert cli_main(pretrain_args(tiny_data, tmp_path / "run", model=str(other), steps=1)) == 0
    store_vocab = json.loads(model_json.read_text())["vocab_size"]
    assert f"--model {other}: vocab_size 999 replaced by the store's tokenizer vocab size {store_vocab}" in \
        capsys.readouterr().err
