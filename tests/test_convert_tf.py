"""TF / TF-Hub / albert_zh checkpoints -> Hugging Face ALBERT, checked against outputs of the official TF graph."""

import json
import shutil
import sys

import numpy as np
import pytest
import torch

from litebert.convert.tf_bundle import read_checkpoint
from litebert.convert.tf_map import load_tf_albert
from litebert.errors import CheckpointError, ConversionError
from tf_fixtures import hf_to_tf_tensors, write_checkpoint
from tiny_models import ALBERT_ZH_GOOGLE_CONFIG

transformers = pytest.importorskip("transformers")

GOLDEN = ("tiny", "grouped")


def _golden_dir(shared_data, name):
    return shared_data / "albert-tf-golden" / name


def _official_config(shared_data, name):
    return json.loads((_golden_dir(shared_data, name) / "albert_config.json").read_text())


def _write_dir(folder, tensors, config, prefix="model.ckpt", config_name="albert_config.json"):
    folder.mkdir(parents=True, exist_ok=True)
    write_checkpoint(folder / prefix, tensors)
    (folder / config_name).write_text(json.dumps(config))
    return folder


def _hf_model(cfg, state, cls="AlbertForPreTraining"):
    model = getattr(transformers, cls)(transformers.AlbertConfig(**cfg)).eval()
    model.load_state_dict(state, strict=True)
    return model


def _golden_inputs(golden):
    return {k: torch.from_numpy(golden[k]).long() for k in ("input_ids", "attention_mask", "token_type_ids")}


def _assert_same_state(a, b):
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


# ---------------------------------------------------------------------------------------------------- golden


@pytest.mark.parametrize("name", GOLDEN)
def test_golden_checkpoints_reproduce_official_outputs(shared_data, name):
    cfg, state, report = load_tf_albert(_golden_dir(shared_data, name))
    assert "tensorflow" not in sys.modules  # converted without TensorFlow
    assert report.architecture == "AlbertForPreTraining" and not report.unused and not report.skipped
    golden = np.load(_golden_dir(shared_data, name) / "golden_io.npz")
    model = _hf_model(cfg, state)
    with torch.no_grad():
        inputs = _golden_inputs(golden)
        base = model.albert(**inputs)
        out = model(**inputs)
    got = {
        "sequence_output": base.last_hidden_state,
        "pooled_output": base.pooler_output,
        "mlm_logits": out.prediction_logits,
        "sop_logits": out.sop_logits,
    }
    for key, value in got.items():
        np.testing.assert_allclose(value.numpy(), golden[key], atol=1e-5, rtol=0, err_msg=f"{name} {key}")


def test_activation_and_identity_projection(shared_data):
    tiny_cfg, _, tiny = load_tf_albert(_golden_dir(shared_data, "tiny"))
    assert tiny_cfg["hidden_act"] == "gelu_new"  # official "gelu" is the tanh form
    assert not any("embedding_hidden_mapping_in" in hf for hf, _, _ in tiny.synthesized)
    cfg, state, report = load_tf_albert(_golden_dir(shared_data, "grouped"))
    assert cfg["hidden_act"] == "relu" and cfg["num_hidden_groups"] == 2 and cfg["inner_group_num"] == 2
    assert torch.equal(state["albert.encoder.embedding_hidden_mapping_in.weight"], torch.eye(32))
    assert torch.equal(state["albert.encoder.embedding_hidden_mapping_in.bias"], torch.zeros(32))
    assert any("identity" in why for hf, _, why in report.synthesized if "mapping_in.weight" in hf)
    text = report.format_report()
    for needle in ("mapped 78 tensor(s)", "synthesized", "identity", "skipped 0", "unused 0"):
        assert needle in text


@pytest.mark.parametrize("name", GOLDEN)
def test_inverse_table_gives_back_the_tf_tensors(shared_data, name):
    cfg, state, _ = load_tf_albert(_golden_dir(shared_data, name))
    original = read_checkpoint(_golden_dir(shared_data, name) / "model.ckpt")
    back = hf_to_tf_tensors(state, cfg)
    assert back.keys() == original.keys()
    for k in original:
        assert np.array_equal(back[k], original[k]), k


# ---------------------------------------------------------------------------------------------------- TF-Hub


