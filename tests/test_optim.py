"""LAMB, parameter groups and the schedule against the official definitions (google-research/albert
lamb_optimizer.py and optimization.py, restated in docs/reference notes), written out independently here."""

import io
import math

import pytest
import torch
from torch import nn

from litebert.errors import ConfigError
from litebert.optim import (BudgetSchedule, Lamb, budget_factor, build_optimizer, make_scheduler, no_decay, param_groups,
                            warmup_poly_decay)

B1, B2, EPS, WD = 0.9, 0.999, 1e-6, 0.01


# ----------------------------------------------------------------------------------------------- LAMB


def _official_step_scalar(w, m, v, g, lr, wd, adapt):
    """One official LAMB step on a Python list of floats, element by element."""
    m = [B1 * mi + (1 - B1) * gi for mi, gi in zip(m, g)]
    v = [B2 * vi + (1 - B2) * gi * gi for vi, gi in zip(v, g)]
    u = [mi / (math.sqrt(vi) + EPS) + wd * wi for mi, vi, wi in zip(m, v, w)]
    ratio = 1.0
    if adapt:
        w_norm = math.sqrt(sum(x * x for x in w))
        u_norm = math.sqrt(sum(x * x for x in u))
        if w_norm > 0 and u_norm > 0:
            ratio = w_norm / u_norm
    return [wi - lr * ratio * ui for wi, ui in zip(w, u)], m, v


def test_lamb_two_steps_by_hand():
    lr = 0.1
    start = {"w": [3.0, -4.0], "zero": [0.0, 0.0, 0.0], "bias": [0.5, -1.0]}
    grads = [
        {"w": [0.1, -0.2], "zero": [0.3, 0.0, -0.1], "bias": [0.02, 0.4]},
        {"w": [0.3, 0.05], "zero": [-0.2, 0.1, 0.0], "bias": [-0.01, 0.2]},
    ]
    params = {k: nn.Parameter(torch.tensor(v, dtype=torch.float64)) for k, v in start.items()}
    opt = Lamb([
        {"params": [params["w"], params["zero"]], "weight_decay": WD, "adapt": True},
        {"params": [params["bias"]], "weight_decay": 0.0, "adapt": False},
    ], lr=lr)
    expected = {k: (list(v), [0.0] * len(v), [0.0] * len(v)) for k, v in start.items()}
    for step_grads in grads:
        for k, p in params.items():
            p.grad = torch.tensor(step_grads[k], dtype=torch.float64)
        opt.step()
        for k in params:
            excluded = k == "bias"
            w, m, v = expected[k]
            expected[k] = _official_step_scalar(w, m, v, step_grads[k], lr, 0.0 if excluded else WD, not excluded)
        for k, p in params.items():
            assert p.tolist() == pytest.approx(expected[k][0], rel=1e-12, abs=1e-12), k

    # Closed form of the first step (m = 0.1 g, v = 0.001 g^2), written out for the excluded bias:
    # no decay and no trust ratio, so each element moves by lr * 0.1 g / (sqrt(0.001) |g| + eps).
    g1 = grads[0]["bias"]
    after_one = [w - lr * 0.1 * g / (math.sqrt(0.001) * abs(g) + EPS) for w, g in zip(start["bias"], g1)]
    assert after_one == pytest.approx(_official_step_scalar(start["bias"], [0, 0], [0, 0], g1, lr, 0.0, False)[0])
    # The zero-norm weight: ratio 1, so the first step is exactly lr * m / (sqrt(v) + eps).
    g0 = grads[0]["zero"]
    first_zero = [-lr * 0.1 * g / (math.sqrt(0.001) * abs(g) + EPS) for g in g0]
    assert first_zero == pytest.approx(_official_step_scalar([0.0] * 3, [0] * 3, [0] * 3, g0, lr, WD, True)[0])


