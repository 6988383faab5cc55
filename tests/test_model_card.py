"""Model cards: every saved model directory carries a README.md whose Hugging Face front matter parses with
huggingface_hub's own reader, whose figures equal the run's records, and whose loading code runs as written."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent / "reliability"))
from harness import config_args, tiny_setup  # noqa: E402

import litebert  # noqa: E402
from litebert.finetune import FinetuneConfig, finetune  # noqa: E402
from litebert.model_card import MARKER  # noqa: E402
from litebert.pretrain import PretrainConfig, pretrain  # noqa: E402
from tiny_models import TINY, save_model, tokenizer  # noqa: E402

hub = pytest.importorskip("huggingface_hub")


def card(model_dir: Path):
    return hub.ModelCard.load(model_dir / "README.md")


def figures(c) -> dict[tuple[str, str], float]:
    """(split, metric) -> value from the card's model-index, as huggingface_hub reads it."""
    return {(r.dataset_split, r.metric_type): r.metric_value for r in c.data.eval_results}


def run_python_blocks(text: str, tmp_path: Path, monkeypatch) -> dict:
    """Execute the card's ```python blocks in order; their namespace."""
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    for block in re.findall(r"```python\n(.*?)```", text, re.S):
        exec(block, scope)
    return scope


def test_a_finetuning_runs_best_carries_its_dev_figures_and_loads_as_the_card_says(tmp_path, shared_data,
                                                                                   monkeypatch):
    init = save_model(tmp_path / "init", "AlbertForPreTraining", tokenizer(shared_data), max_position_embeddings=128)
    result = finetune(FinetuneConfig(task="sst-2", model=str(init), data=str(shared_data / "glue" / "SST-2"),
                                     out=str(tmp_path / "run"), steps=4, eval_every=2, batch_size=4,
                                     max_seq_length=32, max_train_examples=16, max_eval_examples=8,
                                     precision="fp32", lr=1e-4, threads=1))
    best = tmp_path / "run" / "best"
    recorded = json.loads((best / "eval_metrics.json").read_text())
    c = card(best)
    assert c.data.library_name == "litebert" and c.data.pipeline_tag == "text-classification"
    assert "transformers" in c.data.tags
    assert figures(c) == {("dev", k): v for k, v in recorded.items() if isinstance(v, float)}
    if "single_class_prediction" in recorded:  # a collapsed model's card says so
        assert f"every dev prediction at step {recorded['step']} is the class" in c.text
    assert figures(c) == {("dev", k): v for k, v in result["best"].items()}
    assert c.data.eval_results[0].dataset_name == "sst-2"
    assert f"from step {recorded['step']:,}" in c.text and "16 training examples" in c.text
    assert f"from `{init}`" in c.text and "lr 0.0001" in c.text
    scope = run_python_blocks(c.content, tmp_path, monkeypatch)  # litebert's lines, then transformers'
    assert scope["pipe"]("a gripping film")["label"] in ("negative", "positive")
    ours = litebert.pipeline(None, best, backend="fp32")("a gripping film")  # the card's pipe may answer in bf16
    theirs = scope["model"]
    assert type(theirs).__module__.startswith("transformers")
    enc = scope["tokenizer"]("a gripping film", return_tensors="pt")
    with torch.no_grad():
        probs = theirs(**enc).logits.softmax(-1)[0]
    assert probs.tolist() == pytest.approx([ours["scores"][theirs.config.id2label[i]] for i in range(2)], abs=1e-5)


def test_a_pretraining_runs_final_carries_its_held_out_figures(tmp_path):
    tiny = tiny_setup(tmp_path / "data")
    out = tmp_path / "run"
    pretrain(PretrainConfig(**config_args(tiny, out, steps=3)))
    final_eval = [r for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines())
                  if "eval_mlm_acc" in r][-1]
    c = card(out / "final")
    assert c.data.pipeline_tag == "fill-mask" and "transformers" in c.data.tags
    assert figures(c) == {("held-out", k): v for k, v in final_eval.items()
                          if k.startswith("eval_") and k != "eval_examples"}
    assert f"| held-out | {final_eval['eval_examples']} | 3 |" in c.text
    assert final_eval["step"] == 3 == int((out / "final" / "step.txt").read_text())
    assert "3 steps, " in c.text and f"random initialisation ({tiny[2]})" in c.text
    assert "objective sop" in c.text and f"{round(final_eval['eval_mlm_acc'], 4):.4g}" in c.text


def test_a_bare_save_says_so_and_a_users_own_readme_is_kept(tmp_path, monkeypatch):
    model = litebert.AlbertForMaskedLM(litebert.AlbertConfig(vocab_size=100, sharing="attention", **TINY))
    model.save_pretrained(tmp_path / "m")
    text = (tmp_path / "m" / "README.md").read_text()
    c = card(tmp_path / "m")
    assert c.data.library_name == "litebert" and c.data.eval_results is None and MARKER in text
    assert "Not recorded" in c.text and "transformers cannot load this directory" in c.text
    scope = run_python_blocks(c.content, tmp_path, monkeypatch)
    assert torch.equal(scope["model"].state_dict()["mlm.bias"], model.state_dict()["mlm.bias"])
    (tmp_path / "m" / "README.md").write_text("# my notes\n")
    model.save_pretrained(tmp_path / "m")
    assert (tmp_path / "m" / "README.md").read_text() == "# my notes\n"
