"""The GPU tier (`pytest -m gpu`, run by `make gpu-check`): numerics and steps on the device of the `gpu_device`
fixture (tests/conftest.py): CUDA, or skipped with the reason; LITEBERT_GPU_TEST_DEVICE=cpu runs the same logic
on the CPU, where the device-vs-CPU comparisons compare the CPU with itself and only check the tests.

Tolerances (relative L2 error of each output against CPU fp32, tiny models of 2 layers): fp32 kernels differ in
summation order only (~1e-6); bf16 keeps 8 mantissa bits, and tests/test_bf16.py's bound of 3% (6 layers) holds;
fp16 keeps 11, 8x finer rounding than bf16, so 1%. No timing here (benchmarks/gpu_check.py measures speed).
"""

from __future__ import annotations

import copy

import pytest
import torch

import litebert.model as models
from litebert import heads
from litebert.config import AlbertConfig
from litebert.device import autocast, for_inference, synchronize
from litebert.lab.bench import bench_run, set_attention_impl, synthetic_inputs, synthetic_pretraining_batch
from litebert.pretrain import train_step

pytestmark = pytest.mark.gpu

REL_TOL = {"fp32": 1e-4, "bf16": 3e-2, "fp16": 1e-2}
TINY = dict(vocab_size=300, embedding_size=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=64)


def rel_err(a: torch.Tensor, ref: torch.Tensor) -> float:
    return ((a.detach().float().cpu() - ref.float()).norm() / ref.float().norm()).item()


