"""Serving under load: `litebert serve` with dynamic batching on and off, beside a plain transformers
text-classification pipeline behind the same server loop (litebert.serving's app and batcher), on loopback.

Every server is a separate process with the same thread count; they start together and stay up. Load is
bounded: at each concurrency level C, C clients send one SST-2 dev sentence per request, back to back, until
`--requests` answers have come. Turns interleave (for each repeat: each level: each server), so a noisy
neighbour hits every side alike; the table shows medians over repeats and the ratio to the transformers side
with the same batching setting.

    python benchmarks/bench_serve.py --model runs/sst2 --levels 1,4,16 --requests 200 --repeats 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


class HFPipeline:
    """transformers' pipeline("text-classification") shaped like a litebert pipeline for the server loop."""

    task = "text-classification"

    def __init__(self, model_dir: str, threads: int):
        import torch
        import transformers

        from litebert.records import best_dir

        torch.set_num_threads(threads)
        self.pipe = transformers.pipeline("text-classification", model=str(best_dir(model_dir)), device=-1)

    def __call__(self, items, **params):
        single = not isinstance(items, list)
        out = self.pipe(items if not single else [items], batch_size=32, truncation=True, max_length=128)
        results = [{"label": o["label"], "score": float(o["score"])} for o in out]
        return results[0] if single else results

    def embeddings(self):
        from litebert.errors import ConfigError

        raise ConfigError("no embeddings")


def serve_hf(args) -> None:
    """The server side of the transformers rows: our app and batcher, their pipeline."""
    import uvicorn

    from litebert.serving import ServeConfig, create_app

    cfg = ServeConfig(model=args.model, port=args.port, batching=args.batching, threads=args.threads,
                      max_wait_ms=args.max_wait_ms)
    uvicorn.run(create_app(cfg, pipe=HFPipeline(args.model, args.threads)), host="127.0.0.1", port=args.port,
                log_level="warning")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(name: str, args, batching: bool) -> dict:
    port = free_port()
    flags = ["--threads", str(args.threads), "--max-wait-ms", str(args.max_wait_ms)]
    if name.startswith("litebert"):
        cmd = [sys.executable, "-m", "litebert", "serve", "--model", args.model, "--port", str(port), *flags,
               "--batching" if batching else "--no-batching"]
    else:
        cmd = [sys.executable, __file__, "--serve-hf", "--model", args.model, "--port", str(port), *flags,
               *(["--batching"] if batching else [])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    return {"name": name, "url": f"http://127.0.0.1:{port}", "proc": proc}


def wait_ready(servers, timeout=300) -> None:
    import httpx

    deadline = time.time() + timeout
    for s in servers:
        while True:
            if s["proc"].poll() is not None:
                raise SystemExit(f"{s['name']} died: {s['proc'].stderr.read().decode()[-2000:]}")
            try:
                if httpx.get(s["url"] + "/ready", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.time() > deadline:
                raise SystemExit(f"{s['name']} not ready in {timeout} s")
            time.sleep(0.3)


async def load(url: str, texts: list[str], clients: int, requests: int) -> dict:
    """`clients` loops sending one text per request until `requests` answers; latency per request."""
    import httpx

    latencies, next_index, errors = [], iter(range(requests)), 0
    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=clients)) as client:
        async def worker():
            nonlocal errors
            for i in next_index:
                t0 = time.perf_counter()
                try:
                    r = await client.post(url + "/predict", json={"inputs": [{"text": texts[i % len(texts)]}]})
                    errors += r.status_code != 200
                except httpx.TransportError:  # counted, not retried: a dropped connection is a failed request
                    errors += 1
                latencies.append(time.perf_counter() - t0)

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        wall = time.perf_counter() - t0
    q = statistics.quantiles(latencies, n=100, method="inclusive")
    return {"p50": q[49] * 1e3, "p95": q[94] * 1e3, "p99": q[98] * 1e3, "rps": requests / wall, "errors": errors}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", required=True, help="a fine-tuned text-classification run or model directory")
    p.add_argument("--data", default=str(REPO.parent / "shared" / "data" / "glue" / "SST-2" / "dev.tsv"))
    p.add_argument("--levels", default="1,4,16", help="client concurrency levels")
    p.add_argument("--requests", type=int, default=200, help="requests per (server, level, repeat)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1, help="intra-op threads of every server")
    p.add_argument("--max-wait-ms", type=float, default=5.0)
    p.add_argument("--json", help="also write the results here")
    p.add_argument("--serve-hf", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, help=argparse.SUPPRESS)
    p.add_argument("--batching", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.serve_hf:
        serve_hf(args)
        return 0
    texts = [line.split("\t")[0] for line in Path(args.data).read_text().splitlines()[1:] if line.strip()]
    levels = [int(x) for x in args.levels.split(",")]
    names = [("litebert, batching", True), ("transformers, batching", True), ("litebert, no batching", False),
             ("transformers, no batching", False)]
    servers = [start(n, args, b) for n, b in names]
    try:
        wait_ready(servers)
        runs: dict = {}
        for rep in range(args.repeats):
            for level in levels:
                for s in servers:
                    r = asyncio.run(load(s["url"], texts, level, args.requests))
                    runs.setdefault((s["name"], level), []).append(r)
                    print(f"rep {rep} c={level:>3} {s['name']:<26} p50 {r['p50']:7.1f} ms  p99 {r['p99']:7.1f} ms  "
                          f"{r['rps']:7.1f} req/s  errors {r['errors']}", file=sys.stderr, flush=True)
    finally:
        for s in servers:
            s["proc"].terminate()
            s["proc"].wait(30)
    med = {k: {m: statistics.median(r[m] for r in v) for m in ("p50", "p95", "p99", "rps")} | {
        "errors": sum(r["errors"] for r in v)} for k, v in runs.items()}
    lines = ["| clients | server | p50 ms | p95 ms | p99 ms | req/s | req/s vs transformers | errors |",
             "|---|---|---|---|---|---|---|---|"]
    for level in levels:
        for name, batching in names:
            m = med[(name, level)]
            ref = med[(("transformers, batching" if batching else "transformers, no batching"), level)]
            lines.append(f"| {level} | {name} | {m['p50']:.1f} | {m['p95']:.1f} | {m['p99']:.1f} | {m['rps']:.1f} | "
                         f"{m['rps'] / ref['rps']:.2f}x | {m['errors']} |")
    table = "\n".join(lines)
    print(table)
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "median": {f"{k[0]} @ {k[1]}": v for k, v in
                                                                             med.items()}}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
