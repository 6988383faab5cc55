"""The full-size pretraining on paper: the paper's schedule for albert-base and albert-large in tokens, FLOPs, GPU
time, gradient all-reduce traffic and store size, from litebert's own configs and FLOP formula and from figures
measured on this machine (passed in, so every figure says where it comes from). Writes the tables of docs/scale.md.

    python benchmarks/scale_plan.py --store /tmp/gutenberg-store --cpu-tokens-per-s 629

Assumptions are flags with stated defaults: the GPU's dense bf16 peak (H100/H200 SXM: 989 TFLOP/s), the MFU
reached on it (--mfu), the per-GPU bandwidth between nodes (--link-gb-s, 50 GB/s = one 400 Gb/s InfiniBand NIC per
GPU) and the corpus size in text bytes (--corpus-gb, BookCorpus + English Wikipedia as in the paper: 16 GB).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from litebert.config import AlbertConfig
from litebert.model import AlbertForPreTraining, model_flops_per_token

STEPS, BATCH, SEQ, PREDICTIONS = 125_000, 4096, 512, 20  # the paper's schedule; official max_predictions_per_seq


def store_figures(store: Path) -> dict:
    """Bytes on disk per token and tokens per input byte of a real store."""
    meta = json.loads((store / "meta.json").read_text())
    stats = json.loads((store / "stats.json").read_text())
    tokens = sum(meta["splits"][s]["tokens"] for s in ("train", "validation"))
    size = sum(p.stat().st_size for p in store.rglob("*.bin"))
    return {"tokens": tokens, "bytes_on_disk": size, "bytes_per_token": size / tokens,
            "tokens_per_text_byte": tokens / stats["input"]["bytes"], "text_bytes": stats["input"]["bytes"]}


def hours(seconds: float) -> str:
    return f"{seconds / 3600:,.1f} h" if seconds < 3 * 86400 else f"{seconds / 86400:,.1f} days"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--store", type=Path, required=True, help="a store built here, for bytes/token")
    parser.add_argument("--cpu-tokens-per-s", type=float, required=True,
                        help="albert-base pretraining tokens/s measured on this CPU machine (docs/benchmarks.md)")
    parser.add_argument("--peak-tflops", type=float, default=989.0, help="GPU dense bf16 peak (H100/H200 SXM)")
    parser.add_argument("--mfu", type=float, default=0.40, help="assumed model FLOPs utilisation on the GPU")
    parser.add_argument("--link-gb-s", type=float, default=50.0, help="per-GPU bandwidth between nodes, GB/s")
    parser.add_argument("--corpus-gb", type=float, default=16.0, help="corpus size in text bytes (GB)")
    parser.add_argument("--gpus", default="8,64,256,512", help="GPU counts to tabulate (8 per node)")
    args = parser.parse_args()

    tokens = STEPS * BATCH * SEQ  # every position of every sequence: the schedule's upper bound
    store = store_figures(args.store)
    print(f"schedule: {STEPS:,} steps x {BATCH:,} sequences x {SEQ} tokens = {tokens:.3e} token positions\n")
    print("| model | parameters (trained, heads included) | gradient bytes (fp32) | training FLOPs/token at 512 "
          "| total FLOPs | GPU-hours at the assumed MFU | one 2-core CPU machine at the measured rate |")
    print("|---|---|---|---|---|---|---|")
    plans = {}
    for name in ("albert-base", "albert-large"):
        config = AlbertConfig.from_preset(name)
        with torch.device("meta"):
            params = AlbertForPreTraining(config).num_parameters()
        flops_token = model_flops_per_token(config, SEQ, PREDICTIONS / SEQ)
        total = flops_token * tokens
        gpu_seconds = total / (args.peak_tflops * 1e12 * args.mfu)
        base_flops = model_flops_per_token(AlbertConfig.from_preset("albert-base"), SEQ, PREDICTIONS / SEQ)
        # The CPU rate was measured on albert-base; albert-large is scaled by its FLOPs per token.
        cpu_seconds = tokens / (args.cpu_tokens_per_s * base_flops / flops_token)
        plans[name] = (params, total, gpu_seconds)
        print(f"| {name} | {params / 1e6:.1f} M | {params * 4 / 1e6:.0f} MB | {flops_token / 1e9:.3f} GFLOP | "
              f"{total:.2e} | {gpu_seconds / 3600:,.0f} | {cpu_seconds / 86400 / 365:,.0f} years |")

    print(f"\nOn GPUs at {args.peak_tflops:g} TFLOP/s bf16 x MFU {args.mfu:.0%}; ring all-reduce of the fp32 gradients "
          f"once per step (2 (n-1)/n x gradient bytes per GPU) at {args.link_gb_s:g} GB/s per GPU between nodes:\n")
    print("| model | GPUs (nodes of 8) | sequences per GPU per step | compute per step | all-reduce per step "
          "| all-reduce share if not overlapped | wall-clock for 125k steps |")
    print("|---|---|---|---|---|---|---|")
    for name, (params, _total, gpu_seconds) in plans.items():
        for n in (int(x) for x in args.gpus.split(",")):
            compute = gpu_seconds / n / STEPS
            comm = 2 * (n - 1) / n * params * 4 / (args.link_gb_s * 1e9)
            wall = (compute + comm) * STEPS
            print(f"| {name} | {n} ({max(1, n // 8)}) | {BATCH // n} | {compute * 1e3:,.0f} ms | {comm * 1e3:.1f} ms "
                  f"| {comm / (compute + comm):.1%} | {hours(wall)} |")

    corpus_tokens = args.corpus_gb * 1e9 * store["tokens_per_text_byte"]
    print(f"\nStore: measured on {args.store} ({store['text_bytes'] / 1e6:.1f} MB of text -> {store['tokens']:,} "
          f"tokens, {store['bytes_on_disk'] / 1e6:.1f} MB of .bin files): {store['bytes_per_token']:.3f} bytes per "
          f"token, {store['tokens_per_text_byte']:.3f} tokens per text byte.")
    print(f"A {args.corpus_gb:g} GB corpus -> about {corpus_tokens / 1e9:.2f} B tokens -> "
          f"{corpus_tokens * store['bytes_per_token'] / 1e9:.1f} GB on disk; the schedule's {tokens:.2e} positions "
          f"are {tokens / corpus_tokens:.0f} passes over it.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
