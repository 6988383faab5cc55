"""Inference, encoder + pooler: litebert AlbertModel vs transformers.AlbertModel, side by side.

ours       AlbertModel at the library's default precision on this machine (precision "auto", resolved by
           `litebert.device.resolve_precision`: weights stored in bf16 where bf16 matmuls are fast, fp32 where they
           are not) + torch.compile; fused QKV, SDPA.
ours int8  the same model with torch.ao dynamic int8 quantization of the Linear layers, eager: an opt-in lever for
           CPUs (not the library's default), its own row, never the target's "ours".
reference  transformers.AlbertModel (sdpa) under bf16 autocast, the usual way to run it in bf16 (the target);
           also HF with weights cast to bf16, and HF fp32. Where HF's bf16 is slower than its fp32 on this machine
           (e.g. AVX512-BF16 without AMX), a context line gives ours against HF's fastest side too.
Lever rows: ours compiled with inductor's freezing (CPU); ours eager in bf16 weights / bf16 autocast / fp32, and
without the attention mask.
Both sides get the same inputs: full-length sequences with an all-ones attention mask, no_grad (inference_mode);
--padded: rows of random lengths (seq/4 to seq) and the rest padding, plus a row of ours skipping the padding.

    python benchmarks/bench_inference.py                      # batch 1 (latency) and batch 32 (throughput), seq 128
    python benchmarks/bench_inference.py --batches 1 --steps 20
"""

from __future__ import annotations

import sys

import _common as C
from litebert.lab.bench import (Side, calibration_side, encoder_flops_per_token, hf_encoder_forward,
                            inference_mode, ours_encoder_forward, run_interleaved, synthetic_inputs)


