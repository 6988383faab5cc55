"""A whole ablation suite at a tiny budget, end to end: real pretraining runs, evaluation, fine-tuning, report."""

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from litebert.cli import main
from litebert.errors import TrainingError


def test_objective_suite_tiny_budget(tmp_path, shared_data, monkeypatch):
    books = [str(shared_data / "gutenberg" / name) for name in ("carroll-alice.txt", "blake-poems.txt")]
    out = tmp_path / "ablate"
    argv = ["ablate", "objective", "--corpus", *books, "--out", str(out), "--steps", "3", "--seeds", "2",
            "--vocab-size", "1000", "--max-seq-length", "32", "--batch-size", "8", "--hidden-size", "32",
            "--layers", "2", "--finetune-steps", "2", "--finetune-train-examples", "32",
            "--glue", str(shared_data / "glue"), "--precision", "fp32"]
    assert main(argv) == 0
    results = json.loads((out / "objective" / "results.json").read_text())
    assert [r["variant"] for r in results] == ["objective-none", "objective-nsp", "objective-sop", "random-init"]
    floor = results.pop()
    assert len(floor["sst2_acc"]) == 2 and "mlm_acc" not in floor
    for r in results:
        assert r["steps"] == 3 and 0 <= r["mlm_acc"] <= 1 and 0 <= r["sop_acc"] <= 1 and 0 <= r["nsp_acc"] <= 1
        assert len(r["sst2_acc"]) == 2
        # each variant is a real run dir with its own curve
        lines = (Path(r["run_dir"]) / "pretrain" / "metrics.jsonl").read_text().splitlines()
        assert any(json.loads(x).get("step") == 3 for x in lines)
    report = (out / "objective" / "results.md").read_text()
    assert "objective-sop" in report and "SST-2" in report
    assert (out / "objective" / "bars.png").stat().st_size > 1000 and (out / "objective" / "curves.png").is_file()
    assert "random-init" in report
    # a finished suite is not re-run: a second call only rewrites the report
    sop_run = Path(results[2]["run_dir"]) / "result.json"
    stamp = sop_run.stat().st_mtime_ns
    assert main(argv) == 0
    assert sop_run.stat().st_mtime_ns == stamp
    # another suite in the same DIR reuses the run with the same settings (the all-shared SOP base) and the
    # step count, and trains only what is new
    assert main(["ablate", "dropout", *argv[2:]]) == 0
    dropout = json.loads((out / "dropout" / "results.json").read_text())
    assert dropout[0]["run_dir"] == results[2]["run_dir"] and sop_run.stat().st_mtime_ns == stamp
    assert dropout[1]["run_dir"] != dropout[0]["run_dir"] and dropout[1]["steps"] == 3
    runs = sorted(p.name for p in (out / "_runs").iterdir())
    assert len(runs) == 5, runs  # none, nsp, sop(=dropout-0), dropout-0.1, random-init
    # the docs report of a suite cut off midway (no results.json yet): what finished, and what did not
    (out / "dropout" / "results.json").rename(tmp_path / "dropout-results.json")
    (out / "dropout" / "dropout-0.1.json").rename(tmp_path / "dropout-0.1.json")
    report_tool = load_doc_tool("ablation_report")
    finished, pending = report_tool.load_suite(out, "dropout")
    assert [r["variant"] for r in finished] == ["dropout-0"] and pending == ["dropout-0.1"]
    stray = out / "dropout" / "dropout-0.5.json"
    stray.write_text((out / "dropout" / "dropout-0.json").read_text())
    with pytest.raises(SystemExit, match=r"dropout-0.5.json not a variant of the dropout suite at hidden size"):
        report_tool.load_suite(out, "dropout")
    stray.unlink()
    page = tmp_path / "ablations.md"
    page.write_text("# page\n\n" + "\n".join(report_tool.markers("")) + "\n")
    monkeypatch.setattr("sys.argv", ["ablation_report.py", str(out), "--command", "ablate ...", "--out", str(page)])
    report_tool.main()
    text = page.read_text()
    assert "### dropout (cut off: 1 of 2 variants so far)" in text and "Not finished yet: dropout-0.1." in text
    assert "| dropout-0 |" in text and "| dropout-0.1 |" not in text and "### objective\n" in text
    (tmp_path / "dropout-results.json").rename(out / "dropout" / "results.json")
    (tmp_path / "dropout-0.1.json").rename(out / "dropout" / "dropout-0.1.json")
    # a second pretraining seed re-trains every variant into its own runs and its own suite folder
    assert main(["ablate", "dropout", *argv[2:], "--pretrain-seed", "1"]) == 0
    seed1 = json.loads((out / "dropout-seed1" / "results.json").read_text())
    assert [r["variant"] for r in seed1] == ["dropout-0", "dropout-0.1", "random-init"]
    assert all("-seed1-" in Path(r["run_dir"]).name for r in seed1[:2])
    assert seed1[0]["mlm_acc"] != dropout[0]["mlm_acc"] or seed1[0]["final_loss"] != dropout[0]["final_loss"]
    assert seed1[2]["run_dir"] == dropout[2]["run_dir"]  # random init does not depend on the pretraining seed
    # the study's records (no checkpoints) carry it to a new machine: restored into a study rebuilt from the same
    # corpus, every finished run is kept and nothing is trained again
    records_tool = load_doc_tool("ablation_records")
    records = tmp_path / "records"
    records_tool.save(out, records)
    assert sorted(p.name for p in records.iterdir() if p.is_dir()) == sorted(p.name for p in (out / "_runs").iterdir())
    objective = json.loads((out / "objective" / "results.json").read_text())
    shutil.rmtree(out)
    records_tool.restore(records, out, books, 1000)
    assert main(argv) == 0
    assert json.loads((out / "objective" / "results.json").read_text()) == objective
    assert not list((out / "_runs").glob("*/pretrain/checkpoint-*"))  # read back, not re-trained
    # records of other data are refused, not mixed into a table of runs that saw other tokens
    other = tmp_path / "other"
    with pytest.raises(SystemExit, match="differs from the data of"):
        records_tool.restore(records, other, books[:1], 1000)
    assert not (other / "_runs").exists()


