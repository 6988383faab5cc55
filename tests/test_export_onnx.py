"""`litebert export-onnx`: every task graph runs in onnxruntime and matches PyTorch at two batch sizes and
sequence lengths (dynamic axes), with padding; the pretraining graph of a converted official checkpoint
reproduces the TF outputs in golden_io.npz."""

import numpy as np
import pytest
import torch

import litebert
from litebert.cli import main
from litebert.export import TASKS

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

CONFIG = dict(vocab_size=97, embedding_size=16, hidden_size=32, num_hidden_layers=3, num_hidden_groups=1,
              num_attention_heads=4, intermediate_size=48, max_position_embeddings=32, num_labels=3)
# (batch, sequence) checked besides the traced (2, 8): one smaller, one larger, both ways.
SHAPES = [(1, 5), (3, 17)]


def _session(path):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _inputs(batch, seq, choices, seed):
    """Random ids with the second example (or choice) right-padded; ids at padding are arbitrary on purpose."""
    gen = torch.Generator().manual_seed(seed)
    shape = (batch, seq) if choices is None else (batch, choices, seq)
    ids = torch.randint(0, CONFIG["vocab_size"], shape, generator=gen)
    mask = torch.ones(shape, dtype=torch.long)
    if batch > 1:
        mask[1, ..., seq // 2:] = 0
    if choices is not None:
        mask[0, -1, seq - 2:] = 0
    types = torch.zeros(shape, dtype=torch.long)
    types[..., seq // 3:] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def _export(model_dir, task, out, *extra):
    assert main(["export-onnx", str(model_dir), "--task", task, "--out", str(out), "--graph-only", *extra]) == 0
    return _session(out)


@pytest.mark.parametrize("task", list(TASKS))
def test_every_task_matches_pytorch_with_dynamic_axes(tmp_path, capsys, task):
    spec = TASKS[task]
    torch.manual_seed(0)
    model = getattr(litebert, spec.model_class)(litebert.AlbertConfig(**CONFIG)).eval()
    model.save_pretrained(tmp_path / "model")
    session = _export(tmp_path / "model", task, tmp_path / "model.onnx")
    assert "onnxruntime vs PyTorch" in capsys.readouterr().out

    axes = ["batch", "choice", "sequence"] if spec.choice_axis else ["batch", "sequence"]
    assert [(i.name, i.type, i.shape) for i in session.get_inputs()] == [
        (name, "tensor(int64)", axes) for name in ("input_ids", "attention_mask", "token_type_ids")]
    assert [o.name for o in session.get_outputs()] == list(spec.outputs)
    choices = 4 if spec.choice_axis else None
    for i, (batch, seq) in enumerate(SHAPES):
        inputs = _inputs(batch, seq, choices and choices - i, seed=i)
        got = session.run(None, {k: v.numpy() for k, v in inputs.items()})
        with torch.no_grad():
            want = model(**inputs)
        for name, value in zip(spec.outputs, got):
            expected = getattr(want, spec.attrs.get(name, name)).numpy()
            assert value.shape == expected.shape, name
            np.testing.assert_allclose(value, expected, atol=1e-4, rtol=0, err_msg=f"{task} {name} {batch}x{seq}")


def test_converted_official_checkpoint_exports_to_the_golden_outputs(shared_data, tmp_path):
    golden_dir = shared_data / "albert-tf-golden" / "grouped"  # E == H, 2 groups x 2 inner blocks, relu
    assert main(["convert", str(golden_dir), "--out", str(tmp_path / "model")]) == 0
    golden = np.load(golden_dir / "golden_io.npz")
    feed = {k: golden[k].astype(np.int64) for k in ("input_ids", "attention_mask", "token_type_ids")}
    for task, names in (("pretraining", ("mlm_logits", "sop_logits")), ("base", ("sequence_output", "pooled_output"))):
        session = _export(tmp_path / "model", task, tmp_path / f"{task}.onnx", "--opset", "18")
        outputs = list(TASKS[task].outputs)  # transformers' names for the golden file's fields
        for name, value in zip(names, session.run(outputs, feed)):
            np.testing.assert_allclose(value, golden[name], atol=1e-4, rtol=0, err_msg=f"{task} {name}")


def test_missing_head_and_bad_opset_are_refused(tmp_path, capsys):
    torch.manual_seed(0)
    litebert.AlbertForPreTraining(litebert.AlbertConfig(**CONFIG)).save_pretrained(tmp_path / "model")
    assert main(["export-onnx", str(tmp_path / "model"), "--task", "classification", "--out",
                 str(tmp_path / "m.onnx")]) == 2
    err = capsys.readouterr().err
    assert "classifier.weight" in err and "--task" in err and "Traceback" not in err
    assert main(["export-onnx", str(tmp_path / "model"), "--task", "pretraining", "--out", str(tmp_path / "m.onnx"),
                 "--opset", "12"]) == 2
    assert "opset >= 14" in capsys.readouterr().err
    assert not (tmp_path / "m.onnx").exists()


def test_the_model_is_named_with_model_like_every_other_command(tmp_path, capsys):
    torch.manual_seed(0)
    litebert.AlbertForPreTraining(litebert.AlbertConfig(**CONFIG)).save_pretrained(tmp_path / "model")
    # --model reaches the exporter (which then refuses the opset), the positional DIR still works, and neither
    # or both is a clear usage error
    assert main(["export-onnx", "--model", str(tmp_path / "model"), "--out", str(tmp_path / "m.onnx"),
                 "--opset", "12"]) == 2
    assert "opset >= 14" in capsys.readouterr().err
    for argv in ([], [str(tmp_path / "model"), "--model", str(tmp_path / "model")]):
        assert main(["export-onnx", *argv, "--out", str(tmp_path / "m.onnx")]) == 2
        err = capsys.readouterr().err
        assert "give the model directory once" in err and "Traceback" not in err
    assert not (tmp_path / "m.onnx").exists()


@pytest.mark.slow
def test_dynamo_exporter_when_onnxscript_is_installed(tmp_path):
    pytest.importorskip("onnxscript")
    from litebert.export import export_onnx

    torch.manual_seed(0)
    litebert.AlbertForMultipleChoice(litebert.AlbertConfig(**CONFIG)).save_pretrained(tmp_path / "model")
    result = export_onnx(tmp_path / "model", tmp_path / "mc.onnx", "multiple-choice", opset=18, exporter="dynamo",
                         graph_only=True)
    assert result.max_abs_diff is not None and result.max_abs_diff <= 1e-4
    assert [i.shape for i in _session(tmp_path / "mc.onnx").get_inputs()][0] == ["batch", "choice", "sequence"]


def test_export_folder_is_self_contained_and_quantizes(tmp_path, shared_data):
    """The folder runs with onnxruntime + transformers' own tokenizer (no litebert), its outputs carry
    transformers' names, and the int8 graph is a real quantized graph that the pipeline serves."""
    transformers = pytest.importorskip("transformers")
    from litebert.export import export_onnx
    from tiny_models import TEXTS, save_model, tokenizer

    model_dir = save_model(tmp_path / "clf", "AlbertForSequenceClassification", tokenizer(shared_data), num_labels=2,
                           label_names=["neg", "pos"])
    result = export_onnx(model_dir, tmp_path / "export")  # no task: the directory's own head
    assert result.task == "classification" and result.path == tmp_path / "export" / "model.onnx"
    assert {p.name for p in result.files} >= {"model.onnx", "config.json", "spiece.model", "tokenizer_config.json",
                                               "inference.json"}
    hf_tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "export")
    feed = {k: v.astype(np.int64) for k, v in hf_tok(TEXTS, padding=True, return_tensors="np",
                                                      return_token_type_ids=True).items()}
    session = _session(tmp_path / "export" / "model.onnx")
    assert [o.name for o in session.get_outputs()] == ["logits"]
    (logits,) = session.run(None, {k: feed[k] for k in ("input_ids", "attention_mask", "token_type_ids")})
    want = litebert.pipeline(None, tmp_path / "export", "onnx")(TEXTS)  # the folder's own records
    config = transformers.AutoConfig.from_pretrained(tmp_path / "export")
    assert [config.id2label[int(i)] for i in logits.argmax(-1)] == [w["label"] for w in want]

    q = export_onnx(model_dir, tmp_path / "int8", quantize="int8")
    assert q.quantized and not any(p.name.endswith(".fp32.onnx") for p in (tmp_path / "int8").iterdir())
    onnx = pytest.importorskip("onnx")
    types = {t.data_type for t in onnx.load(str(q.path)).graph.initializer}
    assert onnx.TensorProto.INT8 in types or onnx.TensorProto.UINT8 in types
    got = litebert.pipeline(None, tmp_path / "int8", "onnx")(TEXTS)
    assert all(abs(g["scores"]["pos"] - w["scores"]["pos"]) < 0.1 for g, w in zip(got, want))
