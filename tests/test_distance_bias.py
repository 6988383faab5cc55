"""A distance bias on the attention as an option (config `distance_bias`, one slope per head; ALBERT's own, and the
default, is none).

The biased attention is checked against its definition written out with plain functional ops and the model's own
weights (scores + -slope_h |i - j|, the [CLS] query exempt, -inf at padded keys); every attention path (SDPA, the spelled-out matmuls, the
unpadded inference path, bf16 autocast) gives the same answer, padded or not. A biased model saves in litebert's
format with the slopes in its config.json, loads back and exports to ONNX with the same outputs; every door that
would write it as a Hugging Face or official TF model (neither has an attention bias) refuses, naming the field.
That the bias makes a small model learn is measured, not tested here: docs/recipes.md, "Session 19"; the demo
runs with it (tests/test_demo.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from litebert.config import AlbertConfig, distance_bias_slopes
from litebert.errors import LitebertError
from litebert.model import AlbertForMaskedLM, AlbertModel

# one layer, E != H (the projection), 2 heads: the first sharply local, the second nearly ALBERT's; weights drawn
# 10x wider than ALBERT's, so the attention branch is not lost beside the residual and a wrong bias shows
CONFIG = dict(vocab_size=97, embedding_size=16, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
              intermediate_size=48, max_position_embeddings=32, initializer_range=0.2, distance_bias=[1.0, 0.05])


def _inputs():
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, CONFIG["vocab_size"], (3, 11), generator=gen)
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0  # right-padded rows
    mask[2, 3:] = 0
    return ids, mask


def biased_layer_by_definition(model: AlbertModel, ids, mask) -> torch.Tensor:
    """[B, L, H] of a one-layer post-LN model: embeddings -> LN -> E->H; x = LN(x + attn(x)); x = LN(x + ffn(x)),
    with attention softmax(q k^T / sqrt(d) - slope_h |i - j|, -inf at padded keys) v, where |i - j| counts as 0
    for the [CLS] query (i = 0)."""
    c, emb, enc = model.config, model.embeddings, model.encoder
    B, L = ids.shape
    H, nh = c.hidden_size, c.num_attention_heads
    d = H // nh

    def ln(x, norm):
        return F.layer_norm(x, (x.shape[-1],), norm.weight, norm.bias, c.layer_norm_eps)

    x = emb.word_embeddings.weight[ids] + emb.position_embeddings.weight[:L] + emb.token_type_embeddings.weight[0]
    x = F.linear(ln(x, emb.norm), enc.project_in.weight, enc.project_in.bias)  # [B, L, H]
    attn, ffn = enc.attention[0], enc.ffn[0]
    q, k, v = (t.view(B, L, nh, d).transpose(1, 2) for t in F.linear(x, attn.qkv.weight, attn.qkv.bias).split(H, -1))
    # [L, L]; the [CLS] query (row 0) is exempt, the other rows read [CLS] at its distance
    distance = torch.tensor([[abs(i - j) if i else 0 for j in range(L)] for i in range(L)], dtype=torch.float32)
    slopes = torch.tensor(c.distance_bias)[:, None, None]  # [nh, 1, 1]
    scores = q @ k.transpose(-1, -2) / d ** 0.5 - slopes * distance  # [B, nh, L, L]
    scores = scores.masked_fill(mask[:, None, None, :] == 0, -float("inf"))
    x = ln(x + F.linear((scores.softmax(-1) @ v).transpose(1, 2).reshape(B, L, H), attn.out.weight, attn.out.bias),
           attn.norm)
    h = F.gelu(F.linear(x, ffn.up.weight, ffn.up.bias), approximate="tanh")
    return ln(x + F.linear(h, ffn.down.weight, ffn.down.bias), ffn.norm)


def test_every_attention_path_computes_the_definition():
    torch.manual_seed(0)
    model = AlbertModel(AlbertConfig(**CONFIG)).eval()
    ids, mask = _inputs()
    real = mask[..., None].bool()
    with torch.no_grad():
        want = biased_layer_by_definition(model, ids, mask)
        sdpa = model(ids, mask).sequence_output
        model.encoder.attention[0].impl = "math"
        math = model(ids, mask).sequence_output
        model.encoder.unpad = True  # inference's packed path: padding rows come back as 0
        unpadded = model(ids, mask).sequence_output
        model.encoder.unpad = False
        model.encoder.attention[0].impl = "auto"
        with torch.autocast("cpu", dtype=torch.bfloat16):
            bf16 = model(ids, mask).sequence_output.float()
        alone = model(ids[2:, :3]).sequence_output  # row 2 unpadded, with no mask at all
    for got in (sdpa, math):
        torch.testing.assert_close(got * real, want * real, atol=2e-5, rtol=0)
    torch.testing.assert_close(unpadded, want * real, atol=2e-5, rtol=0)
    torch.testing.assert_close(alone[0], want[2, :3], atol=2e-5, rtol=0)
    assert (bf16 - want).masked_select(real).abs().max() < 0.1  # bf16's ~3 significant digits, post-LN output
    # the bias is the whole difference: zero slopes are ALBERT's attention, on the same weights
    plain = AlbertModel(AlbertConfig(**{**CONFIG, "distance_bias": None})).eval()
    zero = AlbertModel(AlbertConfig(**{**CONFIG, "distance_bias": [0.0, 0.0]})).eval()
    plain.load_state_dict(model.state_dict())
    zero.load_state_dict(model.state_dict())  # (the slopes are not weights: the same keys load)
    with torch.no_grad():
        assert torch.equal(zero(ids, mask).sequence_output * real, plain(ids, mask).sequence_output * real)
        assert (plain(ids, mask).sequence_output - sdpa).masked_select(real).abs().max() > 0.1


def test_gradients_flow_through_the_biased_attention_in_training():
    """Training runs the padded layout (no unpadding) and, with gradient checkpointing, recomputes the blocks: both
    give the same loss and gradients as the plain forward."""
    torch.manual_seed(0)
    model = AlbertForMaskedLM(AlbertConfig(**{**CONFIG, "num_hidden_layers": 2})).train()
    ids, mask = _inputs()

    def loss_and_grads():
        model.zero_grad()
        loss = model(ids, mask).mlm_logits.logsumexp(-1).mean()
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]

    loss, grads = loss_and_grads()
    model.set_gradient_checkpointing(True)
    loss_ckpt, grads_ckpt = loss_and_grads()
    assert torch.equal(loss, loss_ckpt) and len(grads) == len(grads_ckpt) > 0
    for g, h in zip(grads, grads_ckpt):
        torch.testing.assert_close(g, h, atol=1e-6, rtol=1e-5)


def test_slopes_are_checked_and_the_demo_set_is_geometric():
    assert distance_bias_slopes(2) == [2.0, 0.5]
    assert distance_bias_slopes(4, steepest=1.0, ratio=0.5) == [1.0, 0.5, 0.25, 0.125]
    with pytest.raises(LitebertError, match=r"'distance_bias' has 3 slopes for num_attention_heads 2"):
        AlbertConfig(**{**CONFIG, "distance_bias": [1.0, 0.5, 0.25]})
    for bad in ([1.0, -0.5], [1.0, float("nan")], "steep", [1.0, True], 0.5):
        with pytest.raises(LitebertError, match=r"'distance_bias' must be a list of slopes >= 0"):
            AlbertConfig(**{**CONFIG, "distance_bias": bad})


def test_saves_in_litebert_format_and_every_hf_or_tf_door_refuses(tmp_path):
    from litebert.convert.hf_map import ours_to_hf

    torch.manual_seed(0)
    config = AlbertConfig(**CONFIG)
    model = AlbertForMaskedLM(config).eval()
    model.save_pretrained(tmp_path / "m")  # "auto" picks litebert's format
    saved = json.loads((tmp_path / "m" / "config.json").read_text())
    assert saved["format"] == "litebert" and saved["distance_bias"] == [1.0, 0.05]
    back = AlbertForMaskedLM.from_pretrained(tmp_path / "m").eval()
    ids, mask = _inputs()
    with torch.no_grad():
        assert torch.equal(model(ids, mask).mlm_logits, back(ids, mask).mlm_logits)
    assert "distance bias on the attention scores, slopes [1.0, 0.05] (not ALBERT's)" in (
        tmp_path / "m" / "README.md").read_text()

    with pytest.raises(LitebertError, match=r"distance_bias .* has no HF equivalent"):
        model.save_pretrained(tmp_path / "hf", format="hf")
    assert not (tmp_path / "hf" / "model.safetensors").exists()
    for door in (config.to_hf_dict, config.to_official_dict, lambda: ours_to_hf(model.state_dict(), config)):
        with pytest.raises(LitebertError, match=r"distance_bias \(Hugging Face's AlbertModel and the official TF"):
            door()
    # transformers would read an HF config.json that carries slopes and drop them: refused, not dropped
    hf = AlbertConfig(**{**CONFIG, "distance_bias": None}).to_hf_dict()
    with pytest.raises(LitebertError, match=r"'distance_bias' is set, but a Hugging Face ALBERT config.json"):
        AlbertConfig.from_hf_dict({**hf, "distance_bias": [1.0, 0.05]})
    # an official-style file (no `sharing`) carrying the field is ours, read with it, not as the official dialect
    (tmp_path / "c.json").write_text(json.dumps({"vocab_size": 97, "hidden_size": 32, "num_attention_heads": 2,
                                                 "distance_bias": [0.5, 0.1]}))
    assert AlbertConfig.from_json(tmp_path / "c.json").distance_bias == [0.5, 0.1]


def test_onnx_export_keeps_the_bias(tmp_path):
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from litebert.export import export_onnx

    torch.manual_seed(0)
    model = AlbertForMaskedLM(AlbertConfig(**CONFIG)).eval()
    model.save_pretrained(tmp_path / "m")
    result = export_onnx(tmp_path / "m", tmp_path / "m.onnx", "masked-lm", graph_only=True)
    assert result.max_abs_diff is not None and result.max_abs_diff < 1e-4  # the export's own check
    session = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])
    ids, mask = _inputs()  # another length and padding than the export traced
    (got,) = session.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy(),
                                "token_type_ids": torch.zeros_like(ids).numpy()})
    with torch.no_grad():
        want = model(ids, mask).mlm_logits
    real = mask.bool().numpy()
    np.testing.assert_allclose(got[real], want.numpy()[real], atol=1e-4)