def _reference_lamb_step(p, grad, state, lr, wd, adapt):
    """Straightforward per-parameter LAMB in float64 (independent of the foreach code)."""
    m = state.setdefault("m", torch.zeros_like(p))
    v = state.setdefault("v", torch.zeros_like(p))
    m.mul_(B1).add_((1 - B1) * grad)
    v.mul_(B2).add_((1 - B2) * grad * grad)
    update = m / (v.sqrt() + EPS) + wd * p
    ratio = 1.0
    if adapt:
        w_norm, u_norm = p.norm().item(), update.norm().item()
        ratio = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
    p.sub_(lr * ratio * update)


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-12), (torch.float32, 1e-6)])
def test_lamb_matches_reference_over_five_steps(dtype, tol):
    gen = torch.Generator().manual_seed(0)
    shapes = [(7, 5), (13,), (3, 4, 2), (1,), (6, 6)]
    init = [torch.randn(s, generator=gen, dtype=torch.float64) * 0.1 for s in shapes]
    init[3].zero_()  # a zero-norm weight in the adapted group
    flags = [(WD, True), (0.0, False), (WD, True), (WD, True), (0.0, False)]
    ours = [nn.Parameter(t.to(dtype)) for t in init]
    ref = [t.clone() for t in init]
    ref_state = [{} for _ in init]
    opt = Lamb([{"params": [p for p, f in zip(ours, flags) if f[1]], "weight_decay": WD, "adapt": True},
                {"params": [p for p, f in zip(ours, flags) if not f[1]], "weight_decay": 0.0, "adapt": False}],
               lr=0.05)
    for _ in range(5):
        grads = [torch.randn(s, generator=gen, dtype=torch.float64) for s in shapes]
        for p, g in zip(ours, grads):
            p.grad = g.to(dtype)
        opt.step()
        for r, g, st, (wd, adapt) in zip(ref, grads, ref_state, flags):
            _reference_lamb_step(r, g, st, 0.05, wd, adapt)
    for p, r in zip(ours, ref):
        torch.testing.assert_close(p.detach().double(), r, rtol=tol, atol=tol)


def test_lamb_skips_params_without_grad_and_mixed_dtypes():
    a = nn.Parameter(torch.ones(3, dtype=torch.float64))
    b = nn.Parameter(torch.ones(2, dtype=torch.float32))
    c = nn.Parameter(torch.ones(4))
    opt = Lamb([a, b, c], lr=0.1)
    a.grad, b.grad = torch.ones(3, dtype=torch.float64), torch.ones(2)
    opt.step()
    assert c not in opt.state and torch.equal(c, torch.ones(4))
    # Both buckets took the same step (same values, different dtypes).
    assert a[0].item() == pytest.approx(b[0].item(), rel=1e-6) and a[0].item() < 1.0
    assert opt.state[b]["exp_avg"].dtype == torch.float32


def test_lamb_state_dict_round_trip_is_exact():
    torch.manual_seed(0)

    def run(opt_state=None, steps=3, model_state=None):
        model = nn.Sequential(nn.Linear(4, 3), nn.LayerNorm(3))
        if model_state is not None:
            model.load_state_dict(model_state)
        opt = build_optimizer(model, "lamb", lr=0.01)
        if opt_state is not None:
            opt.load_state_dict(opt_state)
        gen = torch.Generator().manual_seed(1 if opt_state is None else 2)
        for _ in range(steps):
            model(torch.randn(2, 4, generator=gen)).square().sum().backward()
            opt.step()
            opt.zero_grad()
        return model, opt

    model, opt = run()
    buf = io.BytesIO()
    torch.save({"opt": opt.state_dict(), "model": model.state_dict()}, buf)
    buf.seek(0)
    saved = torch.load(buf, weights_only=True)  # plain tensors and containers only
    cont_model, cont_opt = run(saved["opt"], model_state=saved["model"])
    # Continue the original with the same data as the resumed copy.
    gen = torch.Generator().manual_seed(2)
    for _ in range(3):
        model(torch.randn(2, 4, generator=gen)).square().sum().backward()
        opt.step()
        opt.zero_grad()
    for p, q in zip(model.parameters(), cont_model.parameters()):
        assert torch.equal(p, q)


