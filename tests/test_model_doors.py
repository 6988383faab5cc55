"""A model directory from elsewhere is checked before it is built, by every loader (docs/reliability.md, promise
14): absurd sizes in its config.json (a vocabulary of 10^12, an FFN of 10^10, a width of 10^6) are refused by the
memory estimate, and a depth of 10^6 layers (few parameters, hours per forward pass) by the size rule, naming the
file and the field, before any allocation: `predict`, `fill-mask`, `serve`, `export-onnx`, `convert` and
`finetune --model` alike. Its JSON files are read only when they are regular files of bounded size."""

from __future__ import annotations

import json
import re

import pytest

from litebert.cli import main as cli_main
from tiny_models import save_model, tokenizer

ABSURD = {"vocab_size": 10 ** 12, "intermediate_size": 10 ** 10, "hidden_size": 10 ** 6,
          "num_hidden_layers": 10 ** 6}


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory, shared_data):
    tok = tokenizer(shared_data)
    root = tmp_path_factory.mktemp("doors")
    return {"mlm": save_model(root / "mlm", "AlbertForMaskedLM", tok),
            "sst": save_model(root / "sst", "AlbertForSequenceClassification", tok)}


def _absurd_copy(src, dst, field, value):
    import shutil

    shutil.copytree(src, dst)
    config = json.loads((dst / "config.json").read_text())
    config[field] = value
    if field == "hidden_size":
        config["num_attention_heads"] = 1
    if field == "vocab_size":  # keep the tokenizer's ids inside the (absurd) vocabulary: only the size is wrong
        config["pad_token_id"] = 0
    (dst / "config.json").write_text(json.dumps(config))
    return dst


def _commands(model, tmp_path):
    data = tmp_path / "sst"
    data.mkdir(exist_ok=True)
    for split in ("train", "dev"):
        (data / f"{split}.tsv").write_text("sentence\tlabel\na fine film\t1\na dull film\t0\n")
    return {
        "predict": ["predict", "sst-2", "--model", str(model), "--text", "a fine film"],
        "fill-mask": ["fill-mask", "--model", str(model), "a [MASK] film"],
        "serve": ["serve", "--model", str(model), "--port", "1"],  # refused before it binds (port 1 would fail)
        "export-onnx": ["export-onnx", str(model), "--out", str(tmp_path / "onnx")],
        "convert": ["convert", str(model), "--out", str(tmp_path / "converted")],
        "finetune": ["finetune", "sst-2", "--model", str(model), "--data", str(data),
                     "--out", str(tmp_path / "ft")],
    }


@pytest.mark.parametrize("field", sorted(ABSURD))
@pytest.mark.parametrize("command", ["predict", "fill-mask", "serve", "export-onnx", "convert", "finetune"])
def test_absurd_sizes_are_refused_by_every_loader(model_dirs, tmp_path, capsys, field, command):
    """Today: the allocator's traceback (or, for the depth, a hang that ignores SIGTERM)."""
    pytest.importorskip("fastapi") if command == "serve" else None
    src = model_dirs["mlm" if command == "fill-mask" else "sst"]
    model = _absurd_copy(src, tmp_path / "model", field, ABSURD[field])
    assert cli_main(_commands(model, tmp_path)[command]) == 2
    err = capsys.readouterr().err
    assert re.search(rf"litebert: error: {re.escape(str(model / 'config.json'))}: config field '{field}' = ", err), err
    assert "Traceback" not in err


@pytest.mark.parametrize("name", ["config.json", "tokenizer_config.json"])
@pytest.mark.parametrize("fault", ["dev/zero", "fifo"])
def test_a_model_json_linked_to_dev_zero_or_a_fifo_is_refused(model_dirs, tmp_path, capsys, name, fault):
    """Today: MemoryError for /dev/zero, a hang for a FIFO."""
    import os
    import shutil

    model = tmp_path / "model"
    shutil.copytree(model_dirs["mlm"], model)
    (model / name).unlink()
    if fault == "fifo":
        os.mkfifo(model / name)
    else:
        (model / name).symlink_to("/dev/zero")
    assert cli_main(["fill-mask", "--model", str(model), "a [MASK] film"]) == 2
    err = capsys.readouterr().err
    kind = "a FIFO" if fault == "fifo" else "a device"
    assert f"{model / name}: not a regular file ({kind})" in err, err
