"""Pretraining data pipeline throughput: stage 1 (`data build`) MB/s and stage 2 (examples on the fly) examples/s,
and raw text to masked SOP examples side by side with the official create_pretraining_data.py.

    python benchmarks/bench_data.py                       # Gutenberg (shared data), 30k-clean.model
    python benchmarks/bench_data.py --repeat 4            # the corpus 4 times over: peak memory should not grow
    python benchmarks/bench_data.py --official --official-repo ALBERT   # + the side-by-side run, in its own venv
    python benchmarks/bench_data.py --official ALBERT --official-python TF_PYTHON   # the same, a Python you made

Stage 1 is timed with --workers 1 and 2 and reported as wall-clock MB/s and as MB per CPU-second (main process plus
workers), the per-core figure. The tokenizer alone (encode_ids_batch over the same lines, one thread) is timed in
the same process as the ceiling the pipeline can reach. Stage 2 builds micro-batches the way the DataLoader does
(the dataset's __getitems__, then collate).

Side by side (--official: a checkout of google-research/albert, --official-repo or the argument of --official; run
by --official-python, or by default by the Python of a venv of its own, --official-venv, made on first use with
`OFFICIAL_PACKAGES` from PyPI, about 1.5 GB; the albert repository itself is no pip package, so it comes as a
checkout: `git clone https://github.com/google-research/albert`, the script is read as shipped): CPU seconds per MB of text from raw text to masked SOP examples at
max_seq_length 128, max_predictions_per_seq 20, dupe_factor 1 (one epoch), on two texts: long documents (the first
--long-mb MB of the Gutenberg books, one book = one document) and short documents (the first --short-mb MB of the
SST-2 training sentences, one sentence = one document). Official: the script as shipped (its TFRecord writing and
logging included), minus the CPU seconds of the same command on a one-document input (Python and TensorFlow start-up).
litebert: `build_store` (1 process) plus one epoch of examples, collated, minus the same on the one-document input
(the "raw" column keeps it in). Without --official the "x anchor" column
divides by ~0.15 MB/s per core, a figure from the project's reference notes, not a side-by-side measurement.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from litebert.data.store_build import build_store
from litebert.lab.bench import host_line
from litebert.lab.shared_data import shared_data_dir
from litebert.tokenizer import AlbertTokenizer

# torch (stage 2) is imported inside functions: tokenizer worker processes import this script's top level.

OFFICIAL_MB_PER_S_PER_CORE = 0.15  # anchor (reference notes), not measured here
# What the official generator imports (create_pretraining_data.py, tokenization.py): TF 2's tf.compat.v1 runs it.
OFFICIAL_PACKAGES = ("tensorflow-cpu>=2.15", "tensorflow_hub", "sentencepiece", "six", "numpy")
OFFICIAL_DIR = Path(__file__).resolve().parents[1] / ".official"  # (git-ignored) the default venv's home


def official_python(venv: Path) -> str:
    """The Python of `venv`, made with OFFICIAL_PACKAGES when it is not there yet (once; minutes)."""
    python = venv / "bin" / "python"
    if not (venv / ".installed").is_file():
        print(f"making the official generator's venv in {venv} ({', '.join(OFFICIAL_PACKAGES)})", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *OFFICIAL_PACKAGES], check=True)
        (venv / ".installed").write_text("\n".join(OFFICIAL_PACKAGES) + "\n")
    return str(python)


def official_checkout(path: Path) -> Path:
    """`path` if it holds the official generator; else a SystemExit that says how to get it."""
    if not (path / "create_pretraining_data.py").is_file() or not (path / "tokenization.py").is_file():
        raise SystemExit(f"--official-repo {path}: no create_pretraining_data.py and tokenization.py there; clone "
                         "https://github.com/google-research/albert and pass its directory")
    return path


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


def fetch(ds, indices: range):
    """One batch the way a DataLoader fetches it: __getitems__ when the dataset has it (older litebert: one
    __getitem__ per index, so this script can time the code before the batched path, too)."""
    getitems = getattr(ds, "__getitems__", None)
    return getitems(list(indices)) if getitems else [ds[i] for i in indices]


def bench_stage2(store, max_seq_length: int, count: int) -> float:
    from litebert.data import PretrainingDataset

    ds = PretrainingDataset(store, max_seq_length=max_seq_length, max_predictions_per_seq=20 if max_seq_length <= 128
                            else 76, seed=0)
    n = min(count, len(ds))
    collate = ds.collate_fn
    ds.chunk_index()  # the epoch's index is built once per epoch, not per batch
    cpu0 = cpu_seconds()
    for start in range(0, n, 32):
        collate(fetch(ds, range(start, min(n, start + 32))))
    return n / (cpu_seconds() - cpu0)


def head_of(src: Path, size_mb: float, out: Path, transform=None) -> Path:
    """The first size_mb MB of src's lines (after transform, line -> line or None) into out, whole lines."""
    kept, size = [], 0
    for line in src.read_text(encoding="utf-8").split("\n"):
        line = transform(line) if transform else line
        if line is None:
            continue
        kept.append(line)
        size += len(line.encode()) + 1
        if size >= size_mb * 1e6:
            break
    out.write_text("\n".join(kept) + "\n", encoding="utf-8")
    return out


