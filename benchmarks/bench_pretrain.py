"""Pretraining step (MLM + SOP, optimizer included): litebert vs transformers.AlbertForPreTraining, side by side.

ours       `litebert.pretrain.train_step`, one micro-batch: sparse MLM head over the fixed P masked positions,
           MLM sum / global masked count + SOP, LAMB, global grad clip 1.0; precision "auto", i.e. what the library
           picks on this machine (`litebert.device.resolve_precision`: bf16 autocast where bf16 matmuls are fast,
           fp32 where they are not); torch.compile (eager fallback if it fails).
ours DDP   the same train_step as N DDP ranks (gloo) x 1 thread on slices of the batch (N = --threads, CPU only):
           the "2 ranks x 1 thread vs 1 process x 2 threads" lever, same cores and global batch.
reference  transformers.AlbertForPreTraining, attn_implementation="sdpa" (its default), labels in its own format
           (dense MLM head over all positions, -100 elsewhere; CE mean + SOP CE), the same LAMB from
           litebert.optim, grad clip 1.0; fp32 eager and under bf16 autocast.
Both sides: same config, batch, sequence length, threads, full-length sequences (no padding), P = 20 predictions.

    python benchmarks/bench_pretrain.py                          # albert-base, seq 128, batch 32
    python benchmarks/bench_pretrain.py --seq 512 --batch 8 --reference fp32,bf16
    python benchmarks/bench_pretrain.py --levers                 # each lever's contribution, one at a time
    python benchmarks/bench_pretrain.py --device cuda            # MFU against the GPU's spec-sheet peak
    python benchmarks/bench_pretrain.py --device cuda --also-eager --reference bf16   # benchmarks/gpu_check.py's
"""

from __future__ import annotations

import sys
import time

import torch

import _common as C
from litebert.lab.bench import (DDPSide, Side, calibration_side, device_peak_flops, hf_pretrain_step,
                            ours_pretrain_step, ours_train_step, ratio, run_interleaved,
                            synthetic_pretraining_batch)
from litebert.device import resolve_precision
from litebert.model import model_flops_per_token

# MFU goals against the in-process calibration GEMM (issue 24): 60% at seq 128, where the step is short GEMMs and
# the kernels between them; 50% elsewhere.
MFU_GOAL = {128: 0.6, None: 0.5}
# Speed goals (issue 24): (reference precision, ours / reference) at seq 128; against HF bf16 elsewhere. Where the
# reference's bf16 is slower than its fp32 on this machine, a context line against HF fp32 stands beside the goal.
TARGETS = {128: (("fp32", 4.0), ("bf16", 2.0)), None: (("bf16", 2.0),)}


