"""Pretraining data pipeline throughput: stage 1 (`data build`) MB/s and stage 2 (examples on the fly) examples/s.

    python benchmarks/bench_data.py                       # Gutenberg (shared data), 30k-clean.model
    python benchmarks/bench_data.py --repeat 4            # the corpus 4 times over: peak memory should not grow

Stage 1 is timed with --workers 1 and 2 and reported as wall-clock MB/s and as MB per CPU-second (main process plus
workers), the per-core figure. The tokenizer alone (encode_ids_batch over the same lines, one thread) is timed in
the same process as the ceiling the pipeline can reach.

The official create_pretraining_data.py is NOT run here. Its figure, ~0.15 MB/s per core, is an ANCHOR taken from
the project's reference notes, not a side-by-side measurement; the "x anchor" column divides our per-core MB/s by it.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from litebert.data.store import build_store
from litebert.lab.shared_data import shared_data_dir
from litebert.tokenizer import AlbertTokenizer

# torch (stage 2) is imported inside functions: tokenizer worker processes import this script's top level.

OFFICIAL_MB_PER_S_PER_CORE = 0.15  # anchor (reference notes), not measured here


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def corpus_files(root: Path, repeat: int, scratch: Path) -> list[Path]:
    files = sorted(root.glob("*.txt"))
    if repeat == 1:
        return files
    linked = []
    for r in range(repeat):  # symlinks: the same text read `repeat` times, as separate files
        for f in files:
            link = scratch / f"r{r}-{f.name}"
            link.symlink_to(f)
            linked.append(link)
    return linked


def bench_tokenizer(tok, files: list[Path]) -> tuple[float, float]:
    """(wall MB/s, MB per CPU-second) of the tokenizer alone: the ceiling for stage 1."""
    lines = [line for f in files for line in f.read_text(encoding="utf-8").split("\n")]
    size = sum(len(line.encode()) + 1 for line in lines) / 1e6
    cpu0, t0 = cpu_seconds(), time.perf_counter()
    tok.encode_ids_batch(lines, num_threads=1)
    return size / (time.perf_counter() - t0), size / (cpu_seconds() - cpu0)


def bench_stage1(files, tok_dir, scratch: Path, workers: int) -> dict:
    cpu0, t0 = cpu_seconds(), time.perf_counter()
    store = build_store(files, tok_dir, scratch / f"store-w{workers}", workers=workers, validation_fraction=0.0)
    wall = time.perf_counter() - t0
    cpu = cpu_seconds() - cpu0 + (store.build_info["worker_cpu_seconds"] if workers > 1 else 0.0)
    mb = store.stats["input"]["bytes"] / 1e6
    return {"store": store, "mb": mb, "wall": wall, "cpu": cpu, "worker_rss": store.build_info["worker_peak_rss_mb"]}


def bench_stage2(store, max_seq_length: int, count: int) -> float:
    from litebert.data import PretrainingDataset

    ds = PretrainingDataset(store, max_seq_length=max_seq_length, max_predictions_per_seq=20 if max_seq_length <= 128
                            else 76, seed=0)
    n = min(count, len(ds))
    collate = ds.collate_fn
    t0 = time.perf_counter()
    for start in range(0, n, 32):
        collate([ds[i] for i in range(start, min(n, start + 32))])
    return n / (time.perf_counter() - t0)


def bench_chunk_index(store, num_sentences: int) -> tuple[int, float]:
    """Seconds to build one epoch's chunk index over num_sentences (the corpus's sentence lengths, tiled)."""
    from litebert.data.pretraining import build_chunk_index, make_rng

    split = store.split()
    reps = -(-num_sentences // split.num_sentences)
    lengths = np.tile(split.sentence_lengths, reps)
    docs = np.concatenate([split.document_offsets[:-1] + r * split.num_sentences for r in range(reps)]
                          + [[len(lengths)]])
    t0 = time.perf_counter()
    index = build_chunk_index(lengths, docs, 125, 0.1, make_rng(0, 1, 0))
    return len(lengths), len(index), time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, default=shared_data_dir() / "gutenberg")
    parser.add_argument("--spm", type=Path, default=shared_data_dir() / "albert-vocab" / "30k-clean.model")
    parser.add_argument("--repeat", type=int, default=1, help="read the corpus this many times over")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--examples", type=int, default=3000)
    args = parser.parse_args()
    if not args.corpus.is_dir() or not args.spm.is_file():
        print(f"needs {args.corpus} and {args.spm} (set LITEBERT_SHARED_DATA)", file=sys.stderr)
        return 1

    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        tok = AlbertTokenizer(args.spm)
        tok.save_pretrained(scratch / "tok")
        files = corpus_files(args.corpus, args.repeat, scratch)
        print(f"command: {' '.join([Path(sys.executable).name] + sys.argv)}")
        print(f"corpus:  {args.corpus} x{args.repeat} ({len(files)} files), tokenizer {args.spm.name}")
        wall_rate, cpu_rate = bench_tokenizer(tok, files[:17])
        print(f"\ntokenizer alone (encode_ids_batch, 1 thread): {wall_rate:.2f} MB/s wall, {cpu_rate:.2f} MB/s/core\n")

        print("stage 1: litebert data build")
        print(f"{'workers':>7} {'MB':>7} {'wall s':>7} {'MB/s':>7} {'CPU s':>7} {'MB/s/core':>10} {'x anchor':>9} "
              f"{'main RSS MB':>12} {'worker RSS MB':>14}")
        results = {}
        for workers in args.workers:
            r = bench_stage1(files, scratch / "tok", scratch, workers)
            results[workers] = r
            per_core = r["mb"] / r["cpu"]
            print(f"{workers:>7} {r['mb']:>7.2f} {r['wall']:>7.2f} {r['mb'] / r['wall']:>7.2f} {r['cpu']:>7.2f} "
                  f"{per_core:>10.2f} {per_core / OFFICIAL_MB_PER_S_PER_CORE:>8.1f}x {peak_rss_mb():>12.0f} "
                  f"{r['worker_rss']:>14.0f}")
        print(f"(x anchor = our MB/s per core / {OFFICIAL_MB_PER_S_PER_CORE} MB/s per core, the official generator's "
              "documented figure: an anchor, not a side-by-side run)")

        import torch

        torch.set_num_threads(1)
        store = results[args.workers[0]]["store"]
        print(f"\nstage 2: PretrainingDataset + collate_pretraining, 1 process, {store.split().num_tokens} tokens")
        for length in (128, 512):
            rate = bench_stage2(store, length, args.examples)
            print(f"  max_seq_length {length:>4}: {rate:8.0f} examples/s  ({rate * length / 1e6:.2f} M tokens/s)")
        sentences, chunks, seconds = bench_chunk_index(store, 1_000_000)
        print(f"  chunk index of one epoch (vectorised): {sentences} sentences -> {chunks} examples in "
              f"{seconds * 1e3:.0f} ms")
        print(f"\npeak RSS of this process: {peak_rss_mb():.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
