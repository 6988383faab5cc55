"""Batch-encoding throughput: litebert AlbertTokenizer.batch_encode vs transformers' fast ALBERT tokenizer.

Both load the same official 30k-clean.model and encode the same Gutenberg paragraphs (full pipeline: special
tokens, token types, attention mask) in one process, side by side. Prints texts/s, MB/s and our/their ratio.

    python benchmarks/bench_tokenizer.py                      # all paragraphs, best of 3
    python benchmarks/bench_tokenizer.py --limit 5000 --repeats 5 --threads 2 --lines-per-text 1
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from litebert.lab.bench import host_line
from litebert.lab.shared_data import shared_data_dir
from litebert.tokenizer import AlbertTokenizer


def gutenberg_paragraphs(root: Path, lines_per_text: int, limit: int | None) -> list[str]:
    """The NLTK Gutenberg files hold one sentence per line and no blank lines: a "paragraph" here is a run of
    `lines_per_text` consecutive non-blank lines, joined with spaces (about 600 bytes at the default 5)."""
    paragraphs = []
    for path in sorted((root / "gutenberg").glob("*.txt")):
        lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        paragraphs += [" ".join(lines[i:i + lines_per_text]) for i in range(0, len(lines), lines_per_text)]
    return paragraphs[:limit] if limit else paragraphs


def best_time(fn, repeats: int) -> float:
    fn()  # warm-up: caches, thread pools, lazy tables
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None, help="use the first N paragraphs (default: all)")
    parser.add_argument("--lines-per-text", type=int, default=5, help="sentence lines per paragraph")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per tokenizer; the best is reported")
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="threads for both tokenizers")
    args = parser.parse_args(argv)

    root = shared_data_dir()
    model = root / "albert-vocab" / "30k-clean.model"
    if not model.exists():
        print(f"shared data not found at {root} (set LITEBERT_SHARED_DATA)", file=sys.stderr)
        return 1
    # The Rust tokenizer reads its thread count from the environment, before it is first used.
    os.environ["RAYON_NUM_THREADS"] = str(args.threads)
    os.environ["TOKENIZERS_PARALLELISM"] = "true"
    from transformers import AutoTokenizer

    texts = gutenberg_paragraphs(root, args.lines_per_text, args.limit)
    megabytes = sum(len(t.encode()) for t in texts) / 1e6
    ours = AlbertTokenizer(model)
    with tempfile.TemporaryDirectory() as tmp:
        theirs = AutoTokenizer.from_pretrained(ours.save_pretrained(tmp))  # the fast (Rust) ALBERT tokenizer

    rows = {
        "litebert batch_encode": best_time(lambda: ours.batch_encode(texts, num_threads=args.threads), args.repeats),
        f"transformers {type(theirs).__name__} (fast)": best_time(
            lambda: theirs(texts, return_token_type_ids=True, return_attention_mask=True), args.repeats),
    }
    print(f"host: {host_line()}")
    print(f"{len(texts)} Gutenberg paragraphs, {megabytes:.2f} MB, {args.threads} threads, best of {args.repeats}")
    print(f"{'tokenizer':<46} {'seconds':>8} {'texts/s':>10} {'MB/s':>7}")
    for name, secs in rows.items():
        print(f"{name:<46} {secs:8.3f} {len(texts) / secs:10.0f} {megabytes / secs:7.2f}")
    ours_s, theirs_s = rows.values()
    print(f"ratio (litebert speed / transformers speed): {theirs_s / ours_s:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