def test_lamb_under_bf16_autocast_keeps_fp32_state():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(20, 8), nn.Linear(8, 8), nn.LayerNorm(8), nn.Linear(8, 20))
    opt = build_optimizer(model, "lamb", lr=1e-2)
    before = [p.detach().clone() for p in model.parameters()]
    ids = torch.randint(0, 20, (4, 6))
    for _ in range(2):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(ids)  # [4, 6, 20] in bf16
        loss = nn.functional.cross_entropy(logits.float().flatten(0, 1), ids.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad()
    for p, b in zip(model.parameters(), before):
        assert p.dtype == torch.float32 and torch.isfinite(p).all() and not torch.equal(p, b)
        assert opt.state[p]["exp_avg"].dtype == torch.float32


def test_bad_hyperparameters_raise_config_error():
    p = [nn.Parameter(torch.ones(2))]
    with pytest.raises(ConfigError, match="lr"):
        Lamb(p, lr=-1.0)
    with pytest.raises(ConfigError, match="betas"):
        Lamb(p, betas=(1.0, 0.999))
    with pytest.raises(ConfigError, match="unknown name 'sgd'"):
        build_optimizer(nn.Linear(2, 2), "sgd", lr=0.1)


# ------------------------------------------------------------------------------------- parameter groups

# The official exclusion list, matched against variable names as the TF code does (re.search).
OFFICIAL_EXCLUDE = ("LayerNorm", "layer_norm", "bias")


def _split(model):
    groups = param_groups(model, weight_decay=WD)
    names = {id(p): n for n, p in model.named_parameters()}
    return ({names[id(p)] for p in groups[0]["params"]}, {names[id(p)] for p in groups[1]["params"]}, groups)


def test_param_groups_on_hf_albert_match_official_name_rule():
    transformers = pytest.importorskip("transformers")
    config = transformers.AlbertConfig(vocab_size=50, embedding_size=8, hidden_size=16, num_hidden_layers=2,
                                       num_attention_heads=2, intermediate_size=32, max_position_embeddings=16)
    model = transformers.AlbertForPreTraining(config)
    decayed, excluded, groups = _split(model)
    official_excluded = {n for n, _ in model.named_parameters() if any(s in n for s in OFFICIAL_EXCLUDE)}
    assert excluded == official_excluded
    assert decayed == {n for n, _ in model.named_parameters()} - official_excluded
    assert "albert.embeddings.word_embeddings.weight" in decayed
    assert "albert.encoder.albert_layer_groups.0.albert_layers.0.full_layer_layer_norm.weight" in excluded
    assert groups[0]["weight_decay"] == WD and groups[0]["adapt"] is True
    assert groups[1]["weight_decay"] == 0.0 and groups[1]["adapt"] is False
    # Every parameter is in exactly one group, shared/tied ones once.
    ids = [id(p) for g in groups for p in g["params"]]
    assert len(ids) == len(set(ids)) == len(list(model.parameters()))


def test_param_groups_on_litebert_model():
    litebert_model = pytest.importorskip("litebert.model")
    from litebert.config import AlbertConfig

    config = AlbertConfig.from_preset("albert-tiny", vocab_size=60, embedding_size=8, hidden_size=16,
                                      num_hidden_layers=2, num_attention_heads=2, intermediate_size=32)
    model = litebert_model.AlbertForPreTraining(config)
    decayed, excluded, _ = _split(model)
    shapes = dict(model.named_parameters())
    assert excluded == {n for n, p in shapes.items() if p.ndim == 1}
    assert all("norm" not in n and "bias" not in n for n in decayed)
    assert any("norm" in n for n in excluded) and any(n.endswith("bias") for n in excluded)


def test_no_decay_rule():
    module = nn.ModuleDict({"emb": nn.Embedding(5, 4), "dense": nn.Linear(4, 4), "LayerNorm": nn.LayerNorm(4),
                            "out_norm": nn.LayerNorm(4)})
    got = {n: no_decay(n, p) for n, p in module.named_parameters()}
    assert got == {"emb.weight": False, "dense.weight": False, "dense.bias": True, "LayerNorm.weight": True,
                   "LayerNorm.bias": True, "out_norm.weight": True, "out_norm.bias": True}
    # A 1-D parameter with an unexpected name is still excluded (what a converted module might carry).
    assert no_decay("cls.predictions.output_b", torch.zeros(7)) is True
    frozen = nn.Linear(2, 2)
    frozen.weight.requires_grad_(False)
    assert [len(g["params"]) for g in param_groups(frozen)] == [0, 1]


@pytest.mark.parametrize("name", ["lamb", "adamw", "adamw_official"])
def test_build_optimizer_variants_step(name):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4))
    opt = build_optimizer(model, name, lr=1e-2)
    assert [g["name"] for g in opt.param_groups] == ["decay", "no_decay"]
    assert opt.param_groups[1]["weight_decay"] == 0.0
    model(torch.randn(3, 4)).sum().backward()
    before = model[0].weight.detach().clone()
    opt.step()
    assert not torch.equal(before, model[0].weight)
    if name == "adamw_official":
        assert not any(g["adapt"] for g in opt.param_groups)


