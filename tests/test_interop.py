"""`litebert convert`: TF / TF-Hub / albert_zh / Hugging Face -> our directory, checked against the official TF
outputs (golden_io.npz) and against stock transformers."""

import json
import shutil
import sys

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

import litebert
from litebert.cli import main
from litebert.convert.tf_bundle import read_checkpoint
from tf_fixtures import hf_to_tf_tensors, write_checkpoint
from tiny_models import ALBERT_ZH_GOOGLE_CONFIG

transformers = pytest.importorskip("transformers")

GOLDEN = ("tiny", "grouped")
OUTPUTS = ("sequence_output", "pooled_output", "mlm_logits", "sop_logits")


def _golden(shared_data, name):
    return shared_data / "albert-tf-golden" / name


def _convert(capsys, *argv):
    rc = main(["convert", *map(str, argv)])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def _golden_inputs(golden):
    return {k: torch.from_numpy(golden[k]).long() for k in ("input_ids", "attention_mask", "token_type_ids")}


def _write_tf_dir(folder, tensors, config, prefix="model.ckpt", config_name="albert_config.json"):
    folder.mkdir(parents=True, exist_ok=True)
    write_checkpoint(folder / prefix, tensors)
    (folder / config_name).write_text(json.dumps(config))
    return folder


def _hf_load(cls_name, folder):
    """Stock transformers loads our directory with nothing missing, unexpected or resized."""
    model, info = getattr(transformers, cls_name).from_pretrained(folder, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"], info
    return model.eval()


# ---------------------------------------------------------------------------------------------------- TF golden


@pytest.mark.parametrize("name", GOLDEN)
def test_convert_golden_reproduces_official_tf_outputs(shared_data, tmp_path, capsys, name):
    out = tmp_path / "out"
    rc, stdout, _ = _convert(capsys, _golden(shared_data, name), "--out", out)
    assert rc == 0
    assert "tensorflow" not in sys.modules  # converted without TensorFlow
    for tf_name in read_checkpoint(_golden(shared_data, name) / "model.ckpt"):
        assert tf_name in stdout  # every tensor is listed with its target
    assert "skipped 0 on purpose" in stdout and "unused 0" in stdout

    golden = np.load(_golden(shared_data, name) / "golden_io.npz")
    inputs = _golden_inputs(golden)
    model = litebert.AlbertForPreTraining.from_pretrained(out).eval()
    assert model.load_report["initialised"] == [] and model.load_report["unused"] == []
    with torch.no_grad():
        ours = model(**inputs, masked_positions=None)  # MLM logits at every position, like the golden file
    for key in OUTPUTS:
        np.testing.assert_allclose(getattr(ours, key).numpy(), golden[key], atol=1e-5, rtol=0, err_msg=key)

    hf = _hf_load("AlbertForPreTraining", out)
    with torch.no_grad():
        theirs = hf(**inputs)
    np.testing.assert_allclose(theirs.prediction_logits.numpy(), golden["mlm_logits"], atol=1e-5, rtol=0)
    np.testing.assert_allclose(theirs.sop_logits.numpy(), golden["sop_logits"], atol=1e-5, rtol=0)


def test_identity_projection_is_normalised_and_survives_hf_round_trip(shared_data, tmp_path, capsys):
    first, second = tmp_path / "first", tmp_path / "second"
    assert _convert(capsys, _golden(shared_data, "grouped"), "--out", first)[0] == 0
    model = litebert.AlbertForPreTraining.from_pretrained(first)
    assert model.albert.encoder.project_in is None  # E == H: the official graph has no projection; neither do we
    stored = load_file(first / "model.safetensors")
    assert torch.equal(stored["albert.encoder.embedding_hidden_mapping_in.weight"], torch.eye(32))
    rc, stdout, _ = _convert(capsys, first, "--out", second)  # auto: a Hugging Face directory
    assert rc == 0 and "Hugging Face directory" in stdout and "identity" in stdout
    again = load_file(second / "model.safetensors")
    assert again.keys() == stored.keys()
    assert all(torch.equal(again[k], stored[k]) for k in stored)


def test_tfhub_prefixed_copy_converts_identically(shared_data, tmp_path, capsys):
    tensors = read_checkpoint(_golden(shared_data, "tiny") / "model.ckpt")
    hub = tmp_path / "hub"
    (hub / "assets").mkdir(parents=True)
    write_checkpoint(hub / "variables" / "variables", {f"module/{k}": v for k, v in tensors.items()})
    shutil.copy(_golden(shared_data, "tiny") / "albert_config.json", hub / "assets")
    rc, stdout, _ = _convert(capsys, hub, "--out", tmp_path / "from_hub")
    assert rc == 0 and "source tfhub" in stdout and "module/bert/pooler/dense/kernel" in stdout
    assert _convert(capsys, _golden(shared_data, "tiny"), "--out", tmp_path / "direct")[0] == 0
    a, b = load_file(tmp_path / "from_hub" / "model.safetensors"), load_file(tmp_path / "direct" / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert (json.loads((tmp_path / "from_hub" / "config.json").read_text())
            == json.loads((tmp_path / "direct" / "config.json").read_text()))
    rc, _, err = _convert(capsys, hub, "--out", tmp_path / "wrong", "--from", "tf")
    assert rc == 2 and "tfhub" in err


# ---------------------------------------------------------------------------------------------------- albert_zh


def test_albert_zh_google_layout_with_wordpiece_vocab(shared_data, tmp_path, capsys):
    vocab = shared_data / "chinese" / "albert_zh_vocab.txt"
    official = dict(ALBERT_ZH_GOOGLE_CONFIG)
    torch.manual_seed(0)
    source = transformers.AlbertForPreTraining(transformers.AlbertConfig(
        vocab_size=21128, embedding_size=16, hidden_size=32, num_hidden_layers=4, num_attention_heads=4,
        intermediate_size=48, max_position_embeddings=40, hidden_act="relu")).eval()
    tf_tensors = hf_to_tf_tensors(source.state_dict(), official)
    folder = _write_tf_dir(tmp_path / "albert_tiny_zh_google", tf_tensors, official, prefix="albert_model.ckpt",
                           config_name="albert_config_tiny_g.json")
    out = tmp_path / "out"
    rc, stdout, _ = _convert(capsys, folder, "--out", out, "--from", "albert_zh", "--vocab", vocab)
    assert rc == 0 and "source albert_zh" in stdout and "WordPieceTokenizer" in stdout

    tokenizer = litebert.load_tokenizer(out)
    assert isinstance(tokenizer, litebert.WordPieceTokenizer) and tokenizer.vocab_size == 21128
    reference = transformers.BertTokenizer(str(vocab), do_lower_case=True)
    text, pair = "阿尔伯特是一个轻量的模型。", "它共享各层参数"
    enc = tokenizer.batch_encode([text, pair], padding="longest", return_tensors="pt")
    assert enc["input_ids"][0].tolist() == reference(text)["input_ids"]

    model = litebert.AlbertForPreTraining.from_pretrained(out).eval()
    with torch.no_grad():
        ours = model(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"])
        theirs = source(**{k: enc[k] for k in ("input_ids", "attention_mask", "token_type_ids")})
    torch.testing.assert_close(ours.mlm_logits, theirs.prediction_logits, atol=1e-5, rtol=0)
    torch.testing.assert_close(ours.sop_logits, theirs.sop_logits, atol=1e-5, rtol=0)

    stored = load_file(out / "model.safetensors")  # round trip: the exact tensors we started from
    want = {k: v for k, v in source.state_dict().items() if not k.startswith("predictions.decoder.")}
    assert stored.keys() == want.keys() and all(torch.equal(stored[k], want[k]) for k in want)
    back = hf_to_tf_tensors(stored, official)
    assert back.keys() == tf_tensors.keys() and all(np.array_equal(back[k], tf_tensors[k]) for k in back)


def test_official_spm_beside_checkpoint_becomes_albert_tokenizer(shared_data, tmp_path, capsys):
    spm = shared_data / "albert-vocab" / "30k-clean.model"
    official = {"vocab_size": 30000, "embedding_size": 8, "hidden_size": 16, "num_hidden_layers": 1,
                "num_attention_heads": 2, "intermediate_size": 32, "hidden_act": "gelu", "max_position_embeddings": 32}
    torch.manual_seed(1)
    hf_cfg = transformers.AlbertConfig(**{**official, "hidden_act": "gelu_new"})  # official "gelu" is the tanh form
    source = transformers.AlbertForPreTraining(hf_cfg).eval()
    folder = _write_tf_dir(tmp_path / "ckpt", hf_to_tf_tensors(source.state_dict(), official), official)
    shutil.copy(spm, folder / "30k-clean.model")
    rc, stdout, _ = _convert(capsys, folder, "--out", tmp_path / "out")
    assert rc == 0 and "AlbertTokenizer" in stdout
    tokenizer = litebert.load_tokenizer(tmp_path / "out")
    assert isinstance(tokenizer, litebert.AlbertTokenizer) and tokenizer.vocab_size == 30000
    reference = transformers.AutoTokenizer.from_pretrained(tmp_path / "out")  # HF reads the saved files too
    assert (tmp_path / "out" / "tokenizer.json").is_file()
    text = "Hello, ALBERT world . (In 1,999, a café -- “lite”.)"  # user-defined symbols, a digit-comma, an accent
    assert tokenizer.encode(text).input_ids == reference(text)["input_ids"]
    model = litebert.AlbertForPreTraining.from_pretrained(tmp_path / "out").eval()
    ids = torch.tensor([tokenizer.encode("a lite bert").input_ids])
    with torch.no_grad():
        torch.testing.assert_close(model(ids).mlm_logits, source(ids).prediction_logits, atol=1e-5, rtol=0)


def test_vocab_larger_than_the_embedding_table_is_refused(shared_data, tmp_path, capsys):
    spm = shared_data / "albert-vocab" / "30k-clean.model"
    rc, _, err = _convert(capsys, _golden(shared_data, "tiny"), "--out", tmp_path / "o", "--vocab", spm)
    assert rc == 2 and "30000 tokens" in err and "1000 rows" in err


# ---------------------------------------------------------------------------------------------------- skipped, unused


def test_unused_tensors_exit_2_unless_allowed(shared_data, tmp_path, capsys):
    tensors = read_checkpoint(_golden(shared_data, "tiny") / "model.ckpt")
    config = json.loads((_golden(shared_data, "tiny") / "albert_config.json").read_text())
    extra = {"my_head/dense/kernel": np.zeros((32, 4), np.float32)}
    slots = {"global_step": np.array(7, np.int64), "bert/pooler/dense/kernel/adam_m": np.zeros((32, 32), np.float32)}
    folder = _write_tf_dir(tmp_path / "ckpt", {**tensors, **extra, **slots}, config)
    rc, stdout, err = _convert(capsys, folder, "--out", tmp_path / "refused")
    assert rc == 2 and "Traceback" not in err
    assert "my_head/dense/kernel [32, 4]" in err and "--allow-unused" in err
    assert not (tmp_path / "refused" / "model.safetensors").exists()

    rc, stdout, _ = _convert(capsys, folder, "--out", tmp_path / "allowed", "--allow-unused")
    assert rc == 0
    assert "unused 1" in stdout and "my_head/dense/kernel: no rule" in stdout
    assert "skipped 2 on purpose" in stdout
    assert "global_step: training step counter" in stdout and "bert/pooler/dense/kernel/adam_m: optimizer" in stdout
    assert "my_head" in (tmp_path / "allowed" / "conversion_report.txt").read_text()
    litebert.AlbertForPreTraining.from_pretrained(tmp_path / "allowed")


# ---------------------------------------------------------------------------------------------------- Hugging Face


HF_CLASSES = ["AlbertForSequenceClassification", "AlbertForTokenClassification", "AlbertForQuestionAnswering",
              "AlbertForMultipleChoice", "AlbertForMaskedLM", "AlbertModel"]


@pytest.mark.parametrize("cls_name", HF_CLASSES)
def test_hf_directory_converts_to_the_matching_litebert_class(tmp_path, capsys, cls_name):
    torch.manual_seed(2)
    hf_cfg = transformers.AlbertConfig(vocab_size=99, embedding_size=32, hidden_size=32, num_hidden_layers=3,
                                       num_hidden_groups=1, num_attention_heads=4, intermediate_size=40,
                                       max_position_embeddings=24,  # E == H, with a learned projection
                                       num_labels=2 if cls_name == "AlbertForQuestionAnswering" else 3)
    source = getattr(transformers, cls_name)(hf_cfg).eval()
    shard = {"max_shard_size": "20KB"} if cls_name == "AlbertModel" else {}  # sharded safetensors + index
    source.save_pretrained(tmp_path / "hf", **shard)
    rc, stdout, _ = _convert(capsys, tmp_path / "hf", "--out", tmp_path / "out", "--from", "hf")
    assert rc == 0 and f"architecture: {cls_name}" in stdout and "unused 0" in stdout
    assert json.loads((tmp_path / "out" / "config.json").read_text())["architectures"] == [cls_name]

    model = getattr(litebert, cls_name).from_pretrained(tmp_path / "out").eval()
    assert model.load_report["initialised"] == []
    gen = torch.Generator().manual_seed(0)
    shape = (2, 3, 9) if cls_name == "AlbertForMultipleChoice" else (2, 9)
    ids = torch.randint(0, 99, shape, generator=gen)
    mask = torch.ones(shape, dtype=torch.long)
    mask[1, ..., 5:] = 0  # the second example is padded
    with torch.no_grad():
        ours = model(ids, mask)
        theirs = source(input_ids=ids, attention_mask=mask)
    valid = mask.bool()  # HF's span head does not mask padding; ours sets it to the dtype minimum
    pairs = {
        "AlbertForSequenceClassification": lambda: [(ours.logits, theirs.logits)],
        "AlbertForTokenClassification": lambda: [(ours.logits, theirs.logits)],
        "AlbertForMultipleChoice": lambda: [(ours.logits, theirs.logits)],
        "AlbertForMaskedLM": lambda: [(ours.mlm_logits, theirs.logits)],
        "AlbertModel": lambda: [(ours.sequence_output, theirs.last_hidden_state),
                                (ours.pooled_output, theirs.pooler_output)],
        "AlbertForQuestionAnswering": lambda: [(ours.start_logits[valid], theirs.start_logits[valid]),
                                               (ours.end_logits[valid], theirs.end_logits[valid])],
    }[cls_name]()
    for got, want in pairs:
        torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    _hf_load(cls_name, tmp_path / "out")


def test_hf_pickle_only_directory_is_refused_without_unpickling(tmp_path, capsys):
    folder = tmp_path / "old"
    folder.mkdir()
    transformers.AlbertConfig(vocab_size=50, hidden_size=16, num_attention_heads=2).to_json_file(folder / "config.json")
    (folder / "pytorch_model.bin").write_bytes(b"\x80\x04 not even a valid pickle")
    rc, _, err = _convert(capsys, folder, "--out", tmp_path / "out")
    assert rc == 2 and "pytorch_model.bin" in err and "safetensors" in err and "never unpickles" in err


def test_hf_unknown_tensor_needs_allow_unused(tmp_path, capsys):
    from safetensors.torch import save_file

    source = transformers.AlbertForMaskedLM(transformers.AlbertConfig(
        vocab_size=50, embedding_size=8, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32)).eval()
    source.save_pretrained(tmp_path / "hf")
    tensors = load_file(tmp_path / "hf" / "model.safetensors")
    save_file({**tensors, "adapter.lora_A": torch.zeros(4, 16)}, str(tmp_path / "hf" / "model.safetensors"))
    rc, _, err = _convert(capsys, tmp_path / "hf", "--out", tmp_path / "out")
    assert rc == 2 and "adapter.lora_A [4, 16]" in err and "--allow-unused" in err
    rc, stdout, _ = _convert(capsys, tmp_path / "hf", "--out", tmp_path / "out", "--allow-unused")
    assert rc == 0 and "unused 1" in stdout and "adapter.lora_A" in stdout
