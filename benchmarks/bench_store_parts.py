"""Memory of building a token store from many input files, and the cost of a build in parts (`data build --shard`
+ `data merge`), on synthetic text generated here (never committed; deleted at the end unless --keep).

    nice python benchmarks/bench_store_parts.py    # 256 MiB generated in 4 MiB files, listed 8 times over (2 GiB of
                                                   # input files); builds of 16 and 64 MiB
    nice python benchmarks/bench_store_parts.py --gb 0.02 --repeat 2 --build-mb 2,4        # a quick look

Each measurement runs in a fresh process and reports that process's peak resident memory (VmHWM), so the figures
do not mix, and its CPU seconds (wall seconds on a shared machine say more about the neighbours). Three of them:

- read: `count_documents` over the first 1/4, 1/2 and all of the files, without tokenizing (what a part does with
  the files before its range, to number its documents). Flat peak memory across sizes = streaming.
- build: `build_store` (1 worker, in-process, 30k-clean SentencePiece) of the first 16 and 64 MiB of the files.
- parts: the 64 MiB again as 2 parts built one after the other (each reads the files before it) and their merge.

The synthetic text: lines drawn from a pool of 200,000 random sentences of 5-30 words of the Gutenberg vocabulary
(shared data), one per line, a blank line every 5-40 of them; every file is its own random draw. Generating text in
Python is slower than reading it, so the input lists the generated files --repeat times over (symlinks, as
bench_data.py --repeat does): the reader sees that many more files and bytes.
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

SPM = "albert-vocab/30k-clean.model"


def make_corpus(root: Path, gb: float, file_mb: float, seed: int = 0) -> list[Path]:
    """Files of about file_mb MiB up to gb GiB: lines drawn from a pool of 200,000 random sentences (5-30 words of
    the Gutenberg vocabulary), a blank line after every 5-40 of them."""
    from litebert.lab.shared_data import shared_data_dir

    rng = np.random.default_rng(seed)
    words = sorted(set((shared_data_dir() / "gutenberg" / "austen-emma.txt").read_text().split()))
    flat = [words[i] for i in rng.integers(0, len(words), 200_000 * 30)]
    lengths = rng.integers(5, 31, 200_000)
    pool = [" ".join(flat[30 * k : 30 * k + n]) for k, n in enumerate(lengths)]
    mean_line = sum(map(len, pool)) / len(pool) + 1
    per_file = int(file_mb * 2**20 / mean_line)
    files = []
    for i in range(max(1, round(gb * 1024 / file_mb))):
        picks = rng.integers(0, len(pool), per_file)
        ends = np.cumsum(rng.integers(5, 41, per_file // 5))  # a document ends after each of these lines
        ends = np.r_[0, ends[ends < per_file], per_file]
        lines = [line for a, b in zip(ends[:-1], ends[1:]) for line in [pool[j] for j in picks[a:b]] + [""]]
        path = root / f"{i:05d}.txt"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        files.append(path)
    return files


def first_mb(files: list[Path], mb: float) -> list[Path]:
    out, size = [], 0
    for f in files:
        if size >= mb * 2**20:
            break
        out.append(f)
        size += f.stat().st_size
    return out


# ---------------------------------------------------------------------------------------------- child processes


def peak_rss_mb() -> float:
    """This process's peak resident memory since its exec (VmHWM; ru_maxrss would include the parent's, which Linux
    carries over an exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(kind: str, args: dict) -> dict:
    t0 = time.perf_counter()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu0 = usage.ru_utime + usage.ru_stime
    files = [Path(f) for f in args["files"]]
    result: dict = {}
    if kind == "read":
        from litebert.data.merge import count_documents

        result["documents"] = count_documents(files, "error", 0)
    elif kind == "build":
        from litebert.data.store_build import build_store

        store = build_store(files, args["tokenizer"], args["out"], workers=1)
        result["tokens"] = sum(store.split(s).num_tokens for s in ("train", "validation"))
        result["store_bytes"] = sum(p.stat().st_size for p in Path(args["out"]).rglob("*.bin"))
    elif kind == "part":
        from litebert.data.merge import build_part

        build_part(files, args["tokenizer"], args["out"], args["index"], args["count"], workers=1)
    elif kind == "merge":
        from litebert.data.merge import merge_parts

        merge_parts(args["parts"], args["out"])
    usage = resource.getrusage(resource.RUSAGE_SELF)
    result["seconds"] = time.perf_counter() - t0
    result["cpu_seconds"] = usage.ru_utime + usage.ru_stime - cpu0
    result["peak_rss_mb"] = peak_rss_mb()
    result["mb"] = sum(f.stat().st_size for f in files) / 2**20 if kind != "merge" else 0.0
    return result