def test_tfhub_prefixed_copy_converts_identically(shared_data, tmp_path):
    tensors = read_checkpoint(_golden_dir(shared_data, "tiny") / "model.ckpt")
    hub = tmp_path / "hub"
    (hub / "assets").mkdir(parents=True)
    write_checkpoint(hub / "variables" / "variables", {f"module/{k}": v for k, v in tensors.items()})
    shutil.copy(_golden_dir(shared_data, "tiny") / "albert_config.json", hub / "assets" / "albert_config.json")
    cfg, state, report = load_tf_albert(hub)  # source auto-detected
    assert report.source == "tfhub"
    assert all(tf.startswith("module/") for tf, _, _ in report.mapped)
    ref_cfg, ref_state, _ = load_tf_albert(_golden_dir(shared_data, "tiny"))
    assert cfg == ref_cfg
    _assert_same_state(state, ref_state)
    _, state2, _ = load_tf_albert(hub / "variables" / "variables.index", source="tfhub")
    _assert_same_state(state2, ref_state)
    with pytest.raises(ConversionError, match="tfhub"):
        load_tf_albert(hub, source="tf")


# ---------------------------------------------------------------------------------------------------- albert_zh


def test_albert_zh_google_layout_roundtrip(shared_data, tmp_path):
    vocab = shared_data / "chinese" / "albert_zh_vocab.txt"
    official = dict(ALBERT_ZH_GOOGLE_CONFIG)
    torch.manual_seed(0)
    hf_cfg = transformers.AlbertConfig(
        **{k: official[k] for k in ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers",
                                    "num_attention_heads", "intermediate_size", "max_position_embeddings")},
        hidden_act="relu",
    )  # fmt: skip
    source_model = transformers.AlbertForPreTraining(hf_cfg).eval()
    source_state = source_model.state_dict()
    folder = _write_dir(
        tmp_path / "albert_tiny_zh_google",
        hf_to_tf_tensors(source_state, {"embedding_size": 16, "hidden_size": 32}),
        official,
        prefix="albert_model.ckpt",
        config_name="albert_config_tiny_g.json",
    )
    shutil.copy(vocab, folder / "vocab.txt")
    cfg, state, report = load_tf_albert(folder, source="albert_zh")
    assert report.source == "albert_zh" and report.layout == "official"
    assert cfg["hidden_act"] == "relu" and cfg["vocab_size"] == 21128
    assert (cfg["pad_token_id"], cfg["bos_token_id"], cfg["eos_token_id"]) == (0, 101, 102)  # [PAD] [CLS] [SEP]
    assert any("WordPiece" in n for n in report.notes) and str(folder / "vocab.txt") in report.tokenizer_files
    assert state.keys() == source_state.keys()
    for k in source_state:
        assert torch.equal(state[k], source_state[k]), k


def _brightmart_tensors(shared_layers: bool, V=60, E=8, H=16, inner=32, P=24, L=3):
    rng = np.random.default_rng(1)

    def w(*shape, scale=0.3):
        return (scale * rng.standard_normal(shape)).astype(np.float32)

    t = {
        "bert/embeddings/word_embeddings": w(V, E),
        "bert/embeddings/word_embeddings_2": w(E, H),
        "bert/embeddings/token_type_embeddings": w(2, H),
        "bert/embeddings/position_embeddings": w(P, H),
    }

    def dense(scope, n_in, n_out):
        t[f"{scope}/kernel"], t[f"{scope}/bias"] = w(n_in, n_out), w(n_out, scale=0.1)

    def norm(scope, n):
        t[f"{scope}/gamma"], t[f"{scope}/beta"] = 1 + w(n, scale=0.1), w(n, scale=0.1)

    norm("bert/embeddings/LayerNorm", H)
    for scope in ["bert/encoder/layer_shared"] if shared_layers else [f"bert/encoder/layer_{i}" for i in range(L)]:
        for proj in ("query", "key", "value"):
            dense(f"{scope}/attention/self/{proj}", H, H)
        dense(f"{scope}/attention/output/dense", H, H)
        norm(f"{scope}/attention/output/LayerNorm", H)
        dense(f"{scope}/intermediate/dense", H, inner)
        dense(f"{scope}/output/dense", inner, H)
        norm(f"{scope}/output/LayerNorm", H)
    dense("bert/pooler/dense", H, H)
    dense("cls/predictions/transform/dense", H, H)
    norm("cls/predictions/transform/LayerNorm", H)
    t["cls/predictions/output_bias"] = w(V, scale=0.1)
    t["cls/seq_relationship/output_weights"], t["cls/seq_relationship/output_bias"] = w(2, H), w(2, scale=0.1)
    config = {  # brightmart albert_config_base.json style (BertConfig fields + embedding_size)
        "attention_probs_dropout_prob": 0.0, "directionality": "bidi", "hidden_act": "gelu",
        "hidden_dropout_prob": 0.0, "hidden_size": H, "embedding_size": E, "initializer_range": 0.02,
        "intermediate_size": inner, "max_position_embeddings": P, "num_attention_heads": 4, "num_hidden_layers": L,
        "pooler_fc_size": H, "pooler_num_attention_heads": 4, "pooler_num_fc_layers": 3, "pooler_size_per_head": 4,
        "pooler_type": "first_token_transform", "type_vocab_size": 2, "vocab_size": V,
    }  # fmt: skip
    return t, config