def test_adamw_official_equals_lamb_without_trust_ratio():
    torch.manual_seed(0)
    w = torch.randn(3, 3)
    a, b = nn.Parameter(w.clone()), nn.Parameter(w.clone())
    ours = build_optimizer(nn.ParameterDict({"w": a}), "adamw_official", lr=0.1)
    ref = Lamb([{"params": [b], "adapt": False, "weight_decay": WD}], lr=0.1)
    for _ in range(3):
        g = torch.randn(3, 3)
        a.grad, b.grad = g.clone(), g.clone()
        ours.step()
        ref.step()
    assert torch.equal(a, b)


# ----------------------------------------------------------------------------------------------- schedule


def test_schedule_official_values():
    kw = dict(warmup_steps=10, total_steps=100, peak_lr=1e-3)
    assert warmup_poly_decay(0, **kw) == 0.0
    assert warmup_poly_decay(5, **kw) == pytest.approx(5e-4)
    assert warmup_poly_decay(9, **kw) == pytest.approx(9e-4)
    # At the boundary the lr falls onto the decay curve that started at step 0: 1e-3 * (1 - 10/100).
    assert warmup_poly_decay(10, **kw) == pytest.approx(9e-4)
    assert warmup_poly_decay(55, **kw) == pytest.approx(1e-3 * 0.45)
    assert warmup_poly_decay(100, **kw) == 0.0
    assert warmup_poly_decay(150, **kw) == 0.0
    assert warmup_poly_decay(50, **kw, power=2.0) == pytest.approx(1e-3 * 0.25)
    assert warmup_poly_decay(50, **kw, end_lr=1e-4) == pytest.approx(0.9e-3 * 0.5 + 1e-4)
    assert warmup_poly_decay(0, warmup_steps=0, total_steps=100, peak_lr=1e-3) == 1e-3
    with pytest.raises(ConfigError, match="total_steps"):
        warmup_poly_decay(0, warmup_steps=0, total_steps=0, peak_lr=1.0)


def _lrs(opt, sched, n):
    out = []
    for _ in range(n):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out