def side_by_side_texts(corpus: Path, long_mb: float, short_mb: float, scratch: Path) -> dict[str, Path]:
    """Long documents: Gutenberg books, one book = one document. Short: SST-2 sentences, one per document."""
    books = sorted(corpus.glob("*.txt"))
    with open(scratch / "long.txt", "w", encoding="utf-8") as f:
        size = 0
        for book in books:  # whole books, each followed by a blank line (the official document break)
            text = book.read_text(encoding="utf-8").strip("\n") + "\n\n"
            f.write(text)
            size += len(text.encode())
            if size >= long_mb * 1e6:
                break
    sst2 = shared_data_dir() / "glue" / "SST-2" / "train.tsv"
    short = head_of(sst2, short_mb, scratch / "short.txt",
                    lambda line: None if line.startswith("sentence\t") or not line.strip()
                    else line.split("\t")[0].strip() + "\n")  # a sentence, then a blank line
    return {"long documents": scratch / "long.txt", "short documents": short}


def official_cpu(python: str, albert: Path, spm: Path, text: Path, scratch: Path, max_seq_length: int) -> float:
    """CPU seconds of the official create_pretraining_data.py on `text` (dupe_factor 1), in a child process."""
    pkg = scratch / "official-pkg"
    if not (pkg / "albert").exists():
        pkg.mkdir(exist_ok=True)
        (pkg / "albert").symlink_to(albert.resolve())  # the script imports itself as the package `albert`
    cmd = [python, "-m", "albert.create_pretraining_data", f"--input_file={text}",
           f"--output_file={scratch / 'official.tfrecord'}", f"--vocab_file={spm.with_suffix('.vocab')}",
           f"--spm_model_file={spm}", f"--max_seq_length={max_seq_length}", "--max_predictions_per_seq=20",
           "--dupe_factor=1", "--masked_lm_prob=0.15", "--short_seq_prob=0.1", "--do_lower_case"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(cmd, cwd=pkg, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"the official generator failed:\n{proc.stderr[-2000:]}")
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def litebert_cpu(text: Path, tok_dir: Path, scratch: Path, max_seq_length: int) -> tuple[float, int, float]:
    """CPU seconds of litebert from raw text to one epoch of collated examples, the number of examples, and the
    CPU seconds of the first part, `data build` (tokenizer loading and tokenizing included)."""
    from litebert.data import PretrainingDataset

    cpu0 = cpu_seconds()
    store = build_store(text, tok_dir, scratch / f"store-{text.stem}", workers=1, validation_fraction=0.0,
                        overwrite=True)
    built = cpu_seconds()
    ds = PretrainingDataset(store, max_seq_length=max_seq_length, max_predictions_per_seq=20, seed=0)
    collate = ds.collate_fn
    for start in range(0, len(ds), 32):
        collate(fetch(ds, range(start, min(len(ds), start + 32))))
    return cpu_seconds() - cpu0, len(ds), built - cpu0


def bench_side_by_side(args, tok_dir: Path, scratch: Path) -> None:
    import torch

    torch.set_num_threads(1)
    texts = side_by_side_texts(args.corpus, args.long_mb, args.short_mb, scratch)
    version = subprocess.run([args.official_python, "-c", "import tensorflow as tf; print(tf.__version__)"],
                             capture_output=True, text=True).stdout.strip() or "?"
    print(f"\nofficial: {args.official}/create_pretraining_data.py under TensorFlow {version} ({args.official_python})")
    one_doc = head_of(texts["short documents"], 0, scratch / "one.txt")
    startup = official_cpu(args.official_python, args.official, args.spm, one_doc, scratch, 128)
    # The same rule for our side: the cost of the same work on the one-document input (tokenizer loading, the
    # vocabulary's word-start table, the store's files), best of 3, in this process (imports already paid, so
    # this subtracts less than a fresh process would).
    ours_startup = min(litebert_cpu(one_doc, tok_dir, scratch, 128)[0] for _ in range(3))
    print(f"\nraw text to masked SOP examples, max_seq_length 128, one epoch (dupe_factor 1), CPU seconds per MB; "
          f"each side's start-up (the same command on a one-document input: official {startup:.1f} CPU s, litebert "
          f"{ours_startup:.2f}) subtracted; 'raw' keeps litebert's in")
    print(f"{'text':>16} {'MB':>6} {'official s/MB':>14} {'litebert s/MB':>14} {'(build s':>9} {'examples s)':>12} "
          f"{'examples':>9} {'µs/example':>11} {'litebert faster':>16} {'raw':>6}")
    for name, text in texts.items():
        mb = text.stat().st_size / 1e6
        official = (official_cpu(args.official_python, args.official, args.spm, text, scratch, 128) - startup) / mb
        ours, examples, build = litebert_cpu(text, tok_dir, scratch, 128)
        net = (ours - ours_startup) / mb
        print(f"{name:>16} {mb:>6.2f} {official:>14.2f} {net:>14.3f} {build:>9.3f} {ours - build:>12.3f} "
              f"{examples:>9} {ours / examples * 1e6:>11.1f} {official / net:>15.1f}x {official / (ours / mb):>5.1f}x")


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


def bench_data_wait(store_path: Path, scratch: Path, workers: list[int], steps: int, threads: int,
                    micro_batch_size: int) -> None:
    """Share of each albert-tiny pretraining step spent waiting for its batch, through pretrain's own set-up
    (litebert.pretrain_setup.setup: the run's BatchStream and DataLoader settings, collate padding to 128) and
    train_step, at each --workers value. The first 3 steps (worker start-up, first-call costs) are not counted.
    Wall clock, and this process's CPU time (with --threads 1 and workers 0 that is the step's own work, which
    other tenants of the machine barely disturb)."""
    from litebert.pretrain import PretrainConfig, train_step
    from litebert.pretrain_setup import setup

    print(f"\ndata wait: albert-tiny, seq 128, micro-batch {micro_batch_size}, {threads} thread(s), {steps} steps "
          "timed")
    print(f"{'workers':>7} {'data ms/step':>13} {'step ms':>8} {'waiting':>8} {'data CPU ms':>12} {'step CPU ms':>12} "
          f"{'data share of CPU':>18}")
    for w in workers:
        cfg = PretrainConfig(model="albert-tiny", data=str(store_path), out=str(scratch / f"wait-run-{w}"),
                             steps=steps + 3, batch_size=micro_batch_size, micro_batch_size=micro_batch_size,
                             threads=threads, num_workers=w, resume="none", health=False)
        run = setup(cfg)
        wall, cpu = np.zeros(2), np.zeros(2)  # [data, step]
        for step in range(steps + 3):
            t0, c0 = time.perf_counter(), time.process_time()
            batches = [run.stream.next(step) for _ in range(run.accum)]
            t1, c1 = time.perf_counter(), time.process_time()
            train_step(run, batches)
            if step >= 3:
                wall += (t1 - t0, time.perf_counter() - t1)
                cpu += (c1 - c0, time.process_time() - c1)
        print(f"{w:>7} {wall[0] / steps * 1e3:>13.1f} {wall[1] / steps * 1e3:>8.1f} {wall[0] / wall.sum():>8.1%} "
              f"{cpu[0] / steps * 1e3:>12.1f} {cpu[1] / steps * 1e3:>12.1f} {cpu[0] / cpu.sum():>18.1%}")


def bench_stages(args, tok, files: list[Path], scratch: Path) -> None:
    """Stage 1 (data build at each --workers) and stage 2 (examples) alone."""
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, default=shared_data_dir() / "gutenberg")
    parser.add_argument("--spm", type=Path, default=shared_data_dir() / "albert-vocab" / "30k-clean.model")
    parser.add_argument("--repeat", type=int, default=1, help="read the corpus this many times over")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--examples", type=int, default=3000)
    parser.add_argument("--official", type=Path, nargs="?", const=True, default=None,
                        help="also run google-research/albert's create_pretraining_data.py side by side (optional "
                        "argument: its checkout, as --official-repo)")
    parser.add_argument("--official-repo", type=Path, default=OFFICIAL_DIR / "albert",
                        help="a google-research/albert checkout for --official")
    parser.add_argument("--official-venv", type=Path, default=OFFICIAL_DIR / "venv",
                        help="the venv that runs it, made on first use (tensorflow-cpu, tensorflow_hub, sentencepiece)")
    parser.add_argument("--official-python", default=None,
                        help="a Python with tensorflow, tensorflow_hub and sentencepiece instead of --official-venv")
    parser.add_argument("--long-mb", type=float, default=2.0, help="MB of long-document text for the side by side")
    parser.add_argument("--short-mb", type=float, default=1.0, help="MB of short-document text for the side by side")
    parser.add_argument("--skip-stages", action="store_true", help="skip stages 1 and 2 alone")
    parser.add_argument("--wait", action="store_true", help="also time how long albert-tiny steps wait for data")
    parser.add_argument("--wait-workers", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--wait-steps", type=int, default=30)
    parser.add_argument("--wait-store", type=Path, default=None, help="a token store for --wait (default: built "
                        "from --corpus, documents of 100 sentences)")
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="torch threads for --wait")
    parser.add_argument("--micro-batch-size", type=int, default=32, help="for --wait (pretrain's default)")
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
        print(f"host:    {host_line()}")
        if not args.skip_stages:
            bench_stages(args, tok, files, scratch)
        if args.official:
            args.official = official_checkout(args.official_repo if args.official is True else args.official)
            args.official_python = args.official_python or official_python(args.official_venv)
            bench_side_by_side(args, scratch / "tok", scratch)
        if args.wait:
            store = args.wait_store or build_store(files, scratch / "tok", scratch / "wait-store", workers=1,
                                                   validation_fraction=0.0, max_doc_sentences=100).path
            bench_data_wait(store, scratch, args.wait_workers, args.wait_steps, args.threads, args.micro_batch_size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