def family_model(family: heads.HeadFamily) -> torch.nn.Module:
    """The family's model class, seeded, with its head's weights spread (fresh heads give logits near 0, whose
    relative error says little)."""
    torch.manual_seed(0)
    config = AlbertConfig(**TINY, num_labels=1 if family.name == "regression" else 3,
                          problem_type=family.problem_type)
    model = models.MODEL_CLASSES[family.model_class](config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.startswith(("classifier.", "qa_outputs.", "sop.")):
                p.normal_(0, 0.5)
    return model


def family_inputs(family: heads.HeadFamily) -> dict[str, torch.Tensor]:
    """Three rows of 24 tokens, the second padded after 15: [B, L], or [B, 2 choices, L] for multiple choice."""
    x = synthetic_inputs(AlbertConfig(**TINY), 6 if family.choice_axis else 3, 24)
    x["attention_mask"][1, 15:] = 0
    return {k: v.view(3, 2, 24) for k, v in x.items()} if family.choice_axis else x


def outputs(out) -> dict[str, torch.Tensor]:
    return {k: v for k, v in vars(out).items() if isinstance(v, torch.Tensor)}


@pytest.mark.parametrize("mode", ["autocast", "weights"])
@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
@pytest.mark.parametrize("family", heads.FAMILIES, ids=lambda f: f.name)
def test_every_head_family_matches_cpu_fp32(gpu_device, family, precision, mode):
    """mode autocast: fp32 weights under autocast (training, evaluation); weights: the weights cast to the
    precision (`for_inference`: predict, the pipeline, serve)."""
    model, x = family_model(family), family_inputs(family)
    with torch.no_grad():
        ref = outputs(model(**x))
        on = copy.deepcopy(model)
        on = for_inference(on, precision, gpu_device) if mode == "weights" else on.to(gpu_device)
        with autocast(precision if mode == "autocast" else "fp32", gpu_device):
            got = outputs(on(**{k: v.to(gpu_device) for k, v in x.items()}))
    assert got.keys() == ref.keys() and ref
    real = x["attention_mask"].bool()  # [B, L], or [B, choices, L]
    flat = real.reshape(-1, real.shape[-1])  # multiple choice's encoder outputs are [B x choices, L, ...]
    for name, r in ref.items():
        assert got[name].device.type == gpu_device.type
        g = got[name].cpu()
        # per-token outputs: the real positions (QA masks the padding; the unpadded path leaves it at 0)
        mask = real if r.shape[:real.dim()] == real.shape else flat if r.shape[:2] == flat.shape else None
        if mask is not None:
            g, r = g[mask], r[mask]
        err = rel_err(g, r)
        assert err <= REL_TOL[precision], f"{family.name} {name}: relative error {err:.2e} ({precision}, {mode})"


@pytest.mark.parametrize("slopes", [None, [2.0, 0.5]], ids=["albert", "distance-bias"])
@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
@pytest.mark.parametrize("impl", ["sdpa", "math"])
def test_padding_leaves_the_real_positions_alone(gpu_device, impl, precision, slopes):
    """A row padded from 20 to 48 tokens gives, at its 20 real positions, what it gives alone: the attention mask
    reaches the fused (SDPA) and the explicit kernels alike, forward and backward; with a distance bias too (a
    float mask: SDPA's memory-efficient kernel instead of Flash)."""
    torch.manual_seed(0)
    config = AlbertConfig(**TINY, distance_bias=slopes)
    model = models.AlbertModel(config).to(gpu_device)
    set_attention_impl(model, impl)
    short = synthetic_inputs(config, 1, 20)
    padded = {k: torch.cat([v, torch.zeros(1, 28, dtype=v.dtype)], 1) for k, v in short.items()}
    # a fixed random direction: the sum of squares of a LayerNorm's output is nearly constant (no gradient)
    probe = torch.randn(1, 20, config.hidden_size, generator=torch.Generator().manual_seed(1)).to(gpu_device)
    results = []
    for x in (short, padded):
        model.zero_grad()
        with autocast(precision, gpu_device):
            out = model(**{k: v.to(gpu_device) for k, v in x.items()}).sequence_output[:, :20]
        (out.float() * probe).sum().backward()
        results.append((out.detach(), model.encoder.project_in.weight.grad.clone()))
    (alone, grad_alone), (in_padding, grad_padded) = results
    assert rel_err(in_padding, alone.cpu()) <= REL_TOL[precision]
    assert rel_err(grad_padded, grad_alone.cpu()) <= REL_TOL[precision]


def step_batches(config: AlbertConfig, steps: int, seed: int = 0) -> list[list[dict[str, torch.Tensor]]]:
    """Per step, 2 micro-batches of 4 sequences of 32 tokens, one row padded and two targets unweighted."""
    out = []
    for s in range(steps):
        micro = []
        for j in range(2):
            b = synthetic_pretraining_batch(config, 4, 32, 5, seed=seed + 10 * s + j)
            b.pop("labels")
            b["attention_mask"][1, 20:] = 0
            b["masked_weights"][0, -2:] = 0
            micro.append(b)
        out.append(micro)
    return out


def run_steps(run, batches) -> list[dict]:
    stats = []
    for micro in batches:
        stats.append(train_step(run, micro))
        run.step += 1
    return stats


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_training_steps_match_cpu_fp32(gpu_device, precision):
    """Three train_steps (accumulation 2) on the device in bf16/fp16 (fp16 through GradScaler) follow CPU fp32's
    losses; the weights move the same way."""
    config = AlbertConfig(**TINY)
    batches = step_batches(config, 3)
    ref_run = bench_run(config, 4, 32, 5, torch.device("cpu"), "fp32", lr=1e-3, accum=2)
    run = bench_run(config, 4, 32, 5, gpu_device, precision, lr=1e-3, accum=2)
    ref, got = run_steps(ref_run, batches), run_steps(run, batches)
    assert not any(s["skipped"] for s in got)
    for r, g in zip(ref, got):
        assert g["loss"] == pytest.approx(r["loss"], rel=REL_TOL[precision])
        assert g["grad_norm"] == pytest.approx(r["grad_norm"], rel=10 * REL_TOL[precision])
    start = bench_run(config, 4, 32, 5, torch.device("cpu"), "fp32").raw_model.state_dict()  # the seeded start
    final, ref_final = run.raw_model.state_dict(), ref_run.raw_model.state_dict()
    moved = torch.cat([(final[k].cpu() - start[k]).flatten() for k in start])
    ref_moved = torch.cat([(ref_final[k] - start[k]).flatten() for k in start])
    assert all(final[k].device.type == gpu_device.type for k in final)
    assert rel_err(moved, ref_moved) <= 10 * REL_TOL[precision]  # all weights' updates, taken together


def test_fp16_scale_overflow_is_skipped_and_the_scale_lowered(gpu_device):
    """GradScaler's own rule: an update whose scaled gradients overflow is skipped and the scale halved; it is not
    a non-finite step (--nan-policy error would stop the run on it). At a workable scale the step applies."""
    config = AlbertConfig(**TINY)
    batches = step_batches(config, 2)
    run = bench_run(config, 4, 32, 5, gpu_device, "fp16", lr=1e-3, accum=2, init_scale=2.0**100)
    before = {k: v.clone() for k, v in run.raw_model.state_dict().items()}
    stats = train_step(run, batches[0])
    assert stats["skipped"] and run.nan_skipped == 0 and run.scaler.get_scale() == 2.0**99
    assert all(torch.equal(v, before[k]) for k, v in run.raw_model.state_dict().items())
    assert not run.optimizer.state  # nothing stepped
    run.scaler.update(new_scale=2.0**10)
    stats = train_step(run, batches[1])
    assert not stats["skipped"] and stats["grad_norm"] == pytest.approx(stats["grad_norm"])  # finite
    assert not all(torch.equal(v, before[k]) for k, v in run.raw_model.state_dict().items())


def test_compiled_step_matches_eager(gpu_device):
    """torch.compile'd train_step (the --compile path) gives eager's losses and grad norms."""
    config = AlbertConfig(**TINY)
    batches = step_batches(config, 3)
    eager = run_steps(bench_run(config, 4, 32, 5, gpu_device, "fp32", lr=1e-3, accum=2), batches)
    compiled = run_steps(bench_run(config, 4, 32, 5, gpu_device, "fp32", lr=1e-3, accum=2, compile=True), batches)
    for e, c in zip(eager, compiled):
        assert c["loss"] == pytest.approx(e["loss"], rel=1e-4)
        assert c["grad_norm"] == pytest.approx(e["grad_norm"], rel=1e-3)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_memory_lower_bound_holds_on_the_device(gpu_device, precision, record_property):
    """memory.training_bytes is a lower bound (check_training_memory refuses runs above free memory by it): the
    peak the CUDA allocator records for a real step must not be below it. A shape where activations and attention
    probabilities dominate (seq 256), the two precisions training uses on GPUs."""
    if gpu_device.type != "cuda":
        pytest.skip("torch.cuda.max_memory_allocated has no CPU counterpart")
    from litebert.memory import training_bytes

    config = AlbertConfig(vocab_size=8000, embedding_size=128, hidden_size=256, num_hidden_layers=4,
                          num_attention_heads=4, intermediate_size=1024, max_position_embeddings=256)
    B, L, P = 16, 256, 40
    batch = synthetic_pretraining_batch(config, B, L, P)
    batch.pop("labels")
    torch.cuda.empty_cache()
    base = torch.cuda.memory_allocated(gpu_device)
    torch.cuda.reset_peak_memory_stats(gpu_device)
    run = bench_run(config, B, L, P, gpu_device, precision)
    for _ in range(2):  # the second step holds the optimizer's moments too
        train_step(run, [batch])
    synchronize(gpu_device)
    peak = torch.cuda.max_memory_allocated(gpu_device) - base
    bound = training_bytes(config, B, L, P)
    # gpu_check.py copies this into docs/gpu.md
    record_property(f"memory {precision}", f"lower bound {bound / 2**20:.0f} MiB, CUDA peak {peak / 2**20:.0f} MiB "
                                           f"({peak / bound:.2f}x the bound)")
    assert bound <= peak, f"the lower bound {bound / 2**20:.0f} MiB exceeds the real peak {peak / 2**20:.0f} MiB"