def main(argv: list[str] | None = None) -> int:
    p = C.base_parser(__doc__.split("\n\n")[0])
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--predictions", type=int, default=20, help="P: masked positions per sequence (official: 20)")
    p.add_argument("--precision", default="auto", help="ours: auto | bf16 | fp32")
    p.add_argument("--reference", default="fp32,bf16", help="Hugging Face precisions to run, comma-separated")
    p.add_argument("--no-compile", dest="compile", action="store_false", help="ours without torch.compile")
    p.add_argument("--also-eager", action="store_true",
                   help="with compile: also 'ours eager', the step `litebert pretrain` runs without --compile")
    p.add_argument("--levers", action="store_true", help="also measure each lever of ours on its own")
    p.add_argument("--no-ddp", dest="ddp", action="store_false",
                   help="skip 'ours DDP' (threads ranks x 1 thread), run by default on CPU with threads > 1")
    p.add_argument("--no-main", dest="main", action="store_false", help="skip the main comparison (with --levers)")
    p.add_argument("--lever-repeats", type=int, default=3, help="turns per side in the lever table")
    p.set_defaults(repeats=5)
    args = p.parse_args(argv)
    if args.quick:
        args.repeats, args.lever_repeats, args.steps = 2, 2, 1
    device = C.setup(args)
    log = C.logger(args)
    config = C.load_model_config(args.model)
    precision = resolve_precision(args.precision, device)
    batch = synthetic_pretraining_batch(config, args.batch, args.seq, args.predictions)
    tokens = args.batch * args.seq
    sparse_flops = model_flops_per_token(config, args.seq, args.predictions / args.seq) * tokens
    dense_flops = model_flops_per_token(config, args.seq, None) * tokens
    # The MFU denominator runs in the precision ours runs in (fp32 where "auto" resolved to fp32).
    calib = calibration_side(device, precision, tokens, config.hidden_size, config.intermediate_size)
    shape = f"{args.model}, seq {args.seq}, batch {args.batch}, {args.threads} threads, {device.type}"
    payload: dict = {"workload": "pretrain", "shape": shape, "seq": args.seq, "batch": args.batch,
                     "precision": precision, "sections": []}

    if args.main:
        ours = Side("ours", compiled_or_eager(config, batch, device, precision, args.compile, log),
                    tokens, sparse_flops,
                    f"litebert train_step: {precision}, sparse MLM head (P={args.predictions}), "
                    f"{'torch.compile' if args.compile else 'eager'}")
        sides, ddp = [ours], None
        if args.also_eager and args.compile:
            sides.append(Side("ours eager", ours_train_step(config, batch, device, precision), tokens, sparse_flops,
                              f"the same train_step, {precision}, eager (`litebert pretrain` without --compile)"))
        if args.ddp and device.type == "cpu" and args.threads > 1 and args.batch % args.threads == 0:
            ddp = DDPSide(config, batch, precision, world=args.threads, compile=args.compile)
            sides.append(Side("ours DDP", ddp.step, tokens, sparse_flops,
                              f"the same train_step as {args.threads} DDP ranks (gloo) x 1 thread, batch "
                              f"{args.batch // args.threads} each" + (", torch.compile" if args.compile else ""),
                              in_process=False))
        for ref in [r for r in args.reference.split(",") if r]:
            how = "eager fp32" if ref == "fp32" else f"{ref} autocast"
            sides.append(Side(f"HF {ref}", hf_pretrain_step(config, batch, device, ref), tokens, dense_flops,
                              f"transformers AlbertForPreTraining, {how}, dense MLM head, sdpa"))
        sides.append(calib)
        try:
            results = run_interleaved(sides, repeats=args.repeats, steps=args.steps, device=device, log=log)
        finally:
            if ddp is not None:
                ddp.close()
        peak, peak_src = peak_of(results[-1], device)
        targets = []
        by = {r.name: r for r in results}
        what = f"pretraining step {args.model} seq {args.seq} batch {args.batch}"
        hf = [r for r in results if r.name.startswith("HF ")]
        goals = dict(TARGETS.get(args.seq, TARGETS[None]))
        for who in ("ours", "ours DDP"):
            for ref, goal in goals.items():
                if f"HF {ref}" in by and who in by:
                    targets.append(C.target_entry(f"{what}: {who} vs HF {ref}", by[who], by[f"HF {ref}"], goal))
            if "HF bf16" in by and who in by and "fp32" not in goals:
                targets += C.fastest_reference_entry(f"{what}: {who} vs {{ref}}", by[who], by["HF bf16"], hf, 2.0)
        mfu = by["ours"].mfu(peak)
        mfu_goal = MFU_GOAL.get(args.seq, MFU_GOAL[None])
        targets.append({"name": f"MFU of ours ({precision}), {args.model} seq {args.seq} batch {args.batch}, vs {peak_src}", "value": mfu, "min": mfu, "max": mfu,
                        "target": mfu_goal, "comparison": ">=", "met": bool(mfu >= mfu_goal), "command": C.command_line(),
                        "unit": "fraction"})
        headers, rows = C.side_rows(results, "ours", peak, "tokens")
        notes = [f"MFU = matmul FLOPs each side executes (HF: dense head over all {args.seq} positions; ours: "
                 f"{args.predictions} positions) / step time / {peak_src} = {peak / 1e12:.2f} TFLOP/s.",
                 f"first call s: the first step alone (ours: includes torch.compile = "
                 f"{by['ours'].first_step_s - by['ours'].step_s:.0f}s more than a warm step).",
                 "+RSS MB: peak RSS during the side's turn minus RSS at its start (activations, logits, grads)."]
        C.print_report(f"Pretraining step: {shape}", headers, rows, notes, [t for t in targets if "unit" not in t])
        print(f"MFU of ours: {100 * mfu:.0f}% (goal >= {100 * mfu_goal:.0f}%)")
        payload["sections"].append({"title": f"Pretraining step: {shape}", "kind": "main", "headers": headers,
                                    "rows": rows, "notes": notes,
                                    "results": [r.to_dict() for r in results], "peak_flops": peak,
                                    "peak_source": peak_src})
        payload["targets"] = targets

    if args.levers:
        payload["sections"].append(levers(args, config, batch, device, precision, calib, sparse_flops,
                                          dense_flops, tokens, shape, log))
    C.write_json(args, device, payload)
    return 0