def load_doc_tool(name: str):
    """A doc-building script from docs/tools/ (not a package) as a module."""
    path = Path(__file__).resolve().parent.parent / "docs" / "tools" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sharing_suite_variants():
    from litebert.lab.ablate import suite_variants

    names = [v.name for v in suite_variants("sharing", 256)]
    assert names == ["E256-all", "E256-attention", "E256-ffn", "E256-none", "E128-all", "E128-attention",
                     "E128-ffn", "E128-none"]


def test_run_lock_makes_a_second_worker_wait(tmp_path):
    """Two ablate processes sharing a DIR: the second one blocks on a run until the first releases it."""
    import threading
    import time

    from litebert.lab.ablate import run_lock

    order = []

    def second():
        with run_lock(tmp_path / "run"):
            order.append("second")

    with run_lock(tmp_path / "run") as mine:
        assert mine
        with run_lock(tmp_path / "run", wait=False) as other:
            assert not other  # held elsewhere: the caller moves on to another variant
        t = threading.Thread(target=second)
        t.start()
        time.sleep(0.3)
        order.append("first done")
    t.join(5)
    assert order == ["first done", "second"]


def test_cached_result_computes_once_and_redoes_a_crashed_run(tmp_path):
    """A finished run is read back, never recomputed; a run that died midway left no result.json and is redone."""
    from litebert.lab.ablate import cached_result

    calls = []

    def crash():
        calls.append("crash")
        raise KeyboardInterrupt  # a session cut off mid-run

    def finish():
        calls.append("finish")
        return {"mlm_acc": 0.25}

    with pytest.raises(KeyboardInterrupt):
        cached_result(tmp_path / "run", crash)
    assert not (tmp_path / "run" / "result.json").exists()
    assert cached_result(tmp_path / "run", finish) == {"mlm_acc": 0.25}
    assert cached_result(tmp_path / "run", finish) == {"mlm_acc": 0.25}
    assert calls == ["crash", "finish"]
    assert [p.name for p in (tmp_path / "run").iterdir() if p.name != ".lock"] == ["result.json"]  # no temp left
    # a damaged record (it used to end in a bare JSONDecodeError traceback) names the file, the line and the way out
    (tmp_path / "run" / "result.json").write_text('{"mlm_acc": 0.25,\n')
    with pytest.raises(TrainingError, match=r"run/result.json:2: not valid JSON .*remove it and `litebert ablate`"):
        cached_result(tmp_path / "run", finish)


def test_finetune_sst2_reuses_finished_seeds(tmp_path, shared_data):
    """More seeds (or another learning rate) later trains only the new runs; changed settings re-train."""
    import torch

    from litebert import AlbertConfig, AlbertForPreTraining
    from litebert.lab.ablate import finetune_sst2
    from litebert.tokenizer import load_tokenizer
    from litebert.tokenizer_train import train_sentencepiece

    sst2 = shared_data / "glue" / "SST-2" / "train.tsv"
    text = tmp_path / "text.txt"
    text.write_text("\n".join(line.split("\t")[0] for line in sst2.read_text().splitlines()[1:3001]) + "\n")
    train_sentencepiece([text], tmp_path / "tok", vocab_size=500)
    tokenizer = load_tokenizer(tmp_path / "tok")
    torch.manual_seed(0)
    model = tmp_path / "model"
    AlbertForPreTraining(AlbertConfig(vocab_size=tokenizer.vocab_size, embedding_size=8, hidden_size=16,
                                      num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                                      max_position_embeddings=64)).save_pretrained(model, tokenizer=tokenizer)
    args = dict(seeds=1, lr=1e-3, steps=2, train_examples=64, eval_every=2)
    first = finetune_sst2(model, tmp_path / "sst2", shared_data / "glue", **args)
    stamp = (tmp_path / "sst2-seed0" / "result.json").stat().st_mtime_ns
    both = finetune_sst2(model, tmp_path / "sst2", shared_data / "glue", **{**args, "seeds": 2})
    assert both[0] == first[0] and len(both) == 2 and 0 < both[1] < 1
    assert (tmp_path / "sst2-seed0" / "result.json").stat().st_mtime_ns == stamp  # read back, not re-trained
    finetune_sst2(model, tmp_path / "sst2", shared_data / "glue", **{**args, "steps": 3})
    assert (tmp_path / "sst2-seed0" / "result.json").stat().st_mtime_ns != stamp  # other settings: trained again
