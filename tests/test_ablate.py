"""A whole ablation suite at a tiny budget, end to end: real pretraining runs, evaluation, fine-tuning, report."""

import json

from litebert.cli import main


def test_objective_suite_tiny_budget(tmp_path, shared_data):
    books = [str(shared_data / "gutenberg" / name) for name in ("carroll-alice.txt", "blake-poems.txt")]
    out = tmp_path / "ablate"
    argv = ["ablate", "objective", "--corpus", *books, "--out", str(out), "--steps", "3", "--seeds", "2",
            "--vocab-size", "1000", "--max-seq-length", "32", "--batch-size", "8", "--hidden-size", "32",
            "--layers", "2", "--finetune-steps", "2", "--finetune-train-examples", "32",
            "--glue", str(shared_data / "glue"), "--precision", "fp32"]
    assert main(argv) == 0
    results = json.loads((out / "objective" / "results.json").read_text())
    assert [r["variant"] for r in results] == ["objective-none", "objective-nsp", "objective-sop"]
    for r in results:
        assert r["steps"] == 3 and 0 <= r["mlm_acc"] <= 1 and 0 <= r["sop_acc"] <= 1 and 0 <= r["nsp_acc"] <= 1
        assert len(r["sst2_acc"]) == 2
        # each variant is a real run dir with its own curve
        lines = (out / "objective" / r["variant"] / "pretrain" / "metrics.jsonl").read_text().splitlines()
        assert any(json.loads(x).get("step") == 3 for x in lines)
    report = (out / "objective" / "results.md").read_text()
    assert "objective-sop" in report and "SST-2" in report
    assert (out / "objective" / "bars.png").stat().st_size > 1000 and (out / "objective" / "curves.png").is_file()
    # a finished suite is not re-run: a second call only rewrites the report
    stamp = (out / "objective" / "objective-sop" / "result.json").stat().st_mtime_ns
    assert main(argv) == 0
    assert (out / "objective" / "objective-sop" / "result.json").stat().st_mtime_ns == stamp


def test_sharing_suite_variants():
    from litebert.ablate import suite_variants

    names = [v.name for v in suite_variants("sharing", 256)]
    assert names == ["E256-all", "E256-attention", "E256-ffn", "E256-none", "E128-all", "E128-attention",
                     "E128-ffn", "E128-none"]