def compiled_or_eager(config, batch, device, precision, compile: bool, log):
    """Our train_step, compiled when asked; if compilation fails, the eager step (and say so)."""
    step = ours_train_step(config, batch, device, precision, compile=compile)
    if not compile:
        return step
    state = {"step": step}

    def guarded():
        try:
            return state["step"]()
        except Exception as exc:  # noqa: BLE001 - compile is an optimisation; never the reason a run fails
            if state.get("fallback"):
                raise
            print(f"torch.compile failed ({type(exc).__name__}: {exc}); falling back to eager", file=sys.stderr)
            state["step"], state["fallback"] = ours_train_step(config, batch, device, precision), True
            return state["step"]()

    return guarded


def peak_of(calibration, device) -> tuple[float, str]:
    known = device_peak_flops(device)
    if known:
        return known
    return calibration.throughput, f"the in-process calibration GEMM ({calibration.name})"


def levers(args, config, batch, device, precision, calib, sparse_flops, dense_flops, tokens, shape, log) -> dict:
    """Each lever added one at a time (same loss semantics), interleaved; the contribution is the ratio of a row
    to the row above it. Activation checkpointing and 1 thread are trade-offs, compared with the eager row."""
    eager, variants = lever_variants(precision, sparse_flops, dense_flops)
    if args.threads == 1:
        variants.pop()  # T2 is the eager row itself
    sides = []
    for name, kw, flops in variants:
        threads = kw.pop("threads", None)
        step = ours_pretrain_step(config, batch, device, kw.pop("precision"), **kw)
        sides.append(Side(name, with_threads(step, threads) if threads else step, tokens, flops, ""))
    ddp = None
    if device.type == "cpu" and args.threads > 1 and args.batch % args.threads == 0:
        ddp = DDPSide(config, batch, precision, world=args.threads)
        sides.append(Side(f"T3 {eager} as {args.threads} DDP ranks x 1 thread", ddp.step, tokens, sparse_flops,
                          "gloo, each rank batch / ranks", in_process=False))
    sides.append(optimizer_side(config, batch, device, precision))
    sides.append(calib)
    t0 = time.perf_counter()
    try:
        results = run_interleaved(sides, repeats=args.lever_repeats, steps=args.steps, device=device, log=log)
    finally:
        if ddp is not None:
            ddp.close()
    peak, peak_src = peak_of(results[-1], device)
    headers = ["lever", "tokens/s", "s/step", "vs row above", "same, CPU time", "vs L0", "MFU", "first call s",
               "peak RSS MB", "+RSS MB"]
    rows = []
    base = results[0]

    def vs(a, b, clock="wall") -> str:  # median of per-turn ratios
        if b is None or b.error or (clock == "cpu" and not (a.cpu_seconds and b.cpu_seconds)):
            return ""
        return f"{ratio(a, b, clock)[0]:.2f}x"

    eager_row = next(r for r in results if r.name.startswith(eager + " "))
    compiled_row = [r for r in results if r.name.startswith("L")][-1]
    for i, r in enumerate(results[:-1]):
        if r.error:
            rows.append([r.name, "failed", r.error, "", "", "", "", "", "", ""])
            continue
        if r.name.startswith("optimizer"):
            rows.append([r.name, "-", r.step_s,
                         f"{100 * r.step_s / compiled_row.step_s:.0f}% of {compiled_row.name.split()[0]}'s step", "", "",
                         "", r.first_step_s, r.peak_rss_mb, r.rss_growth_mb])
            continue
        above = eager_row if r.name.startswith("T") else results[i - 1] if i else None
        rows.append([r.name, r.throughput, r.step_s, vs(r, above), vs(r, above, "cpu"), vs(r, base),
                     f"{100 * r.mfu(peak):.0f}%", r.first_step_s, r.peak_rss_mb, r.rss_growth_mb])
    notes = [f"Rows L0-{compiled_row.name.split()[0]} add one lever each; 'vs row above' is that lever's "
             f"contribution. T rows are trade-offs measured against {eager} (same eager model); T3's peak RSS is the "
             "parent's only (the ranks are other processes).",
             f"MFU against {peak_src} = {peak / 1e12:.2f} TFLOP/s.",
             f"lever table measured in {time.perf_counter() - t0:.0f}s."]
    C.print_report(f"Levers, one at a time: {shape}", headers, rows, notes, [])
    return {"title": f"Levers, one at a time: {shape}", "kind": "levers", "headers": headers, "rows": rows,
            "notes": notes,
            "results": [r.to_dict() for r in results], "peak_flops": peak, "peak_source": peak_src}


