"""Where a step's time goes: torch.profiler over one warm step of ours, ops grouped into what limits the step.

The benchmark scripts say how fast a step is; this one says why: the share of the step spent in matrix
multiplications (the part MFU counts), in the kernels between them (LayerNorm, GELU, softmax, residual adds, casts:
fused by inductor under torch.compile), in the optimizer, and the rest.

    python benchmarks/profile_step.py                                # pretraining step, albert-base seq 128 batch 32
    python benchmarks/profile_step.py --workload inference --batch 32
    python benchmarks/profile_step.py --no-compile --top 30          # eager: one row per ATen op
    python benchmarks/profile_step.py --gemm-shapes                  # each GEMM shape of the step vs the calibration
"""

from __future__ import annotations

import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

import _common as C
from litebert.device import resolve_precision
from litebert.lab.bench import (format_table, host_line, ours_encoder_forward, ours_train_step, synthetic_inputs,
                                synthetic_pretraining_batch)

# Self-time of these ops is matrix-multiply work (oneDNN/MKL or cuBLAS underneath).
GEMM_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::_scaled_dot_product",
            "mkldnn::_linear_pointwise", "onednn::", "mkl::", "aten::linear")
OPTIMIZER_OPS = ("aten::_foreach", "aten::lerp_", "aten::addcmul_", "aten::addcdiv_", "aten::sqrt",
                 "aten::linalg_vector_norm", "aten::clamp_", "aten::where")


def category(name: str) -> str:
    if name.startswith(GEMM_OPS):
        return "matmul (GEMM)"
    # "## Call CompiledFxGraph ..." is how the profiler names a call of an inductor-compiled graph on CPU (its
    # fused C++ kernels run inside it; the GEMMs it calls are recorded as their own aten ops).
    if "cpp_fused" in name or name.startswith(("graph_", "triton_", "Torch-Compiled", "CompiledFunction",
                                               "## Call CompiledFxGraph")):
        return "inductor fused kernels (LayerNorm, GELU, softmax, adds, casts)"
    if name.startswith(OPTIMIZER_OPS):
        return "optimizer and grad clip (elementwise over the parameters)"
    if name.startswith(("aten::copy_", "aten::_to_copy", "aten::clone", "aten::cat", "aten::contiguous")):
        return "copies and casts"
    return "other ops (eager elementwise, loss, embedding, bookkeeping)"


def main(argv: list[str] | None = None) -> int:
    p = C.base_parser(__doc__.split("\n\n")[0])
    p.add_argument("--workload", choices=["pretrain", "inference"], default="pretrain")
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--predictions", type=int, default=20)
    p.add_argument("--precision", default="auto", help="pretraining: auto | bf16 | fp32")
    p.add_argument("--no-compile", dest="compile", action="store_false")
    p.add_argument("--top", type=int, default=15, help="rows of the per-op table")
    p.add_argument("--gemm-shapes", action="store_true",
                   help="instead: the rate of each GEMM shape of the training step against the calibration GEMM")
    args = p.parse_args(argv)
    device = C.setup(args)
    config = C.load_model_config(args.model)
    if args.gemm_shapes:
        return gemm_shapes(args, config, device)
    if args.workload == "pretrain":
        precision = resolve_precision(args.precision, device)
        batch = synthetic_pretraining_batch(config, args.batch, args.seq, args.predictions)
        step = ours_train_step(config, batch, device, precision, compile=args.compile)
        what = f"pretraining step (train_step), {precision}"
    else:
        precision = "bf16"
        step = ours_encoder_forward(config, synthetic_inputs(config, args.batch, args.seq), device, "bf16",
                                    compile=args.compile)
        what = "inference forward (encoder + pooler), bf16 weights"
    what += ", torch.compile" if args.compile else ", eager"
    t0 = time.perf_counter()
    step()  # compilation and lazy initialisation: not profiled
    first = time.perf_counter() - t0
    step()
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])) as prof:
        t0, c0 = time.perf_counter(), time.process_time()
        step()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    events = [e for e in prof.key_averages() if e.self_cpu_time_total > 0]
    total = sum(e.self_cpu_time_total for e in events) or 1.0
    by_cat: dict[str, float] = {}
    for e in events:
        by_cat[category(e.key)] = by_cat.get(category(e.key), 0.0) + e.self_cpu_time_total
    title = f"{what}: {args.model}, seq {args.seq}, batch {args.batch}, {args.threads} threads, {device.type}"
    print(f"\n## Profile: {title}\n")
    print(f"host: {host_line()}")
    print(f"one warm step: {wall:.2f} s wall, {cpu:.2f} s CPU (first call {first:.1f} s); "
          f"profiled self time {total / 1e6:.2f} s\n")
    print(format_table(["where the time goes", "self s", "share"],
                       [[k, f"{v / 1e6:.2f}", f"{100 * v / total:.1f}%"]
                        for k, v in sorted(by_cat.items(), key=lambda kv: -kv[1])]))
    print()
    top = sorted(events, key=lambda e: -e.self_cpu_time_total)[:args.top]
    print(format_table(["op", "group", "calls", "self s", "share"],
                       [[e.key[:70], category(e.key).split(" (")[0], e.count, f"{e.self_cpu_time_total / 1e6:.3f}",
                         f"{100 * e.self_cpu_time_total / total:.1f}%"] for e in top]))
    print(f"\ncommand: {C.command_line()}")
    C.write_json(args, device, {"workload": f"profile-{args.workload}", "title": title, "wall_s": wall,
                                "cpu_s": cpu, "groups": {k: v / 1e6 for k, v in by_cat.items()},
                                "top": [[e.key, e.count, e.self_cpu_time_total / 1e6] for e in top]})
    return 0


