"""Numerics of the fast paths: bf16 (autocast and bf16 weights) against an fp32 reference, the explicit attention
against SDPA, and the compile-time GELU form against the eager one. No timing here (see benchmarks/).

Tolerances, stated: bf16 keeps 8 mantissa bits (relative rounding 2^-9 ~ 0.2% per op); through 6 layers the
logits' relative L2 error measured ~1.1%, so the bound is 3%. fp32 paths must agree to 1e-5.
"""

import pytest
import torch
import torch.nn.functional as F

import litebert.model as ours
from litebert import AlbertConfig
from litebert.lab.bench import synthetic_pretraining_batch

transformers = pytest.importorskip("transformers")

BF16_REL_TOL = 3e-2


def config(**kw) -> AlbertConfig:
    base = dict(vocab_size=1000, embedding_size=32, hidden_size=128, num_hidden_layers=6, num_attention_heads=4,
                intermediate_size=512, max_position_embeddings=128)
    return AlbertConfig(**{**base, **kw})


def rel_err(a: torch.Tensor, ref: torch.Tensor) -> float:
    return ((a.float() - ref.float()).norm() / ref.float().norm()).item()


def batch(cfg: AlbertConfig, seed: int = 0):
    b = synthetic_pretraining_batch(cfg, batch_size=4, seq_len=64, predictions=10, seed=seed)
    b["attention_mask"][1, 40:] = 0  # one padded row, so the masked paths run too
    return b


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Our pretraining model and the same weights in transformers' fp32 AlbertForPreTraining (the reference)."""
    torch.manual_seed(0)
    cfg = config()
    model = ours.AlbertForPreTraining(cfg).eval()
    path = tmp_path_factory.mktemp("bf16")
    model.save_pretrained(path)
    hf = transformers.AlbertForPreTraining.from_pretrained(path, attn_implementation="eager").eval()
    return cfg, model, hf


def hf_reference(hf, b):
    with torch.no_grad():
        return hf(input_ids=b["input_ids"], attention_mask=b["attention_mask"], token_type_ids=b["token_type_ids"])


def test_bf16_autocast_logits_close_to_fp32_reference(models):
    cfg, model, hf = models
    b = batch(cfg)
    ref = hf_reference(hf, b)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(b["input_ids"], b["attention_mask"], b["token_type_ids"])
    real = b["attention_mask"].bool()
    assert out.mlm_logits.dtype == torch.bfloat16  # autocast really ran the matmuls in bf16
    assert rel_err(out.mlm_logits[real], ref.prediction_logits[real]) < BF16_REL_TOL
    assert rel_err(out.sop_logits, ref.sop_logits) < BF16_REL_TOL


def test_bf16_weights_close_to_fp32_reference(models):
    """model.to(bfloat16): the inference lever (no per-call weight casts)."""
    cfg, model, hf = models
    b = batch(cfg, seed=1)
    ref = hf_reference(hf, b)
    low = ours.AlbertForPreTraining(cfg)
    low.load_state_dict(model.state_dict())
    low = low.eval().to(torch.bfloat16)
    with torch.no_grad():
        out = low(b["input_ids"], b["attention_mask"], b["token_type_ids"])
    real = b["attention_mask"].bool()
    assert rel_err(out.mlm_logits[real], ref.prediction_logits[real]) < BF16_REL_TOL


def test_bf16_training_gradients_follow_fp32(models):
    """The bf16 training path (autocast, sparse head, the explicit attention "auto" picks on CPU) gives a gradient
    pointing the same way as fp32's, with the same loss to bf16 accuracy."""
    cfg, model, _ = models
    b = batch(cfg, seed=2)

    def loss_and_grad(precision_ctx):
        model.zero_grad(set_to_none=True)
        with precision_ctx:
            out = model.train()(b["input_ids"], b["attention_mask"], b["token_type_ids"],
                                masked_positions=b["masked_positions"], masked_ids=b["masked_ids"],
                                masked_weights=b["masked_weights"], sop_labels=b["sop_labels"])
        out.loss.backward()
        model.eval()
        return out.loss.item(), torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])

    loss32, grad32 = loss_and_grad(torch.autocast("cpu", enabled=False))
    loss16, grad16 = loss_and_grad(torch.autocast("cpu", dtype=torch.bfloat16))
    assert abs(loss16 - loss32) / loss32 < BF16_REL_TOL
    assert F.cosine_similarity(grad16, grad32, dim=0).item() > 0.99
    assert rel_err(grad16, grad32) < 0.1  # gradients are small differences of big numbers: a looser bound