def test_scheduler_follows_schedule_and_round_trips():
    peak = 2e-3

    def fresh():
        model = nn.Linear(2, 2)
        opt = build_optimizer(model, "lamb", lr=peak)
        return opt, make_scheduler(opt, warmup_steps=4, total_steps=20, power=1.0)

    opt, sched = fresh()
    lrs = _lrs(opt, sched, 20)
    expected = [warmup_poly_decay(s, warmup_steps=4, total_steps=20, peak_lr=peak) for s in range(20)]
    assert lrs == pytest.approx(expected, rel=1e-12, abs=1e-15)
    assert opt.param_groups[1]["lr"] == opt.param_groups[0]["lr"]  # both groups follow the schedule

    opt, sched = fresh()
    _lrs(opt, sched, 7)
    buf = io.BytesIO()
    torch.save({"opt": opt.state_dict(), "sched": sched.state_dict()}, buf)
    buf.seek(0)
    saved = torch.load(buf, weights_only=True)
    opt2, sched2 = fresh()
    opt2.load_state_dict(saved["opt"])
    sched2.load_state_dict(saved["sched"])
    assert _lrs(opt2, sched2, 13) == pytest.approx(expected[7:], rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("name", ["lamb", "adamw", "adamw_official"])
def test_no_decay_lr_scale_scales_biases_and_norms_through_the_schedule(name):
    """The excluded group (biases, LayerNorm) runs at lr * scale at every step of the schedule; with scale 0 its
    parameters do not move while the weights do."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4))
    opt = build_optimizer(model, name, lr=1e-2, no_decay_lr_scale=0.25)
    sched = make_scheduler(opt, warmup_steps=2, total_steps=10)
    for _ in range(5):
        opt.step()
        sched.step()
        assert opt.param_groups[1]["lr"] == pytest.approx(0.25 * opt.param_groups[0]["lr"], rel=1e-12)
        assert opt.param_groups[0]["lr"] > 0

    frozen = build_optimizer(model, name, lr=1e-2, no_decay_lr_scale=0.0)
    bias, gain, weight = (t.detach().clone() for t in (model[0].bias, model[1].weight, model[0].weight))
    model(torch.randn(3, 4)).pow(2).sum().backward()
    frozen.step()
    assert torch.equal(bias, model[0].bias) and torch.equal(gain, model[1].weight)
    assert not torch.equal(weight, model[0].weight)


def test_no_decay_lr_scale_rejects_negative():
    with pytest.raises(ConfigError, match="no_decay_lr_scale"):
        build_optimizer(nn.Linear(2, 2), "lamb", lr=1e-2, no_decay_lr_scale=-0.5)


def _tiny_albert(**overrides):
    from litebert.config import AlbertConfig
    from litebert.model import AlbertForPreTraining

    torch.manual_seed(0)
    return AlbertForPreTraining(AlbertConfig.from_preset("albert-tiny", vocab_size=60, **{
        "embedding_size": 8, "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
        "intermediate_size": 32, **overrides}))


@pytest.mark.parametrize("name", ["lamb", "adamw", "adamw_official"])
def test_projection_lr_scale_gives_the_projection_groups_of_its_own_through_the_schedule(name):
    """--projection-lr-scale: the E -> H projection's weight (decayed, adapted) and bias (neither) run at lr x scale
    (the bias also x no_decay_lr_scale) at every step; every other parameter is where it was; at the default
    scale the optimizer has its two groups, so older checkpoints' optimizer states still load."""
    model = _tiny_albert()
    assert [g["name"] for g in build_optimizer(model, name, lr=1e-2).param_groups] == ["decay", "no_decay"]
    opt = build_optimizer(model, name, lr=1e-2, projection_lr_scale=0.1, no_decay_lr_scale=0.5)
    names = {id(p): n for n, p in model.named_parameters()}
    got = {g["name"]: sorted(names[id(p)] for p in g["params"]) for g in opt.param_groups}
    assert got["decay_projection"] == ["albert.encoder.project_in.weight"]
    assert got["no_decay_projection"] == ["albert.encoder.project_in.bias"]
    assert not any("project_in" in n for n in got["decay"] + got["no_decay"])
    assert len({id(p) for g in opt.param_groups for p in g["params"]}) == len(list(model.parameters()))
    sched = make_scheduler(opt, warmup_steps=2, total_steps=10)
    for _ in range(4):
        opt.step()
        sched.step()
        lr = {g["name"]: g["lr"] for g in opt.param_groups}
        assert lr["decay"] > 0
        assert lr["decay_projection"] == pytest.approx(0.1 * lr["decay"], rel=1e-12)
        assert lr["no_decay_projection"] == pytest.approx(0.05 * lr["decay"], rel=1e-12)
        assert lr["no_decay"] == pytest.approx(0.5 * lr["decay"], rel=1e-12)
    with pytest.raises(ConfigError, match="projection_lr_scale"):
        build_optimizer(model, name, lr=1e-2, projection_lr_scale=float("nan"))


def test_a_unit_projection_starts_the_encoder_at_unit_variance():
    """init_projection("unit"): std 1/sqrt(E) draws (truncated at 2 std, as every official draw), so the projected
    embeddings have about unit variance per feature instead of ~0.02 sqrt(E); nothing else changes; E = H has no
    projection to draw."""
    model = _tiny_albert(embedding_size=64, hidden_size=128)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    model.init_projection("unit")
    weight = model.albert.encoder.project_in.weight
    assert 0.8 * 64 ** -0.5 < weight.std().item() < 64 ** -0.5
    assert weight.abs().max().item() <= 2 * 64 ** -0.5
    changed = {k for k, v in model.state_dict().items() if not torch.equal(v, before[k])}
    assert changed == {"albert.encoder.project_in.weight"}
    with torch.no_grad():
        out = model.albert.encoder.project_in(model.albert.embeddings(torch.randint(5, 60, (4, 32)),
                                                                      torch.zeros(4, 32, dtype=torch.long)))
    assert 0.6 < out.std().item() < 1.2  # (official draws: ~0.02 * 8 = 0.16)
    square = _tiny_albert(embedding_size=16, hidden_size=16)
    state = {k: v.clone() for k, v in square.state_dict().items()}
    square.init_projection("unit")
    assert all(torch.equal(v, state[k]) for k, v in square.state_dict().items())
    with pytest.raises(ValueError, match="projection init"):
        model.init_projection("xavier")


def _token_spread(hidden: torch.Tensor) -> float:
    """hidden [B, L, H] -> the mean over sentences of the tokens' std within the sentence, over its RMS."""
    h = hidden.double()
    return (h.std(1, unbiased=False).mean((1,)) / h.pow(2).mean((1, 2)).sqrt()).mean().item()


def test_scaled_branches_keep_a_deep_model_from_starting_collapsed():
    """init_branches(s) multiplies exactly the residual branches' weights (value rows of the fused qkv, attention
    output, the feed-forward's two matrices) and nothing else. Why (issue 43): at albert-base's depth the official
    draw makes each application add mostly the sentence's average, so the tokens of a sentence already look alike
    at the encoder's output before training (within-sentence spread 0.78 in, 0.40 out when written); at
    branch_scale_for_depth(12) = 0.32 they keep their spread (0.78 out)."""
    from litebert.config import AlbertConfig
    from litebert.model import AlbertForPreTraining, branch_scale_for_depth

    model = _tiny_albert()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    model.init_branches(0.5)
    changed = {k for k, v in model.state_dict().items() if not torch.equal(v, before[k])}
    branches = {"albert.encoder.attention.0.qkv.weight", "albert.encoder.attention.0.out.weight",
                "albert.encoder.ffn.0.up.weight", "albert.encoder.ffn.0.down.weight"}
    assert changed == branches
    qkv, hidden = model.state_dict()["albert.encoder.attention.0.qkv.weight"], 16
    assert torch.equal(qkv[:2 * hidden], before["albert.encoder.attention.0.qkv.weight"][:2 * hidden])
    assert torch.allclose(qkv[2 * hidden:], 0.5 * before["albert.encoder.attention.0.qkv.weight"][2 * hidden:])
    for name in branches - {"albert.encoder.attention.0.qkv.weight"}:
        assert torch.allclose(model.state_dict()[name], 0.5 * before[name])
    model.init_branches(1.0)  # the official draw: a no-op
    assert torch.allclose(model.state_dict()["albert.encoder.ffn.0.up.weight"],
                          0.5 * before["albert.encoder.ffn.0.up.weight"])

    assert branch_scale_for_depth(12) == pytest.approx(0.3195, abs=1e-4)
    config = AlbertConfig.from_preset("albert-base-v2", vocab_size=1000)
    ids = torch.randint(5, 1000, (4, 48), generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    base = AlbertForPreTraining(config).eval()
    spreads = {}
    for scale in (1.0, branch_scale_for_depth(12)):
        base.init_branches(scale)  # the official draw first, then the same weights with the branches scaled
        with torch.no_grad():
            embedded = base.albert.embeddings(ids, torch.zeros_like(ids))  # [4, 48, E]
            out = base.albert(ids, torch.ones_like(ids), torch.zeros_like(ids)).sequence_output  # [4, 48, H]
        spreads[scale] = (_token_spread(embedded), _token_spread(out))
    (start, official), (_, scaled) = spreads[1.0], spreads[branch_scale_for_depth(12)]
    assert official < 0.7 * start, spreads
    assert scaled > 0.95 * start, spreads


def test_the_budget_schedule_has_the_step_schedules_shape_over_the_fraction_used():
    """budget_factor(step / n, w / n) is warmup_poly_decay's factor at step; the schedule ends at 0 when the budget
    is spent, whatever the clock, and a resumed schedule sets the same lr."""
    for power in (1.0, 2.0):
        for step in (0, 3, 4, 5, 13, 19, 20, 25):
            assert budget_factor(step / 20, 4 / 20, power) == pytest.approx(
                warmup_poly_decay(step, warmup_steps=4, total_steps=20, peak_lr=1.0, power=power), abs=1e-12)
    model = torch.nn.Linear(3, 3)
    opt = build_optimizer(model, "lamb", lr=1e-2, no_decay_lr_scale=0.5)
    schedule = BudgetSchedule(opt, warmup_fraction=0.1)
    assert schedule.get_last_lr() == [0.0, 0.0]  # the first update, at fraction 0, has lr 0 (as the official)
    schedule.step(0.05)
    assert schedule.get_last_lr() == pytest.approx([5e-3, 2.5e-3])  # halfway through warm-up; biases at half
    schedule.step()  # the bare step after each update leaves a budget schedule where it is
    assert schedule.get_last_lr() == pytest.approx([5e-3, 2.5e-3])
    schedule.step(0.75)
    again = BudgetSchedule(build_optimizer(model, "lamb", lr=1e-2, no_decay_lr_scale=0.5), 0.1)
    again.load_state_dict(schedule.state_dict())
    assert again.get_last_lr() == schedule.get_last_lr() == pytest.approx([2.5e-3, 1.25e-3])
    schedule.step(1.3)  # past the budget (the step that crossed it): the end of the schedule
    assert schedule.get_last_lr() == [0.0, 0.0] and schedule.progress == 1.0