def _brightmart_reference(t, config, inputs):
    """brightmart's modeling.py + run_pretraining.py heads, computed with transformers' BERT (post-LN layers)."""
    L, H = config["num_hidden_layers"], config["hidden_size"]
    bert_cfg = transformers.BertConfig(
        vocab_size=config["vocab_size"], hidden_size=H, num_hidden_layers=L, num_attention_heads=4,
        intermediate_size=config["intermediate_size"], hidden_act="gelu_new", hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, max_position_embeddings=config["max_position_embeddings"],
        type_vocab_size=2, layer_norm_eps=1e-12,
    )  # fmt: skip
    bert = transformers.BertForPreTraining(bert_cfg).eval()
    sd = {}

    def lin(hf, tf):  # TF kernel [in, out] -> torch Linear weight [out, in]
        sd[f"{hf}.weight"] = torch.from_numpy(t[f"{tf}/kernel"].T.copy())
        sd[f"{hf}.bias"] = torch.from_numpy(t[f"{tf}/bias"])

    def ln(hf, tf):
        sd[f"{hf}.weight"] = torch.from_numpy(t[f"{tf}/gamma"])
        sd[f"{hf}.bias"] = torch.from_numpy(t[f"{tf}/beta"])

    sd["bert.embeddings.position_embeddings.weight"] = torch.from_numpy(t["bert/embeddings/position_embeddings"])
    sd["bert.embeddings.token_type_embeddings.weight"] = torch.from_numpy(t["bert/embeddings/token_type_embeddings"])
    ln("bert.embeddings.LayerNorm", "bert/embeddings/LayerNorm")
    for i in range(L):
        shared = "bert/encoder/layer_shared/output/dense/bias" in t
        scope = "bert/encoder/layer_shared" if shared else f"bert/encoder/layer_{i}"
        layer = f"bert.encoder.layer.{i}"
        for proj in ("query", "key", "value"):
            lin(f"{layer}.attention.self.{proj}", f"{scope}/attention/self/{proj}")
        lin(f"{layer}.attention.output.dense", f"{scope}/attention/output/dense")
        ln(f"{layer}.attention.output.LayerNorm", f"{scope}/attention/output/LayerNorm")
        lin(f"{layer}.intermediate.dense", f"{scope}/intermediate/dense")
        lin(f"{layer}.output.dense", f"{scope}/output/dense")
        ln(f"{layer}.output.LayerNorm", f"{scope}/output/LayerNorm")
    lin("bert.pooler.dense", "bert/pooler/dense")
    lin("cls.predictions.transform.dense", "cls/predictions/transform/dense")
    ln("cls.predictions.transform.LayerNorm", "cls/predictions/transform/LayerNorm")
    sd["cls.seq_relationship.weight"] = torch.from_numpy(t["cls/seq_relationship/output_weights"])  # [2, H]
    sd["cls.seq_relationship.bias"] = torch.from_numpy(t["cls/seq_relationship/output_bias"])
    missing, _ = bert.load_state_dict(sd, strict=False)
    assert all("word_embeddings" in k or "decoder" in k or "predictions.bias" in k for k in missing), missing
    word = torch.from_numpy(t["bert/embeddings/word_embeddings"])
    proj = torch.from_numpy(t["bert/embeddings/word_embeddings_2"])
    with torch.no_grad():
        embeds = word[inputs["input_ids"]] @ proj  # embedding_lookup_factorized: gather [B,T,E], then project [B,T,H]
        out = bert.bert(inputs_embeds=embeds, attention_mask=inputs["attention_mask"],
                        token_type_ids=inputs["token_type_ids"])  # fmt: skip
        h = bert.cls.predictions.transform(out.last_hidden_state)  # [B,T,H]
        mlm = (h @ proj.T) @ word.T + torch.from_numpy(t["cls/predictions/output_bias"])  # get_masked_lm_output
        sop = bert.cls.seq_relationship(out.pooler_output)
    return out.last_hidden_state, out.pooler_output, mlm, sop