def lever_variants(precision: str, sparse_flops: float, dense_flops: float) -> tuple[str, list]:
    """The lever table's rows (name, ours_pretrain_step settings, FLOPs per step) and the eager row the T rows are
    measured against. In bf16 (fp16) the levers are autocast, the sparse MLM head, the math attention path and
    torch.compile. Where precision "auto" resolved to fp32 (the CPU's bf16 matmuls measured slower than fp32, e.g.
    AVX512-BF16 without AMX) ours runs fp32, bf16 autocast becomes a trade-off row, and the math attention path is
    no lever (`litebert.model.attend` takes it for bf16 only)."""
    p = precision
    if p == "fp32":
        eager = "L1"
        rows = [("L0 fp32, dense head, SDPA", dict(precision="fp32", sparse=False, attention="sdpa"), dense_flops),
                ("L1 + sparse MLM head", dict(precision="fp32"), sparse_flops),
                ("L2 + no attention mask (no padding)", dict(precision="fp32", pass_mask=False), sparse_flops),
                ("L3 + torch.compile", dict(precision="fp32", compile=True), sparse_flops),
                ("T0 L1 + bf16 autocast (not auto's choice here)", dict(precision="bf16"), sparse_flops)]
    else:
        eager = "L3"
        rows = [("L0 fp32, dense head, SDPA", dict(precision="fp32", sparse=False, attention="sdpa"), dense_flops),
                (f"L1 + {p} autocast", dict(precision=p, sparse=False, attention="sdpa"), dense_flops),
                ("L2 + sparse MLM head", dict(precision=p, attention="sdpa"), sparse_flops),
                ("L3 + math attention (auto)", dict(precision=p), sparse_flops),
                ("L4 + no attention mask (no padding)", dict(precision=p, pass_mask=False), sparse_flops),
                ("L5 + torch.compile", dict(precision=p, compile=True), sparse_flops)]
    rows += [(f"T1 {eager} + activation checkpointing", dict(precision=p, gradient_checkpointing=True),
              sparse_flops),
             (f"T2 {eager} on 1 thread", dict(precision=p, threads=1), sparse_flops)]
    return eager, rows


def with_threads(step, threads: int):
    def run():
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            return step()
        finally:
            torch.set_num_threads(before)
    return run


def optimizer_side(config, batch, device, precision) -> Side:
    """LAMB (foreach) + global grad-norm clip alone, on real gradients: the optimizer's share of a step."""
    from litebert.lab.bench import autocast
    from litebert.model import AlbertForPreTraining
    from litebert.optim import build_optimizer

    model = AlbertForPreTraining(config).to(device).train()
    b = {k: v.to(device) for k, v in batch.items()}
    with autocast(precision, device):
        out = model(b["input_ids"], None, b["token_type_ids"], masked_positions=b["masked_positions"])
    out.mlm_logits.float().logsumexp(-1).mean().backward()
    optimizer = build_optimizer(model, "lamb", lr=1e-6)

    def step():
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()

    return Side("optimizer: LAMB foreach + clip", step, 0.0, 0.0, "")


if __name__ == "__main__":
    sys.exit(main())
