"""Pre-LayerNorm as an option (config `layer_norm_position="pre"`; ALBERT's own, and the default, is "post").

Pre-LN is checked against its definition written out with plain functional ops and the model's own weights
(x + f(LN(x)) per sub-layer, the official group schedule, one final LayerNorm); post-LN's parity with
transformers is tests/test_parity_hf.py. A pre-LN model trains, saves in litebert's format with the field in its
config.json, and loads back into pipelines and ONNX with the same outputs; every door that would write it as a
Hugging Face or official TF model (both post-LN only) refuses, naming the field."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import litebert
from litebert.config import AlbertConfig
from litebert.errors import LitebertError
from litebert.model import AlbertForMaskedLM, AlbertModel
from tiny_models import TEXTS, same, save_model, tokenizer

sys.path.insert(0, str(Path(__file__).parent / "reliability"))
from harness import config_args, pretrain_args, tiny_setup  # noqa: E402

# 4 layers over 2 shared groups: layers 0-1 run group 0, layers 2-3 group 1 (int(i * G / L)); E != H (projection)
CONFIG = dict(vocab_size=97, embedding_size=16, hidden_size=32, num_hidden_layers=4, num_hidden_groups=2,
              num_attention_heads=4, intermediate_size=48, max_position_embeddings=32)


def _inputs(seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, CONFIG["vocab_size"], (3, 11), generator=gen)
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0  # one right-padded row
    types = torch.zeros_like(ids)
    types[:, 5:] = 1
    return ids, mask, types


def pre_ln_by_definition(model: AlbertModel, ids, mask, types) -> torch.Tensor:
    """[B, L, H]: embeddings -> LN -> E->H, then for each layer i (group g = int(i*G/L)) x += attn(LN(x)),
    x += ffn(LN(x)), then one final LN; attention as softmax(q k^T / sqrt(d) - inf at padding) v."""
    c, emb, enc = model.config, model.embeddings, model.encoder
    B, L = ids.shape
    H, E, nh = c.hidden_size, c.embedding_size, c.num_attention_heads
    d = H // nh

    def ln(x, norm):
        return F.layer_norm(x, (x.shape[-1],), norm.weight, norm.bias, c.layer_norm_eps)

    x = emb.word_embeddings.weight[ids] + emb.position_embeddings.weight[:L] + emb.token_type_embeddings.weight[types]
    x = F.linear(ln(x, emb.norm), enc.project_in.weight, enc.project_in.bias)  # [B, L, E] -> [B, L, H]
    assert E != H
    blocked = (1 - mask)[:, None, None, :].bool()  # [B, 1, 1, L]: padded keys
    for i in range(c.num_hidden_layers):
        g = int(i * c.num_hidden_groups / c.num_hidden_layers)
        attn, ffn = enc.attention[g], enc.ffn[g]
        q, k, v = (t.view(B, L, nh, d).transpose(1, 2)  # [B, nh, L, d]
                   for t in F.linear(ln(x, attn.norm), attn.qkv.weight, attn.qkv.bias).split(H, dim=-1))
        scores = (q @ k.transpose(-1, -2) / d ** 0.5).masked_fill(blocked, -float("inf"))
        y = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, L, H)
        x = x + F.linear(y, attn.out.weight, attn.out.bias)
        h = F.gelu(F.linear(ln(x, ffn.norm), ffn.up.weight, ffn.up.bias), approximate="tanh")
        x = x + F.linear(h, ffn.down.weight, ffn.down.bias)
    return ln(x, enc.final_norm)


def _spread_norms(model) -> None:
    """Random LayerNorm gains and biases, so a test sees which norm is applied where (init is ones and zeros)."""
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(p + 0.3 * torch.randn(p.shape, generator=gen))


def test_pre_ln_is_its_definition_with_grouped_sharing():
    torch.manual_seed(0)
    model = AlbertModel(AlbertConfig(**CONFIG, layer_norm_position="pre")).eval()
    _spread_norms(model)
    ids, mask, types = _inputs()
    with torch.no_grad():
        got = model(ids, mask, types).sequence_output
        want = pre_ln_by_definition(model, ids, mask, types)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_same_weights_other_function_and_post_has_no_final_norm():
    torch.manual_seed(0)
    pre = AlbertModel(AlbertConfig(**CONFIG, layer_norm_position="pre")).eval()
    post = AlbertModel(AlbertConfig(**CONFIG)).eval()
    assert post.config.layer_norm_position == "post"  # ALBERT's is the default
    extra = set(pre.state_dict()) - set(post.state_dict())
    assert extra == {"encoder.final_norm.weight", "encoder.final_norm.bias"} and set(post.state_dict()) < set(
        pre.state_dict())
    post.load_state_dict({k: v for k, v in pre.state_dict().items() if k not in extra}, strict=True)
    ids, mask, types = _inputs()
    with torch.no_grad():
        a, b = pre(ids, mask, types).sequence_output, post(ids, mask, types).sequence_output
    assert (a - b).abs().max() > 0.1


def test_save_and_load_round_trip_in_litebert_format(tmp_path):
    torch.manual_seed(0)
    model = AlbertForMaskedLM(AlbertConfig(**CONFIG, layer_norm_position="pre")).eval()
    _spread_norms(model)
    model.save_pretrained(tmp_path / "m")  # "auto" picks litebert's format: HF cannot hold it
    saved = json.loads((tmp_path / "m" / "config.json").read_text())
    assert saved["format"] == "litebert" and saved["layer_norm_position"] == "pre"
    back = AlbertForMaskedLM.from_pretrained(tmp_path / "m").eval()
    assert back.config.layer_norm_position == "pre"
    assert back.state_dict().keys() == model.state_dict().keys()
    assert all(torch.equal(v, back.state_dict()[k]) for k, v in model.state_dict().items())
    ids, mask, types = _inputs()
    with torch.no_grad():
        assert torch.equal(model(ids, mask, types).mlm_logits, back(ids, mask, types).mlm_logits)
    card = (tmp_path / "m" / "README.md").read_text()
    assert "pre-LayerNorm" in card and "layer_norm_position 'pre'" in card  # says transformers cannot load it


def test_keys_of_earlier_runs_stay_the_same():
    """`litebert ablate` names runs by a digest of the config, and pretrain's run.json check compares configs: an
    ALBERT config is keyed as before the options (pre-LN, the distance bias) existed, so the committed records
    keep their names; a config that sets one differs."""
    post = AlbertConfig(**CONFIG)
    assert post.stable_dict() == {k: v for k, v in post.to_dict().items()
                                  if k not in ("layer_norm_position", "distance_bias")}
    for option in ({"layer_norm_position": "pre"}, {"distance_bias": [1.0, 0.5, 0.0, 0.0]}):
        assert AlbertConfig(**CONFIG, **option).stable_dict() == {**post.stable_dict(), **option}


# ------------------------------------------------------------------------------------------- doors that refuse


def test_every_post_ln_only_door_refuses_naming_the_field(tmp_path, capsys):
    from litebert.cli import main as cli_main
    from litebert.convert.hf_map import ours_to_hf

    config = AlbertConfig(**CONFIG, layer_norm_position="pre")
    model = AlbertForMaskedLM(config)
    named = r"layer_norm_position 'pre'"
    with pytest.raises(LitebertError, match=named + r".* has no HF equivalent"):
        model.save_pretrained(tmp_path / "hf", format="hf")
    assert not (tmp_path / "hf" / "model.safetensors").exists()
    with pytest.raises(LitebertError, match=named):
        config.to_hf_dict()
    with pytest.raises(LitebertError, match=named + r".* has no official albert_config.json form"):
        config.to_official_dict()  # the TF side
    with pytest.raises(LitebertError, match=named):
        ours_to_hf(model.state_dict(), config)
    # An HF config.json that says "pre" would be read by transformers as post-LN: refused, not dropped
    hf = AlbertConfig(**CONFIG).to_hf_dict()
    with pytest.raises(LitebertError, match=r"'layer_norm_position' is 'pre'.* post-LayerNorm only"):
        AlbertConfig.from_hf_dict({**hf, "layer_norm_position": "pre"})
    # An official-style file (no `sharing`) carrying the field is ours, read with it, not as the official dialect
    (tmp_path / "c.json").write_text(json.dumps({"vocab_size": 97, "hidden_size": 32, "num_attention_heads": 4,
                                                 "layer_norm_position": "pre"}))
    assert AlbertConfig.from_json(tmp_path / "c.json").layer_norm_position == "pre"
    with pytest.raises(LitebertError, match=r"'layer_norm_position' is 'middle'"):
        AlbertConfig(**CONFIG, layer_norm_position="middle")
    # `convert` writes Hugging Face directories: a (pre-LN) litebert directory is not a source it takes
    model.save_pretrained(tmp_path / "pre")
    assert cli_main(["convert", str(tmp_path / "pre"), "--out", str(tmp_path / "conv")]) == 2
    assert "already a litebert directory" in capsys.readouterr().err
    assert not (tmp_path / "conv" / "model.safetensors").exists()


# ------------------------------------------------------------------------------------------- pipelines and ONNX


@pytest.fixture(scope="module")
def pre_dirs(tmp_path_factory, shared_data):
    tok = tokenizer(shared_data)
    root = tmp_path_factory.mktemp("pre_ln")
    dirs = {"pretraining": save_model(root / "mlm", "AlbertForPreTraining", tok, layer_norm_position="pre"),
            "classification": save_model(root / "sst", "AlbertForSequenceClassification", tok,
                                         layer_norm_position="pre")}
    assert all(AlbertConfig.load(path).layer_norm_position == "pre" for path in dirs.values())
    return dirs, tok


def test_pipelines_of_a_pre_ln_dir_match_its_model(pre_dirs):
    dirs, tok = pre_dirs
    clf = litebert.pipeline(None, dirs["classification"], "fp32")
    got = clf(TEXTS)
    model = litebert.AlbertForSequenceClassification.from_pretrained(dirs["classification"]).eval()
    for text, g in zip(TEXTS, got):
        ids = torch.tensor([[tok.cls_id, *tok.encode_ids(text), tok.sep_id]])
        with torch.no_grad():
            probs = model(ids).logits[0].softmax(-1)
        assert g["label_id"] == int(probs.argmax()) and g["score"] == pytest.approx(float(probs.max()), abs=1e-5)

    fm = litebert.pipeline(None, dirs["pretraining"], "fp32")
    text = "the capital of [MASK] is paris ."
    top = fm(text, top_k=3)[0]
    mlm = AlbertForMaskedLM.from_pretrained(dirs["pretraining"]).eval()
    assert mlm.config.layer_norm_position == "pre"
    ids = [tok.cls_id, *tok.encode_ids("the capital of"), tok.mask_id, *tok.encode_ids("is paris ."), tok.sep_id]
    with torch.no_grad():
        logits = mlm(torch.tensor([ids])).mlm_logits[0, ids.index(tok.mask_id)]  # [V]
    logits[sorted(tok.special_ids)] = -float("inf")
    want = logits.softmax(-1).topk(3)
    assert [x["token_id"] for x in top] == want.indices.tolist()
    np.testing.assert_allclose([x["score"] for x in top], want.values.tolist(), atol=1e-5)


def test_onnx_export_of_pre_ln_matches_pytorch_and_serves_the_same(pre_dirs, tmp_path):
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from litebert.export import export_onnx

    dirs, _ = pre_dirs
    result = export_onnx(dirs["pretraining"], tmp_path / "m.onnx", "masked-lm")
    assert result.max_abs_diff is not None and result.max_abs_diff < 1e-4  # the export's own check
    session = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])
    torch.manual_seed(0)
    ids = torch.randint(5, 1000, (2, 9))
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0
    types = torch.zeros_like(ids)
    (got,) = session.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy(),
                                "token_type_ids": types.numpy()})
    mlm = AlbertForMaskedLM.from_pretrained(dirs["pretraining"]).eval()
    with torch.no_grad():
        want = mlm(ids, mask, types).mlm_logits
    np.testing.assert_allclose(got, want.numpy(), atol=1e-4)
    # the ONNX backend of the pipeline (what `serve --backend onnx` runs) gives the fp32 pipeline's answers
    texts = ["the capital of [MASK] is paris .", "[MASK] and [MASK] went up the hill ."]
    same(litebert.pipeline(None, dirs["pretraining"], "onnx", onnx_file=tmp_path / "m.onnx")(texts, top_k=3),
         litebert.pipeline(None, dirs["pretraining"], "fp32")(texts, top_k=3), atol=1e-4)


# ------------------------------------------------------------------------------------------- pretraining


@pytest.fixture(scope="module")
def tiny_pre(tmp_path_factory):
    store, tok, model_json = tiny_setup(tmp_path_factory.mktemp("pre_pretrain"))
    pre_json = model_json.with_name("model-pre.json")
    pre_json.write_text(json.dumps({**json.loads(model_json.read_text()), "layer_norm_position": "pre"}))
    return (store, tok, model_json), (store, tok, pre_json)


def test_a_pre_ln_model_trains_and_its_run_records_it(tiny_pre, tmp_path, capsys):
    from litebert.cli import main as cli_main
    from litebert.pretrain import PretrainConfig, train_step
    from litebert.pretrain_setup import setup

    _, tiny = tiny_pre
    run = setup(PretrainConfig(**config_args(tiny, tmp_path / "steps", steps=20, warmup_steps=0, lr=1e-2)))
    assert run.raw_model.config.layer_norm_position == "pre"
    batches = [run.stream.next(0) for _ in range(run.accum)]
    losses = []
    for _ in range(6):  # one batch, again and again: the loss must fall if gradients reach every parameter
        losses.append(train_step(run, batches)["loss"])
        run.step += 1
    assert all(b < a for a, b in zip(losses, losses[1:])) and losses[-1] < losses[0] - 0.5, losses
    assert run.raw_model.albert.encoder.final_norm.weight.grad is None  # zeroed after the step ...
    assert not torch.equal(run.raw_model.albert.encoder.final_norm.weight,
                           torch.ones_like(run.raw_model.albert.encoder.final_norm.weight))  # ... but it moved

    out = tmp_path / "run"
    assert cli_main(pretrain_args(tiny, out, steps=2)) == 0
    capsys.readouterr()
    final = json.loads((out / "final" / "config.json").read_text())
    assert final["format"] == "litebert" and final["layer_norm_position"] == "pre"
    assert json.loads((out / "run.json").read_text())["model_config"]["layer_norm_position"] == "pre"
    # continued pretraining from it: the model directory's config (litebert format) keeps the field
    assert cli_main(pretrain_args(tiny, tmp_path / "more", steps=1, model=str(out / "final"))) == 0
    capsys.readouterr()
    assert json.loads((tmp_path / "more" / "final" / "config.json").read_text())["layer_norm_position"] == "pre"


def test_a_run_json_from_before_the_field_still_resumes(tiny_pre, tmp_path, capsys):
    """run.json records without layer_norm_position ran post-LN: a resume of one is the same model config."""
    from litebert.cli import main as cli_main

    tiny, _ = tiny_pre
    out = tmp_path / "run"
    assert cli_main(pretrain_args(tiny, out, steps=2)) == 0
    record = json.loads((out / "run.json").read_text())
    del record["model_config"]["layer_norm_position"]
    (out / "run.json").write_text(json.dumps(record))
    assert cli_main(pretrain_args(tiny, out, steps=3)) == 0
    assert "resumed from" in capsys.readouterr().err
    # but a post-LN run is not resumed as pre-LN (its checkpoint has no final LayerNorm)
    pre = json.loads(Path(tiny[2]).read_text()) | {"layer_norm_position": "pre"}
    (tmp_path / "pre.json").write_text(json.dumps(pre))
    assert cli_main(pretrain_args(tiny, out, steps=4, model=str(tmp_path / "pre.json"))) == 2
    assert "missing tensors: albert.encoder.final_norm.weight" in capsys.readouterr().err