@pytest.mark.parametrize("shared_layers", [True, False])
def test_albert_zh_brightmart_layout_is_exact(tmp_path, shared_layers):
    tensors, config = _brightmart_tensors(shared_layers)
    folder = _write_dir(tmp_path / "bright", tensors, config, prefix="albert_model.ckpt")
    with pytest.raises(ConversionError, match="albert_zh"):
        load_tf_albert(folder, source="tf")
    cfg, state, report = load_tf_albert(folder)
    assert report.layout == "brightmart" and report.source == "albert_zh"
    assert cfg["embedding_size"] == cfg["hidden_size"] == 16
    assert cfg["num_hidden_groups"] == (1 if shared_layers else 3)
    assert any("folded" in n for n in report.notes)
    gen = torch.Generator().manual_seed(0)
    inputs = {
        "input_ids": torch.randint(0, 60, (2, 10), generator=gen),
        "attention_mask": torch.tensor([[1] * 10, [1] * 7 + [0] * 3]),
        "token_type_ids": torch.tensor([[0] * 5 + [1] * 5, [0] * 4 + [1] * 6]),
    }
    model = _hf_model(cfg, state)
    with torch.no_grad():
        base = model.albert(**inputs)
        out = model(**inputs)
    ref = _brightmart_reference(tensors, config, inputs)
    for got, want in zip((base.last_hidden_state, base.pooler_output, out.prediction_logits, out.sop_logits), ref):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


def test_preln_config_is_refused(tmp_path):
    tensors, config = _brightmart_tensors(True)
    folder = _write_dir(tmp_path / "preln", tensors, {**config, "ln_type": "preln"})
    with pytest.raises(ConversionError, match="pre-LayerNorm"):
        load_tf_albert(folder)


# ---------------------------------------------------------------------------------------------------- heads, skips


