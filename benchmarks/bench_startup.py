"""Start-up cost of the inference doors, two source trees side by side: `litebert predict` (process start to exit,
a few input rows) and `litebert serve` (process start to the first 200 from /ready).

    python benchmarks/bench_startup.py --trees OLD_SRC,NEW_SRC --model runs/sst2-small --repeats 5

Each tree is a `src` folder put first on PYTHONPATH, so one venv runs both. Turns interleave the trees (a noisy
machine slows both alike) and the report gives each tree's median [min-max] and the ratio of medians. The load
average before and after is printed with the host line: these are wall-clock figures on a shared machine. Servers
listen on 127.0.0.1 only, get one GET at a time, and are stopped (SIGTERM, then SIGKILL) after each turn.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env_for(tree: str, threads: int) -> dict:
    return {**os.environ, "PYTHONPATH": tree, "OMP_NUM_THREADS": str(threads)}


def time_predict(tree: str, model: str, task: str, rows: Path, threads: int, timeout: float) -> float:
    cmd = [sys.executable, "-m", "litebert", "predict", task, "--model", model, "--input", str(rows)]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env_for(tree, threads), capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise SystemExit(f"{tree}: predict exited {done.returncode}:\n{done.stderr[-2000:]}")
    return time.perf_counter() - t0


def time_serve(tree: str, model: str, threads: int, timeout: float) -> float:
    port = free_port()
    cmd = [sys.executable, "-m", "litebert", "serve", "--model", model, "--host", "127.0.0.1", "--port", str(port)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env_for(tree, threads), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        while time.perf_counter() - t0 < timeout:
            if proc.poll() is not None:
                raise SystemExit(f"{tree}: serve exited {proc.returncode}:\n{proc.stderr.read().decode()[-2000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=2) as r:
                    if r.status == 200:
                        return time.perf_counter() - t0
            except OSError:
                pass
            time.sleep(0.05)
        raise SystemExit(f"{tree}: serve not ready after {timeout:g} s")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s [{min(values):.2f}-{max(values):.2f}]"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trees", required=True, help="OLD_SRC,NEW_SRC: two source folders (each holding litebert/)")
    p.add_argument("--model", required=True, help="a fine-tuned text-classification model or run directory")
    p.add_argument("--task", default="sst-2")
    p.add_argument("--rows", type=int, default=8, help="input rows given to predict")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--timeout", type=float, default=180, help="seconds before one turn counts as failed")
    args = p.parse_args()
    trees = args.trees.split(",")
    if len(trees) != 2 or not all((Path(t) / "litebert").is_dir() for t in trees):
        raise SystemExit("--trees: two comma-separated src folders, each holding litebert/")
    with tempfile.TemporaryDirectory() as tmp:
        rows = Path(tmp) / "rows.tsv"
        rows.write_text("sentence\n" + "".join(f"a plain sentence number {i} for the model .\n"
                                                for i in range(args.rows)))
        load0 = os.getloadavg()
        times = {(t, door): [] for t in trees for door in ("predict", "serve")}
        for turn in range(args.repeats):
            order = trees if turn % 2 == 0 else trees[::-1]
            for tree in order:
                times[tree, "predict"].append(time_predict(tree, args.model, args.task, rows, args.threads,
                                                           args.timeout))
                times[tree, "serve"].append(time_serve(tree, args.model, args.threads, args.timeout))
        load1 = os.getloadavg()
    from litebert.lab.bench import host_line  # this tree's litebert (the one on sys.path), only for the host line

    print(f"host: {host_line()}")
    print(f"load average {load0[0]:.1f} before, {load1[0]:.1f} after; {args.repeats} interleaved turns, "
          f"{args.threads} thread(s)")
    print(f"| door | {trees[0]} | {trees[1]} | ratio of medians (second / first) |")
    print("|---|---|---|---|")
    for door in ("predict", "serve"):
        a, b = times[trees[0], door], times[trees[1], door]
        print(f"| {door} | {summary(a)} | {summary(b)} | {statistics.median(b) / statistics.median(a):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
