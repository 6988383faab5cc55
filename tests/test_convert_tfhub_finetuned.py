"""Checkpoints fine-tuned the official way from a TF-Hub module: the encoder under `module/`, the task head and
global_step un-prefixed. TensorFlow is not available here, so the fixture is built from the golden checkpoint
written by the official code (albert-tf-golden/tiny) under the names the official fine-tuning scripts give:
run_classifier / run_race `output_weights` + `output_bias` (classifier_utils.py, race_utils.py), global_step,
AdamWeightDecayOptimizer slots `<var>/adam_m|adam_v`, and the module's variables under `module/` (hub.Module's
scope). Verified: the encoder's outputs equal the golden outputs of the official graph (1e-5), and the head is
the official linear map over the pooled output (logits = pooled @ W^T + b; for RACE the [B*C] scores reshaped to
[B, C])."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

import litebert
from litebert.cli import main
from litebert.convert import convert_checkpoint
from litebert.convert.tf_bundle import read_checkpoint
from litebert.errors import ConversionError
from tf_fixtures import write_checkpoint


def _golden_inputs(golden):
    return {k: torch.from_numpy(golden[k]).long() for k in ("input_ids", "attention_mask", "token_type_ids")}


def _finetuned_from_hub(shared_data, folder, head: dict[str, np.ndarray]):
    """module/<every golden variable> (+ Adam slots), the un-prefixed head (+ slots) and global_step."""
    golden_dir = shared_data / "albert-tf-golden" / "tiny"
    tensors = {f"module/{k}": v for k, v in read_checkpoint(golden_dir / "model.ckpt").items()}
    tensors.update(head)
    for name in list(tensors):
        tensors[f"{name}/adam_m"] = np.zeros_like(tensors[name])
        tensors[f"{name}/adam_v"] = np.ones_like(tensors[name])
    tensors["global_step"] = np.array(1234, dtype=np.int64)
    folder.mkdir(parents=True)
    write_checkpoint(folder / "model.ckpt-1234", tensors)
    shutil.copy(golden_dir / "albert_config.json", folder / "albert_config.json")
    return folder, np.load(golden_dir / "golden_io.npz")


@pytest.mark.parametrize("source", ["auto", "tfhub"])
def test_classifier_finetuned_from_hub_module(shared_data, tmp_path, capsys, source):
    rng = np.random.default_rng(0)
    w, b = rng.standard_normal((3, 32)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    folder, golden = _finetuned_from_hub(shared_data, tmp_path / "ckpt", {"output_weights": w, "output_bias": b})
    out = tmp_path / "out"
    assert main(["convert", str(folder), "--out", str(out), "--from", source]) == 0
    stdout = capsys.readouterr().out
    assert "source tfhub" in stdout and "architecture: AlbertForSequenceClassification" in stdout
    assert "head output_bias, output_weights" in stdout and "global_step: training step counter" in stdout
    model = litebert.AlbertForSequenceClassification.from_pretrained(out).eval()
    assert model.load_report["initialised"] == [] and model.config.num_labels == 3
    with torch.no_grad():
        result = model(**_golden_inputs(golden))
    np.testing.assert_allclose(result.sequence_output.numpy(), golden["sequence_output"], atol=1e-5, rtol=0)
    np.testing.assert_allclose(result.logits.numpy(), golden["pooled_output"] @ w.T + b, atol=1e-5, rtol=0)


def test_race_head_finetuned_from_hub_module(shared_data, tmp_path):
    rng = np.random.default_rng(1)
    w, b = rng.standard_normal((1, 32)).astype(np.float32), rng.standard_normal(1).astype(np.float32)
    folder, golden = _finetuned_from_hub(shared_data, tmp_path / "ckpt", {"output_weights": w, "output_bias": b})
    report = convert_checkpoint(folder, tmp_path / "out", head="multiple-choice")
    assert report.architecture == "AlbertForMultipleChoice"
    model = litebert.AlbertForMultipleChoice.from_pretrained(tmp_path / "out").eval()
    inputs = {k: v.unsqueeze(0) for k, v in _golden_inputs(golden).items()}  # one question, its 2 rows as choices
    with torch.no_grad():
        logits = model(**inputs).logits  # [1, 2]
    want = (golden["pooled_output"] @ w.T + b).reshape(1, 2)  # race_utils: logits reshaped [bsz, num_choices]
    np.testing.assert_allclose(logits.numpy(), want, atol=1e-5, rtol=0)
    # Three labels cannot be a run_race head.
    folder3, _ = _finetuned_from_hub(shared_data, tmp_path / "three", {"output_weights": np.zeros((3, 32), "f4"),
                                                                      "output_bias": np.zeros(3, "f4")})
    with pytest.raises(ConversionError, match=r"needs the official run_race head, output_weights \[1, H\]; the "
                                              r"checkpoint has output_weights \[3, 32\]"):
        convert_checkpoint(folder3, tmp_path / "out3", head="multiple-choice")


def test_squad_heads_finetuned_from_hub_module(shared_data, tmp_path, capsys):
    rng = np.random.default_rng(2)
    w, b = rng.standard_normal((2, 32)).astype(np.float32), rng.standard_normal(2).astype(np.float32)
    folder, golden = _finetuned_from_hub(shared_data, tmp_path / "v1", {"cls/squad/output_weights": w,
                                                                        "cls/squad/output_bias": b})
    convert_checkpoint(folder, tmp_path / "out")  # run_squad_v1's cls/squad/* -> the span head
    model = litebert.AlbertForQuestionAnswering.from_pretrained(tmp_path / "out").eval()
    with torch.no_grad():
        out = model(**_golden_inputs(golden))
    span = golden["sequence_output"] @ w.T + b  # [B, T, 2]
    valid = golden["attention_mask"].astype(bool)  # litebert masks padding out of the span logits
    np.testing.assert_allclose(out.start_logits.numpy()[valid], span[..., 0][valid], atol=1e-5, rtol=0)
    np.testing.assert_allclose(out.end_logits.numpy()[valid], span[..., 1][valid], atol=1e-5, rtol=0)
    # run_squad_v2's head (end logits conditioned on the start) has no litebert equivalent: a clear refusal.
    v2 = {"start_logits/dense/kernel": np.zeros((32, 1), "f4"), "start_logits/dense/bias": np.zeros(1, "f4"),
          "answer_class/dense_1/kernel": np.zeros((32, 1), "f4")}
    folder2, _ = _finetuned_from_hub(shared_data, tmp_path / "v2", v2)
    assert main(["convert", str(folder2), "--out", str(tmp_path / "out2")]) == 2
    err = capsys.readouterr().err
    assert "official SQuAD v2 head" in err and "--allow-unused" in err and "Traceback" not in err