def main(argv: list[str] | None = None) -> int:
    p = C.base_parser(__doc__.split("\n\n")[0])
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--batches", default="1,32", help="batch sizes, comma-separated")
    p.add_argument("--no-compile", dest="compile", action="store_false", help="ours without torch.compile")
    p.add_argument("--no-levers", dest="levers", action="store_false", help="only ours and the references")
    p.add_argument("--padded", action="store_true", help="rows of lengths from seq/4 to seq (the rest padding) "
                   "instead of full-length rows; adds a row of ours skipping the padding")
    p.add_argument("--precision", default="auto", choices=("auto", "fp32", "bf16"),
                   help="ours: auto (the library's choice here) | fp32 (e.g. to stand in for a host without bf16 "
                        "instructions: the target is then against HF fp32) | bf16")
    p.set_defaults(steps=None, repeats=5)
    args = p.parse_args(argv)
    device = C.setup(args)
    log = C.logger(args)
    config = C.load_model_config(args.model)
    mode = inference_mode(device) if args.precision == "auto" else args.precision
    target_ref = "HF fp32" if mode == "fp32" else "HF bf16 autocast"  # the same precision's reference
    compile_ours = args.compile
    payload: dict = {"workload": "inference", "mode": mode, "sections": [], "targets": []}
    for B in [int(b) for b in args.batches.split(",")]:
        steps = args.steps or max(1, 16 // B)  # forwards per turn: ~a second of work each
        if args.quick:
            args.repeats, steps = min(args.repeats, 2), max(1, steps // 2)
        inputs = synthetic_inputs(config, B, args.seq, padded=args.padded)
        tokens = B * args.seq
        flops = encoder_flops_per_token(config, args.seq) * tokens
        no_mask = {k: v for k, v in inputs.items() if k != "attention_mask"}
        sides = [Side("ours", ours_encoder_forward(config, inputs, device, mode, compile=compile_ours), B, flops,
                      f"{mode} weights (the library's default here)"
                      + (", torch.compile" if compile_ours else ", eager"))]
        if mode != "fp32" or args.levers:  # (on an fp32 host HF's bf16 sides are minutes of slow emulation)
            sides += [Side("HF bf16 autocast", hf_encoder_forward(config, inputs, device, "bf16-autocast"), B, flops,
                           "transformers AlbertModel, fp32 weights under bf16 autocast (the target's reference)"),
                      Side("HF bf16 weights", hf_encoder_forward(config, inputs, device, "bf16"), B, flops,
                           "transformers AlbertModel.to(bfloat16)")]
        sides.append(Side("HF fp32", hf_encoder_forward(config, inputs, device, "fp32"), B, flops, "eager fp32"))
        if device.type == "cpu":
            sides.append(Side("ours int8 dynamic (opt-in)", ours_encoder_forward(config, inputs, device, "int8"), B,
                              flops, "eager, torch.ao quantize_dynamic(Linear, qint8), fp32 activations; not the "
                              "library's default"))
        if args.padded:
            sides.append(Side("ours eager, skips padding", ours_encoder_forward(config, inputs, device, mode,
                                                                                 unpad=True), B, flops,
                              f"{mode} weights, Encoder.unpad (the pipeline's and serve's way)"))
        if args.levers:
            if compile_ours and device.type == "cpu":
                sides.append(Side("ours compiled, frozen",
                                  ours_encoder_forward(config, inputs, device, mode, compile=True, freeze=True), B,
                                  flops, f"{mode} weights, torch.compile with freezing (weights as graph constants, "
                                  "prepacked for oneDNN)"))
            sides += [Side("ours fp32", ours_encoder_forward(config, inputs, device, "fp32"), B, flops, "eager"),
                      Side("ours bf16 autocast", ours_encoder_forward(config, inputs, device, "bf16-autocast"), B,
                           flops, "eager, fp32 weights cast per call"),
                      Side("ours bf16 weights", ours_encoder_forward(config, inputs, device, "bf16"), B, flops,
                           "eager"),
                      Side(f"ours {mode} weights, no mask", ours_encoder_forward(config, no_mask, device, mode), B,
                           flops, "eager, attention_mask=None (SDPA's unmasked path)")]
        sides = [_repeat(s, steps) for s in sides]
        sides.append(calibration_side(device, mode, tokens, config.hidden_size, config.intermediate_size,
                                      calls=max(10, 320 // B)))
        results = run_interleaved(sides, repeats=args.repeats, steps=1, device=device, log=log)
        peak = results[-1].throughput
        by = {r.name: r for r in results}
        headers, rows = C.side_rows(results, "ours", peak, "examples")
        latency_col = [f"{1e3 * r.step_s / steps:.1f}" if r is not results[-1] else "" for r in results]
        headers.insert(3, "ms/batch")
        for row, lat in zip(rows, latency_col):
            row.insert(3, lat)
        what = (f"inference latency batch 1 seq {args.seq} ({mode})" if B == 1
                else f"inference throughput batch {B} seq {args.seq} ({mode})")
        goal, higher = (0.5, False) if B == 1 else (2.0, True)
        targets = [C.target_entry(f"{what}: ours / {target_ref}", by["ours"], by[target_ref], goal,
                                  higher_is_better=higher)]
        targets += C.fastest_reference_entry(f"{what}: ours / {{ref}}", by["ours"], by[target_ref],
                                             [r for r in results if r.name.startswith("HF ")], goal, higher)
        notes = [f"{steps} forward(s) per turn: s/step is a turn, ms/batch one forward; MFU against the calibration "
                 f"GEMM ({peak / 1e12:.2f} TFLOP/s, {mode}).",
                 (f"ours: precision \"auto\" resolved to {mode} on this machine" if args.precision == "auto" else
                  f"ours: --precision {mode} (auto would pick {inference_mode(device)} here)")
                 + "; int8 is an opt-in lever, shown as its own row.",
                 "first call s: includes torch.compile for ours."]
        title = f"Inference (encoder + pooler): {args.model}, batch {B}, seq {args.seq}, {args.threads} threads"
        C.print_report(title, headers, rows, notes, targets)
        payload["sections"].append({"title": title, "headers": headers, "rows": rows, "notes": notes,
                                    "results": [r.to_dict() for r in results]})
        payload["targets"] += targets
    C.write_json(args, device, payload)
    return 0


def _repeat(side: Side, n: int) -> Side:
    """n calls per step, so one timed step is long enough to measure (batch 1 takes tens of ms)."""
    def step():
        for _ in range(n):
            out = side.step()
        return out
    return Side(side.name, step, side.units_per_step * n, side.flops_per_step * n, side.note)


if __name__ == "__main__":
    sys.exit(main())