def run_child(kind: str, **args) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", kind, json.dumps(args, default=str)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gb", type=float, default=0.25, help="synthetic text to generate (GiB)")
    parser.add_argument("--repeat", type=int, default=8,
                        help="the input lists the generated files this many times (as symlinks): GiB read = gb x repeat")
    parser.add_argument("--corpus", type=Path, help="use these generated files instead of generating (a folder)")
    parser.add_argument("--file-mb", type=float, default=4.0, help="size of each input file (MiB)")
    parser.add_argument("--build-mb", default="16,64", help="sizes (MiB) of the tokenizing builds")
    parser.add_argument("--scratch", type=Path, default=None, help="where to write the corpus (default: a temp dir)")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], json.loads(args.child[1]))))
        return 0

    from litebert.lab.bench import host_line
    from litebert.lab.shared_data import shared_data_dir
    from litebert.tokenizer import AlbertTokenizer

    print(f"host: {host_line()}", flush=True)
    scratch = Path(tempfile.mkdtemp(prefix="litebert-bench-parts-", dir=args.scratch))
    try:
        t0 = time.perf_counter()
        if args.corpus:
            unique = sorted(args.corpus.glob("*.txt"))
        else:
            (scratch / "corpus").mkdir()
            unique = make_corpus(scratch / "corpus", args.gb, args.file_mb)
        (scratch / "input").mkdir()
        files = []
        for r in range(args.repeat):  # symlinks: the same text read `repeat` times, as separate files
            for f in unique:
                files.append(scratch / "input" / f"r{r}-{f.name}")
                files[-1].symlink_to(f.resolve())
        print(f"corpus: {len(files)} files, {sum(f.stat().st_size for f in files) / 2**30:.2f} GiB, generated in "
              f"{time.perf_counter() - t0:.0f} s", flush=True)
        tok = scratch / "tokenizer"
        AlbertTokenizer(shared_data_dir() / SPM).save_pretrained(tok)
        rows = [("baseline: python + litebert imports", run_child("read", files=[]))]
        for frac in (4, 2, 1):
            part = files[: max(1, len(files) // frac)]
            rows.append((f"read {len(part)} files, no tokenizing", run_child("read", files=[str(f) for f in part])))
            print(rows[-1], flush=True)
        for mb in (float(x) for x in args.build_mb.split(",")):
            part = first_mb(files, mb)
            rows.append((f"build {len(part)} files (1 worker)", run_child(
                "build", files=[str(f) for f in part], tokenizer=str(tok), out=str(scratch / f"store-{mb:g}"))))
            print(rows[-1], flush=True)
        part = first_mb(files, max(float(x) for x in args.build_mb.split(",")))
        for i in range(2):
            rows.append((f"part {i}/2 of the same {len(part)} files (input: all of them)", run_child(
                "part", files=[str(f) for f in part], tokenizer=str(tok), out=str(scratch / f"p{i}"), index=i,
                count=2)))
            print(rows[-1], flush=True)
        rows.append(("merge the 2 parts", run_child("merge", files=[], parts=[str(scratch / "p0"),
                                                                                 str(scratch / "p1")],
                                                    out=str(scratch / "merged"))))
        print("\n| step | input MiB | wall s | CPU s | MiB per CPU-s | peak RSS MiB | tokens | store bytes/token |")
        print("|---|---|---|---|---|---|---|---|")
        for name, r in rows:
            rate = f"{r['mb'] / r['cpu_seconds']:.2f}" if r["mb"] else ""
            per_token = f"{r['store_bytes'] / r['tokens']:.3f}" if r.get("tokens") else ""
            print(f"| {name} | {r['mb']:.0f} | {r['seconds']:.1f} | {r['cpu_seconds']:.1f} | {rate} | "
                  f"{r['peak_rss_mb']:.0f} | {r.get('tokens', '')} | {per_token} |")
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