def gemm_shapes(args, config, device) -> int:
    """Each GEMM of the training step (bf16) timed alone, interleaved with the calibration GEMM (the MFU denominator):
    which shapes run slower than it. CPU time is reported too (with 1 thread, the time the GEMM really ran)."""
    from litebert.lab.bench import Side, run_interleaved

    M, H, I, E, V = args.batch * args.seq, config.hidden_size, config.intermediate_size, config.embedding_size, \
        config.vocab_size
    heads, L = config.num_attention_heads, args.seq
    bh, d = args.batch * heads, H // heads
    P = args.batch * args.predictions
    g = torch.Generator().manual_seed(0)

    def side(name: str, a_shape, b_shape, transpose_a: bool = False) -> Side:
        a = torch.randn(*(a_shape[:-2] + (a_shape[-1], a_shape[-2]) if transpose_a else a_shape), generator=g)
        a = (a.transpose(-1, -2) if transpose_a else a).to(device, torch.bfloat16)
        b = torch.randn(*b_shape, generator=g).to(device, torch.bfloat16)
        batch = a_shape[0] if len(a_shape) == 3 else 1
        flops = 2.0 * batch * a_shape[-2] * a_shape[-1] * b_shape[-1] * 4

        def step():
            for _ in range(4):
                a @ b
        return Side(name, step, flops, flops)

    sides = [side(f"calibration [{M}x{H}]x[{H}x{I}]", (M, H), (H, I)),
             side(f"QKV forward [{M}x{H}]x[{H}x{3 * H}]", (M, H), (H, 3 * H)),
             side(f"out-projection forward [{M}x{H}]x[{H}x{H}]", (M, H), (H, H)),
             side(f"FFN down forward [{M}x{I}]x[{I}x{H}]", (M, I), (I, H)),
             side(f"FFN up weight gradient [{I}x{M}]x[{M}x{H}], A transposed", (I, M), (M, H), True),
             side(f"attention scores bmm {bh} x [{L}x{d}]x[{d}x{L}]", (bh, L, d), (bh, d, L)),
             side(f"attention values bmm {bh} x [{L}x{L}]x[{L}x{d}]", (bh, L, L), (bh, L, d)),
             side(f"MLM vocab GEMM [{P}x{E}]x[{E}x{V}]", (P, E), (E, V))]
    results = run_interleaved(sides, repeats=args.repeats, steps=1, device=device, log=C.logger(args))
    calib = results[0]
    rows = []
    for r in results:
        wall, cpu = r.throughput / calib.throughput, float("nan")
        if r.cpu_seconds and calib.cpu_seconds:
            cpu = (r.flops_per_step / min(r.cpu_seconds)) / (calib.flops_per_step / min(calib.cpu_seconds))
        rows.append([r.name, f"{r.throughput / 1e9:.0f}", f"{wall:.2f}x", f"{cpu:.2f}x"])
    print(f"\n## GEMM shapes of the training step: {args.model}, seq {args.seq}, batch {args.batch}, "
          f"{args.threads} threads, bf16\n")
    print(format_table(["GEMM", "GFLOP/s (median turn)", "vs calibration (wall)", "vs calibration (best CPU time)"],
                       rows))
    print(f"\ncommand: {C.command_line()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