@pytest.mark.parametrize("masked", [False, True])
def test_math_attention_equals_sdpa_fp32(masked):
    """attend(..., "math") is the same function as SDPA: values and gradients to 1e-5 in fp32."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 16, 8, generator=g, requires_grad=True) for _ in range(3))
    mask = torch.ones(2, 1, 1, 16, dtype=torch.bool)
    mask[1, ..., 11:] = False
    m = mask if masked else None
    a = ours.attend(q, k, v, m, 0.0, "math")
    b = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
    assert (a - b).abs().max().item() < 1e-5
    ga = torch.autograd.grad(a.square().sum(), (q, k, v))
    gb = torch.autograd.grad(b.square().sum(), (q, k, v))
    for x, y in zip(ga, gb):
        assert (x - y).abs().max().item() < 1e-5


def test_auto_attention_picks_math_only_for_bf16_training_on_cpu(monkeypatch):
    calls = []
    real = F.scaled_dot_product_attention
    monkeypatch.setattr(F, "scaled_dot_product_attention", lambda *a, **k: calls.append(1) or real(*a, **k))
    q = torch.randn(1, 2, 8, 4, dtype=torch.bfloat16, requires_grad=True)
    ours.attend(q, q, q, None, 0.0)
    assert calls == []  # bf16 + grad on CPU: the explicit matmuls
    with torch.no_grad():
        ours.attend(q, q, q, None, 0.0)
    ours.attend(q.float(), q.float(), q.float(), None, 0.0)
    assert len(calls) == 2  # inference, or fp32: SDPA


def test_compiled_gelu_form_equals_tanh_gelu(monkeypatch):
    """Under torch.compile gelu_new is written x * sigmoid(2z); it must be the same function (fp32, 1e-6)."""
    x = torch.linspace(-8, 8, 10001, dtype=torch.float32)
    eager = ours.gelu_tanh(x)
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    compiled_form = ours.gelu_tanh(x)
    assert torch.equal(eager, F.gelu(x, approximate="tanh"))
    assert (compiled_form - eager).abs().max().item() < 1e-6


@pytest.mark.slow
def test_compiled_model_matches_eager_fp32():
    """torch.compile of the encoder (what benchmarks and --compile use) gives the eager outputs in fp32."""
    torch.manual_seed(0)
    cfg = config(num_hidden_layers=2, vocab_size=200)
    model = ours.AlbertModel(cfg).eval()
    b = batch(cfg)
    with torch.no_grad():
        eager = model(b["input_ids"], b["attention_mask"], b["token_type_ids"])
        compiled = torch.compile(model)(b["input_ids"], b["attention_mask"], b["token_type_ids"])
    assert (compiled.sequence_output - eager.sequence_output).abs().max().item() < 1e-5
    assert (compiled.pooled_output - eager.pooled_output).abs().max().item() < 1e-5


@pytest.mark.slow
def test_frozen_compiled_bf16_encoder_matches_eager():
    """The inference benchmark's "ours": bf16 weights, torch.compile with freezing (the weights become graph
    constants, prepacked for oneDNN) computes what the eager bf16 model computes."""
    from litebert.lab.bench import ours_encoder_forward, synthetic_inputs

    cfg = config(num_hidden_layers=2, vocab_size=200)
    inputs = synthetic_inputs(cfg, 2, 32)
    inputs["attention_mask"][1, 20:] = 0  # the masked path too
    cpu = torch.device("cpu")
    eager = ours_encoder_forward(cfg, inputs, cpu, "bf16")()  # pooled output [B, H]; same seed, same weights
    frozen = ours_encoder_forward(cfg, inputs, cpu, "bf16", compile=True, freeze=True)()
    assert frozen.dtype == torch.bfloat16
    assert rel_err(frozen, eager) < BF16_REL_TOL


@pytest.mark.parametrize("resolved, mode", [("bf16", "bf16"), ("fp32", "fp32"), ("fp16", "fp32")])
def test_inference_benchmark_runs_the_library_default_precision(monkeypatch, resolved, mode):
    """The inference benchmark's "ours" runs what precision "auto" resolves to on the machine (bf16 weights where
    bf16 is the default, fp32 otherwise); int8 is an opt-in row of its own, never "ours"."""
    import litebert.device as device
    import litebert.lab.bench as bench

    seen = []
    monkeypatch.setattr(device, "resolve_precision", lambda p, d: seen.append(p) or resolved)
    assert bench.inference_mode(torch.device("cpu")) == mode
    assert seen == ["auto"]