def test_finetuned_heads(shared_data, tmp_path):
    base = read_checkpoint(_golden_dir(shared_data, "tiny") / "model.ckpt")
    base = {k: v for k, v in base.items() if not k.startswith("cls/")}
    cfg_json = _official_config(shared_data, "tiny")
    rng = np.random.default_rng(2)
    golden = np.load(_golden_dir(shared_data, "tiny") / "golden_io.npz")
    inputs = _golden_inputs(golden)

    cls_w, cls_b = rng.standard_normal((3, 32)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    folder = _write_dir(tmp_path / "cls", {**base, "output_weights": cls_w, "output_bias": cls_b}, cfg_json)
    cfg, state, report = load_tf_albert(folder)
    assert report.architecture == "AlbertForSequenceClassification" and cfg["num_labels"] == 3
    model = _hf_model(cfg, state, "AlbertForSequenceClassification")
    with torch.no_grad():
        logits = model(**inputs).logits
    np.testing.assert_allclose(logits.numpy(), golden["pooled_output"] @ cls_w.T + cls_b, atol=1e-5)

    qa_w, qa_b = rng.standard_normal((2, 32)).astype(np.float32), rng.standard_normal(2).astype(np.float32)
    folder = _write_dir(tmp_path / "qa", {**base, "cls/squad/output_weights": qa_w, "cls/squad/output_bias": qa_b},
                        cfg_json)  # fmt: skip
    cfg, state, report = load_tf_albert(folder)
    assert report.architecture == "AlbertForQuestionAnswering"
    assert any("no pooler" in n for n in report.notes)  # HF's QA model has none; the TF graph still saved one
    state = {k: v for k, v in state.items() if not k.startswith("albert.pooler.")}
    model = _hf_model(cfg, state, "AlbertForQuestionAnswering")
    with torch.no_grad():
        out = model(**inputs)
    span = golden["sequence_output"] @ qa_w.T + qa_b  # [B, T, 2]
    np.testing.assert_allclose(out.start_logits.numpy(), span[..., 0], atol=1e-5)
    np.testing.assert_allclose(out.end_logits.numpy(), span[..., 1], atol=1e-5)


def test_optimizer_slots_are_skipped_and_listed(shared_data, tmp_path):
    tensors = read_checkpoint(_golden_dir(shared_data, "tiny") / "model.ckpt")
    extra = {"global_step": np.array(125000, dtype=np.int64)}
    for name in ("bert/pooler/dense/kernel", "cls/predictions/output_bias"):
        extra[f"{name}/adam_m"] = np.zeros_like(tensors[name])
        extra[f"{name}/adam_v"] = np.ones_like(tensors[name])
    extra["bert/pooler/dense/kernel/LAMB"] = np.zeros_like(tensors["bert/pooler/dense/kernel"])
    extra["bert/pooler/dense/bias/AdamWeightDecayOptimizer_1"] = np.zeros(32, np.float32)
    folder = _write_dir(tmp_path / "slots", {**tensors, **extra}, _official_config(shared_data, "tiny"))
    cfg, state, report = load_tf_albert(folder)
    assert sorted(n for n, _ in report.skipped) == sorted(extra)
    assert dict(report.skipped)["global_step"] == "training step counter"
    assert all("optimizer" in why for n, why in report.skipped if n != "global_step")
    _assert_same_state(state, load_tf_albert(_golden_dir(shared_data, "tiny"))[1])
    assert f"skipped {len(extra)} on purpose" in report.format_report()


def test_unused_tensors_error_or_listed(shared_data, tmp_path):
    tensors = read_checkpoint(_golden_dir(shared_data, "tiny") / "model.ckpt")
    extra = {
        "my_head/dense/kernel": np.zeros((32, 4), np.float32),
        "start_logits/dense/kernel": np.zeros((32, 1), np.float32),
    }
    folder = _write_dir(tmp_path / "unused", {**tensors, **extra}, _official_config(shared_data, "tiny"))
    with pytest.raises(ConversionError, match=r"(?s)2 tensor\(s\).*my_head/dense/kernel \[32, 4\].*allow_unused"):
        load_tf_albert(folder)
    cfg, state, report = load_tf_albert(folder, allow_unused=True)
    reasons = dict(report.unused)
    assert reasons.keys() == extra.keys()
    assert "SQuAD v2" in reasons["start_logits/dense/kernel"]
    assert "unused 2" in report.format_report()


def test_shape_mismatch_names_both_sides(shared_data, tmp_path):
    tensors = read_checkpoint(_golden_dir(shared_data, "tiny") / "model.ckpt")
    bad = "bert/encoder/transformer/group_0/inner_group_0/attention_1/self/query/kernel"
    tensors[bad] = np.zeros((16, 32), np.float32)
    folder = _write_dir(tmp_path / "shape", tensors, _official_config(shared_data, "tiny"))
    with pytest.raises(ConversionError) as e:
        load_tf_albert(folder)
    msg = str(e.value)
    assert bad in msg and "albert.encoder.albert_layer_groups.0.albert_layers.0.attention.query.weight" in msg
    assert "[16, 32]" in msg and "[32, 32]" in msg


def test_config_problems(shared_data, tmp_path):
    tensors = read_checkpoint(_golden_dir(shared_data, "tiny") / "model.ckpt")
    folder = tmp_path / "noconfig"
    folder.mkdir()
    write_checkpoint(folder / "model.ckpt", tensors)
    with pytest.raises(ConversionError, match="config=PATH"):
        load_tf_albert(folder)
    cfg = _official_config(shared_data, "tiny")
    with pytest.raises(ConversionError, match="group 14 but Hugging Face ALBERT would use group 15"):
        load_tf_albert(folder, config={**cfg, "num_hidden_layers": 22, "num_hidden_groups": 22})
    with pytest.raises(ConversionError, match="num_hidden_groups=2.*no such parameter|lacks"):
        load_tf_albert(folder, config={**cfg, "num_hidden_groups": 2})
    with pytest.raises(ConversionError, match="missing field"):
        load_tf_albert(folder, config={k: v for k, v in cfg.items() if k != "num_attention_heads"})


def test_damaged_files_raise_checkpoint_error(shared_data, tmp_path):
    for f in _golden_dir(shared_data, "tiny").iterdir():
        shutil.copy(f, tmp_path / f.name)
        (tmp_path / f.name).chmod(0o644)
    data = tmp_path / "model.ckpt.data-00000-of-00001"
    data.write_bytes(data.read_bytes()[:5000])
    with pytest.raises(CheckpointError, match=r"model\.ckpt\.data-00000-of-00001.*truncated"):
        load_tf_albert(tmp_path)
    index = tmp_path / "model.ckpt.index"
    raw = bytearray(index.read_bytes())
    raw[100] ^= 0xFF
    index.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match=r"model\.ckpt\.index: corrupt"):
        load_tf_albert(tmp_path)
