"""Pretraining data pipeline cost against corpus size: time and peak memory of `data build` and of making examples.

    python benchmarks/bench_data_scaling.py --out DIR                          # 10 MB .. 1 GB of text (slow)
    python benchmarks/bench_data_scaling.py --out DIR --sizes-mb 10,30,100     # a quicker chart
    python benchmarks/bench_data_scaling.py --out DIR --quick                  # 10 and 30 MB: minutes
    python benchmarks/bench_data_scaling.py --out DIR --scratch /big/tmp       # where the text and stores go

The text is the Gutenberg books of the shared data, cut into documents of 100 sentences and repeated, each copy in
its own random document order, until the wanted size (so no two neighbouring documents repeat). For every size, in
fresh processes (so each peak RSS is that stage's own):

* build: `build_store` (`litebert data build`) with --workers processes: wall seconds, CPU seconds (all processes)
  and the peak RSS of the main process and of the largest worker;
* examples: PretrainingDataset at max_seq_length 128 through the DataLoader settings `pretrain` uses (in-process,
  pad to 128): seconds to set up epoch 0 (chunk index, sampler order: the part that grows with the corpus), CPU
  microseconds per example over --batches micro-batches, the process's peak RSS, and its resident memory split
  into anonymous (the process's own: the larger of after set-up and at the end) and file-backed (pages of the
  memory-mapped store and epoch index it touched: page cache, which the kernel can drop).

Writes DIR/data_scaling.json, DIR/data_scaling.md (a table) and DIR/data_scaling.png (the chart). The scratch
folder (default: a temporary folder) is emptied after each size.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from litebert.lab.bench import host_line
from litebert.lab.shared_data import shared_data_dir

DOC_SENTENCES = 100


def write_corpus(books: Path, size_mb: float, out: Path, seed: int = 0) -> int:
    """Write about size_mb MB of text (documents of DOC_SENTENCES lines, blank line between) to out; its bytes."""
    docs = []
    for book in sorted(books.glob("*.txt")):
        lines = [line for line in book.read_text(encoding="utf-8").split("\n") if line.strip()]
        docs += ["\n".join(lines[i : i + DOC_SENTENCES]) + "\n\n" for i in range(0, len(lines), DOC_SENTENCES)]
    blobs = [d.encode("utf-8") for d in docs]
    target, written, rng = int(size_mb * 1e6), 0, np.random.default_rng(seed)
    with open(out, "wb") as f:
        while written < target:
            for i in rng.permutation(len(blobs)).tolist():
                f.write(blobs[i])
                written += len(blobs[i])
                if written >= target:
                    break
    return written


def cpu_seconds(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rss_parts_mb() -> tuple[float, float]:
    """(anonymous, file-backed) resident MB now: the process's own memory, and the pages of memory-mapped files
    (the store's shards, the epoch's index) that it has touched, which the kernel can drop at any time."""
    fields = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            fields[key] = value
    anon, file_backed = (float(fields.get(key, "0 kB").split()[0]) / 1024 for key in ("RssAnon", "RssFile"))
    return anon, file_backed


def stage_build(text: Path, spm: Path, store: Path, workers: int) -> dict:
    from litebert.data.store_build import build_store
    from litebert.tokenizer import AlbertTokenizer

    tok_dir = store.parent / "tok"
    AlbertTokenizer(spm).save_pretrained(tok_dir)
    cpu0, t0 = cpu_seconds(resource.RUSAGE_SELF), time.perf_counter()
    built = build_store(text, tok_dir, store, workers=workers, validation_fraction=0.0)
    wall = time.perf_counter() - t0
    cpu = cpu_seconds(resource.RUSAGE_SELF) - cpu0 + (built.build_info["worker_cpu_seconds"] if workers > 1 else 0)
    split = built.split("train")
    return {"build_wall_s": wall, "build_cpu_s": cpu, "build_peak_rss_mb": peak_rss_mb(),
            "build_worker_peak_rss_mb": built.build_info.get("worker_peak_rss_mb", 0.0),
            "tokens": split.num_tokens, "sentences": split.num_sentences, "documents": split.num_documents}


def stage_examples(store: Path, batches: int, micro_batch: int) -> dict:
    import torch

    from litebert.data.pretraining import PretrainingDataset, ResumableSampler, collate_pretraining

    torch.set_num_threads(1)
    t0 = time.perf_counter()
    ds = PretrainingDataset(store, max_seq_length=128, max_predictions_per_seq=20, seed=0)
    sampler = ResumableSampler(len(ds), seed=0, shuffle=True, drop_last=True)  # as pretrain's BatchStream
    order = sampler.indices()
    setup = time.perf_counter() - t0
    anon_setup, _ = rss_parts_mb()
    loader = torch.utils.data.DataLoader(ds, batch_size=micro_batch, sampler=order[: batches * micro_batch].tolist(),
                                         drop_last=True, num_workers=0,
                                         collate_fn=lambda b: collate_pretraining(b, pad_to=128, pad_id=ds.pad_id))
    cpu0 = cpu_seconds(resource.RUSAGE_SELF)
    done = sum(len(b["sop_labels"]) for b in loader)
    cpu = cpu_seconds(resource.RUSAGE_SELF) - cpu0
    anon, file_backed = rss_parts_mb()
    return {"epoch_examples": len(ds), "setup_s": setup, "us_per_example": cpu / max(done, 1) * 1e6,
            "examples_peak_rss_mb": peak_rss_mb(), "examples_anon_mb": max(anon, anon_setup),
            "examples_file_mb": file_backed}


def run_stage(args: list[str]) -> dict:
    """This script in a fresh process for one stage; its JSON answer."""
    proc = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"stage {args[:2]} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def chart(rows: list[dict], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mb = [r["text_mb"] for r in rows]
    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(11, 4.2))
    ax_t.plot(mb, [r["build_cpu_s"] for r in rows], "o-", label="data build: CPU s (all processes)")
    ax_t.plot(mb, [r["build_wall_s"] for r in rows], "o--", label="data build: wall s")
    ax_t.plot(mb, [r["setup_s"] for r in rows], "s-", label="examples: epoch set-up s (index, order)")
    ax_t.plot(mb, [r["us_per_example"] for r in rows], "^-", label="examples: CPU µs per example")
    ax_t.set(xscale="log", yscale="log", xlabel="text MB", title="time")
    ax_m.plot(mb, [r["build_peak_rss_mb"] for r in rows], "o-", label="data build: main process")
    ax_m.plot(mb, [r["build_worker_peak_rss_mb"] for r in rows], "o--", label="data build: largest worker")
    ax_m.plot(mb, [r["examples_peak_rss_mb"] for r in rows], "s-", label="examples (DataLoader, seq 128): peak RSS")
    if all("examples_anon_mb" in r for r in rows):
        ax_m.plot(mb, [r["examples_anon_mb"] for r in rows], "s--", label="examples: anonymous (not file pages)")
    ax_m.set(xscale="log", xlabel="text MB", ylabel="peak RSS MB", title="peak memory", ylim=(0, None))
    for ax in (ax_t, ax_m):
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("litebert pretraining data pipeline against corpus size")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def table(rows: list[dict]) -> str:
    head = ["text MB", "tokens", "build CPU s", "build wall s", "build MB per CPU s", "build RSS MB (main / worker)",
            "epoch set-up s", "µs per example (CPU)", "examples peak RSS MB", "examples anon / file MB"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        lines.append(f"| {r['text_mb']:,.0f} | {r['tokens']:,} | {r['build_cpu_s']:,.1f} | {r['build_wall_s']:,.1f} | "
                     f"{r['text_mb'] / r['build_cpu_s']:.2f} | {r['build_peak_rss_mb']:,.0f} / "
                     f"{r['build_worker_peak_rss_mb']:,.0f} | {r['setup_s']:.2f} | {r['us_per_example']:.1f} | "
                     f"{r['examples_peak_rss_mb']:,.0f} | {r.get('examples_anon_mb', float('nan')):,.0f} / "
                     f"{r.get('examples_file_mb', float('nan')):,.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="folder for data_scaling.{json,md,png}")
    p.add_argument("--sizes-mb", default="10,30,100,300,1000", help="comma-separated text sizes in MB")
    p.add_argument("--quick", action="store_true", help="only 10 and 30 MB, 30 micro-batches each")
    p.add_argument("--workers", type=int, default=2, help="data build processes")
    p.add_argument("--batches", type=int, default=100, help="micro-batches of examples timed per size")
    p.add_argument("--micro-batch-size", type=int, default=32)
    p.add_argument("--scratch", type=Path, default=None, help="where text and stores go (default: a temp folder)")
    p.add_argument("--corpus", type=Path, default=shared_data_dir() / "gutenberg")
    p.add_argument("--spm", type=Path, default=shared_data_dir() / "albert-vocab" / "30k-clean.model")
    p.add_argument("--stage", choices=("build", "examples"), help=argparse.SUPPRESS)  # internal: one stage
    p.add_argument("--path", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:
        args.sizes_mb, args.batches = "10,30", min(args.batches, 30)

    if args.stage == "build":
        print(json.dumps(stage_build(args.path / "corpus.txt", args.spm, args.path / "store", args.workers)))
        return 0
    if args.stage == "examples":
        print(json.dumps(stage_examples(args.path / "store", args.batches, args.micro_batch_size)))
        return 0
    if not args.corpus.is_dir() or not args.spm.is_file():
        print(f"needs {args.corpus} and {args.spm} (set LITEBERT_SHARED_DATA)", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory(dir=args.scratch) as tmp:
        work = Path(tmp)
        for size in [float(s) for s in args.sizes_mb.split(",")]:
            text_bytes = write_corpus(args.corpus, size, work / "corpus.txt")
            common = ["--path", str(work), "--spm", str(args.spm), "--workers", str(args.workers),
                      "--batches", str(args.batches), "--micro-batch-size", str(args.micro_batch_size), "--out", tmp]
            row = {"text_mb": text_bytes / 1e6, **run_stage(["--stage", "build", *common]),
                   **run_stage(["--stage", "examples", *common])}
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
            for leftover in work.iterdir():  # disk: one size at a time
                shutil.rmtree(leftover) if leftover.is_dir() else leftover.unlink()
            (args.out / "data_scaling.json").write_text(json.dumps(
                {"command": "python benchmarks/bench_data_scaling.py " + " ".join(sys.argv[1:]), "rows": rows},
                indent=2) + "\n")
    (args.out / "data_scaling.md").write_text(
        table(rows) + f"\n\nText: the Gutenberg books in documents of {DOC_SENTENCES} sentences, repeated in random "
        f"document order; data build with {args.workers} worker process(es); examples at max_seq_length 128, "
        f"{args.batches} micro-batches of {args.micro_batch_size}, 1 thread.\n")
    chart(rows, args.out / "data_scaling.png")
    print(table(rows))
    print(f"host: {host_line()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
