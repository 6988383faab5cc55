"""ONNX int8 dynamic quantization: what it costs in accuracy and what it buys in speed and size, on a dev set.

Exports a fine-tuned text-classification run twice (fp32, and int8 through onnxruntime's quantize_dynamic),
then scores the whole dev split through `litebert.pipeline` on PyTorch fp32 and bf16, ONNX fp32 and ONNX int8. Timing
turns interleave (fp32 torch, bf16 torch, onnx fp32, onnx int8, repeat) with the same thread count; medians are shown.

    python benchmarks/bench_quantize.py --model runs/sst2 --data ../shared/data/glue/SST-2 --threads 1
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import litebert
from litebert.data.tasks import get_task, read_examples
from litebert.export import export_onnx
from litebert.lab.bench import host_line


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="fine-tuned text-classification run or model directory")
    p.add_argument("--task", default="sst-2", help="task whose dev split is scored")
    p.add_argument("--data", required=True, help="the task's folder")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32)
    args = p.parse_args(argv)
    spec = get_task(args.task)
    dev = read_examples(spec, args.data, spec.eval_splits[0])
    inputs = [ex.text_a if ex.text_b is None else (ex.text_a, ex.text_b) for ex in dev]
    gold = [ex.label for ex in dev]
    with tempfile.TemporaryDirectory() as tmp:
        fp32 = export_onnx(args.model, Path(tmp) / "fp32")
        int8 = export_onnx(args.model, Path(tmp) / "int8", quantize="int8")
        sides = {"pytorch fp32": litebert.pipeline(None, args.model, "fp32", threads=args.threads,
                                                   batch_size=args.batch_size),
                 "pytorch bf16": litebert.pipeline(None, args.model, "bf16", threads=args.threads,
                                                   batch_size=args.batch_size),
                 "onnx fp32": litebert.pipeline(None, fp32.path.parent, "onnx", threads=args.threads,
                                                batch_size=args.batch_size),
                 "onnx int8": litebert.pipeline(None, int8.path.parent, "onnx", threads=args.threads,
                                                batch_size=args.batch_size)}
        sizes = {"pytorch fp32": None, "pytorch bf16": None, "onnx fp32": fp32.path.stat().st_size,
                 "onnx int8": int8.path.stat().st_size}
        times: dict[str, list[float]] = {k: [] for k in sides}
        preds: dict[str, list[str]] = {}
        for rep in range(args.repeats):
            for name, pipe in sides.items():
                t0 = time.perf_counter()
                out = pipe(inputs)
                times[name].append(time.perf_counter() - t0)
                preds[name] = [o["label"] for o in out]
                print(f"rep {rep} {name}: {times[name][-1]:.2f} s", file=sys.stderr, flush=True)
    base = preds["pytorch fp32"]
    print(f"host: {host_line()}")
    print(f"{args.task} {spec.eval_splits[0]}: {len(dev)} examples, {args.threads} thread(s), batch {args.batch_size}")
    print("| side | accuracy | agrees with PyTorch fp32 | graph size MB | s per dev pass (median) | speed vs PyTorch |")
    print("|---|---|---|---|---|---|")
    t_base = statistics.median(times["pytorch fp32"])
    for name in sides:
        acc = sum(p == g for p, g in zip(preds[name], gold)) / len(gold)
        agree = sum(p == b for p, b in zip(preds[name], base)) / len(base)
        t = statistics.median(times[name])
        size = f"{sizes[name] / 1e6:.2f}" if sizes[name] else "-"
        print(f"| {name} | {acc:.4f} | {agree:.4f} | {size} | {t:.2f} | {t_base / t:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
