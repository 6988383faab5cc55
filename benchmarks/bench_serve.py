"""Serving under load: `litebert serve` beside LitServe serving transformers' text-classification pipeline with
LitServe's own batching, both on loopback, one SST-2 dev sentence per request.

Sides (--sides; each a separate server process, started once, all up for the whole run):
    litebert          `litebert serve` at its defaults (dynamic batching, max batch 32, max wait 5 ms, backend auto:
                      bf16 where the host's start-up probe measures it faster than fp32, else fp32; lanes auto: on a
                      CPU of several cores, a model call per core at once, one torch thread each; --threads does
                      not apply to it)
    litserve          LitServe (`pip install litebert[bench]`) around transformers.pipeline("text-classification") of
                      the same directory; LitServe's batching with the same max batch and window (its default is
                      no batching: max_batch_size 1); its own process layout (an HTTP process and an inference
                      worker process)
    litebert-fp32     `litebert serve --backend fp32`
    litebert-bf16     `litebert serve --backend bf16` (the weights in bf16)
    litebert-nobatch  `litebert serve --no-batching` (one model call per request)
    litebert-2w       `litebert serve --workers 2` (two server processes, each with its model and batcher)
    litebert-1lane    `litebert serve --lanes 1` (one model call at a time, of --threads threads: the old default)
    transformers-loop transformers' pipeline behind litebert's own server loop and batcher
Every model side but "litebert" runs torch with --threads threads. Load is bounded: at each concurrency level C, C clients send one
sentence per request (a minimal keep-alive HTTP/1.1 client, so the client's own cost stays small and the same for
every side) until --requests answers have come or --seconds have passed. Turns interleave (for each repeat: each
level: each side, the sides' order rotating), every side gets the same sentences in a turn, and each ratio is
litebert's figure over the reference side's in the same turn: median [min-max] over the repeats.

    python benchmarks/bench_serve.py --model runs/sst2-small --levels 1,8,32 --requests 400 --repeats 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

SIDES = ("litebert", "litserve", "litebert-fp32", "litebert-bf16", "litebert-nobatch", "litebert-2w", "litebert-1lane",
         "transformers-loop")
MAX_BATCH, MAX_WAIT_MS = 32, 5.0  # litebert serve's defaults, given to LitServe too


def hf_pipeline(model_dir: str, threads: int):
    import torch
    import transformers

    from litebert.records import read_record

    torch.set_num_threads(threads)
    weights_dir, _ = read_record(model_dir)  # a run directory's best/
    return transformers.pipeline("text-classification", model=str(weights_dir), device=-1)


def hf_results(pipe, texts: list[str]) -> list[dict]:
    out = pipe(texts, batch_size=len(texts), truncation=True, max_length=128)
    return [{"label": o["label"], "score": float(o["score"])} for o in out]


class HFPipeline:
    """transformers' pipeline shaped like a litebert pipeline, for the transformers-loop side."""

    task = "text-classification"

    def __init__(self, model_dir: str, threads: int):
        self.pipe = hf_pipeline(model_dir, threads)

    def __call__(self, items, **params):
        single = not isinstance(items, list)
        results = hf_results(self.pipe, [items] if single else items)
        return results[0] if single else results

    def embeddings(self):
        from litebert.errors import ConfigError

        raise ConfigError("no embeddings")


def serve_transformers_loop(args) -> None:
    import uvicorn

    from litebert.serving import ServeConfig, create_app

    cfg = ServeConfig(model=args.model, port=args.port, threads=args.threads)
    uvicorn.run(create_app(cfg, pipe=HFPipeline(args.model, args.threads)), host="127.0.0.1", port=args.port,
                log_level="warning")


try:  # the reference side's server (`pip install litebert[bench]`); the other sides run without it
    import litserve as ls
except ImportError:
    ls = None

if ls is not None:
    class SentimentAPI(ls.LitAPI):
        """LitServe as its docs show it: a LitAPI whose predict takes a batch (a list of decoded requests). At
        module level: LitServe pickles it into its inference worker process."""

        def __init__(self, model_dir: str, threads: int, **kwargs):
            super().__init__(**kwargs)
            self.model_dir, self.threads = model_dir, threads

        def setup(self, device):
            self.pipe = hf_pipeline(self.model_dir, self.threads)
            self.pipe(["warm up"])

        def decode_request(self, request):
            return request["inputs"][0]["text"]

        def predict(self, texts):
            return hf_results(self.pipe, list(texts))

        def encode_response(self, output):
            return {"outputs": [output]}


def serve_litserve(args) -> None:
    if ls is None:
        raise SystemExit("the litserve side needs LitServe: pip install 'litebert[bench]'")
    api = SentimentAPI(args.model, args.threads, max_batch_size=MAX_BATCH, batch_timeout=MAX_WAIT_MS / 1000)
    ls.LitServer(api, accelerator="cpu", workers_per_device=1).run(host="127.0.0.1", port=args.port,
                                                                    log_level="warning", generate_client_file=False)


def signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:  # the group is gone already
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(name: str, args) -> dict:
    port = free_port()
    if name.startswith("litebert"):
        # "litebert" is `litebert serve` at its defaults: its lanes and threads are its own (auto), not --threads
        threads = [] if name == "litebert" else ["--threads", str(args.threads)]
        cmd = [sys.executable, "-m", "litebert", "serve", "--model", args.model, "--port", str(port), *threads,
               *{"litebert-nobatch": ["--no-batching"], "litebert-fp32": ["--backend", "fp32"],
                 "litebert-bf16": ["--backend", "bf16"], "litebert-2w": ["--workers", "2"],
                 "litebert-1lane": ["--lanes", "1"]}.get(name, [])]
        ready = "/ready"
    else:
        cmd = [sys.executable, __file__, "--serve", name, "--model", args.model, "--port", str(port), "--threads",
               str(args.threads)]
        ready = "/health" if name == "litserve" else "/ready"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, start_new_session=True)
    return {"name": name, "port": port, "ready": ready, "proc": proc}


def wait_ready(servers, timeout=300) -> None:
    deadline = time.time() + timeout
    for s in servers:
        while True:
            if s["proc"].poll() is not None:
                raise SystemExit(f"{s['name']} died: {s['proc'].stderr.read().decode()[-3000:]}")
            try:
                status, _ = asyncio.run(get(s["port"], s["ready"]))
                if status == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline:
                raise SystemExit(f"{s['name']} not ready in {timeout} s")
            time.sleep(0.5)


def tree_cpu_seconds(root: int) -> float:
    """User + system CPU seconds of a process and its live descendants (/proc), e.g. LitServe's workers."""
    tick = os.sysconf("SC_CLK_TCK")
    stats = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            stats[int(entry)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick)  # ppid, utime+stime
    members, grew = {root}, True
    while grew:
        grew = False
        for pid, (ppid, _) in stats.items():
            if ppid in members and pid not in members:
                members.add(pid)
                grew = True
    return sum(stats[p][1] for p in members if p in stats)


async def get(port: int, path: str) -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        return await read_response(reader)
    finally:
        writer.close()


async def read_response(reader) -> tuple[int, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    length = next((int(v) for k, _, v in (line.partition(":") for line in lines[1:])
                   if k.strip().lower() == "content-length"), None)
    if length is None:
        raise OSError(f"a response without Content-Length: {lines[0]}")
    return status, await reader.readexactly(length)


async def load(port: int, texts: list[str], start: int, clients: int, requests: int, seconds: float) -> dict:
    """`clients` keep-alive connections, each sending one text per request, back to back, until `requests` answers
    or `seconds`; the latency of every answered request."""
    latencies, errors, sent = [], 0, 0
    stop_at = time.perf_counter() + seconds

    async def client():
        nonlocal errors, sent
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while sent < requests and time.perf_counter() < stop_at:
                text = texts[(start + sent) % len(texts)]
                sent += 1
                body = json.dumps({"inputs": [{"text": text}]}).encode()
                t0 = time.perf_counter()
                writer.write(b"POST /predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
                await writer.drain()
                status, answer = await read_response(reader)
                latencies.append(time.perf_counter() - t0)
                errors += status != 200 or b'"label"' not in answer
        except (OSError, asyncio.IncompleteReadError):  # a dropped connection: counted, not retried
            errors += 1
        finally:
            writer.close()

    t0 = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    wall = time.perf_counter() - t0
    q = statistics.quantiles(latencies, n=100, method="inclusive") if len(latencies) > 1 else [latencies[0]] * 99
    return {"p50": q[49] * 1e3, "p99": q[98] * 1e3, "rps": len(latencies) / wall, "answered": len(latencies),
            "errors": errors}


def median_range(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}x [{min(values):.2f}-{max(values):.2f}]"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", required=True, help="a fine-tuned text-classification run or model directory")
    p.add_argument("--data", default=str(REPO.parent / "shared" / "data" / "glue" / "SST-2" / "dev.tsv"))
    p.add_argument("--sides", default="litebert,litserve", help=f"comma-separated, from {', '.join(SIDES)}; the "
                   "ratios are each side's over litserve's (without litserve: over the second side's)")
    p.add_argument("--levels", default="1,8,32", help="client concurrency levels")
    p.add_argument("--requests", type=int, default=400, help="most requests per (side, level, repeat)")
    p.add_argument("--seconds", type=float, default=60, help="longest (side, level, repeat) turn")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=1, help="torch threads of every server")
    p.add_argument("--json", help="also write the results here")
    p.add_argument("--serve", choices=SIDES, help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.serve == "litserve":
        serve_litserve(args)
        return 0
    if args.serve == "transformers-loop":
        serve_transformers_loop(args)
        return 0
    from _common import host_line

    texts = [line.split("\t")[0] for line in Path(args.data).read_text().splitlines()[1:] if line.strip()]
    levels = [int(x) for x in args.levels.split(",")]
    names = args.sides.split(",")
    if unknown := set(names) - set(SIDES):
        p.error(f"unknown side(s) {', '.join(sorted(unknown))}")
    print(f"host: {host_line()}", flush=True)
    servers = [start(n, args) for n in names]
    turns: list[dict] = []
    try:
        wait_ready(servers)
        for s in servers:  # a warm-up turn each (connection set-up, first batches), not timed
            asyncio.run(load(s["port"], texts, 0, 8, 64, 30))
            if s["name"].startswith("litebert"):  # which precision answers (backend auto resolves per host)
                _, info = asyncio.run(get(s["port"], "/info"))
                info = json.loads(info)
                print(f"{s['name']}: precision {info.get('precision')}, lanes {info.get('lanes')}, torch threads "
                      f"{info.get('threads') or 'torch default'}", flush=True)
        for rep in range(args.repeats):
            for level in levels:
                start_at = (rep * len(levels) + levels.index(level)) * args.requests
                order = servers[rep % len(servers):] + servers[:rep % len(servers)]
                for s in order:
                    cpu0 = tree_cpu_seconds(s["proc"].pid)
                    r = asyncio.run(load(s["port"], texts, start_at, level, args.requests, args.seconds))
                    r["cpu_ms_per_request"] = (tree_cpu_seconds(s["proc"].pid) - cpu0) / max(r["answered"], 1) * 1e3
                    turns.append({"rep": rep, "level": level, "side": s["name"], **r})
                    print(f"rep {rep} c={level:>3} {s['name']:<18} p50 {r['p50']:8.1f} ms  p99 {r['p99']:8.1f} ms  "
                          f"{r['rps']:7.1f} req/s  CPU {r['cpu_ms_per_request']:6.1f} ms/req  answered "
                          f"{r['answered']}  errors {r['errors']}  load {os.getloadavg()[0]:.2f}", file=sys.stderr,
                          flush=True)
    finally:
        # The whole process group of each server (each has a session of its own): LitServe's inference worker
        # outlives its parent's SIGTERM and then spins at a full core, which skewed every later run on the host.
        for s in servers:
            signal_group(s["proc"], signal.SIGTERM)
        for s in servers:
            try:
                s["proc"].wait(30)
            except subprocess.TimeoutExpired:
                pass
            signal_group(s["proc"], signal.SIGKILL)
    print(report(turns, names, levels, args))
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "host": host_line(), "turns": turns}, indent=2))
    return 0


def report(turns: list[dict], names: list[str], levels: list[int], args) -> str:
    ref = "litserve" if "litserve" in names else names[min(1, len(names) - 1)]
    by = {(t["rep"], t["level"], t["side"]): t for t in turns}
    reps = sorted({t["rep"] for t in turns})
    header = (f"| clients | side | req/s | p50 ms | p99 ms | CPU ms/request | errors | vs {ref} (median [min-max] of "
              "turns): req/s | p50 | p99 |")
    lines = [header, "|---|---|---|---|---|---|---|---|---|---|"]
    for level in levels:
        for name in names:
            rows = [by[(r, level, name)] for r in reps if (r, level, name) in by]
            if not rows:
                continue
            med = {m: statistics.median(t[m] for t in rows) for m in ("rps", "p50", "p99", "cpu_ms_per_request")}
            ratios = ["", "", ""]
            if name != ref:
                pairs = [(by[(r, level, name)], by[(r, level, ref)]) for r in reps
                         if (r, level, name) in by and (r, level, ref) in by]
                ratios = [median_range([a[m] / b[m] for a, b in pairs]) for m in ("rps", "p50", "p99")]
            lines.append(f"| {level} | {name} | {med['rps']:.1f} | {med['p50']:.1f} | {med['p99']:.1f} | "
                         f"{med['cpu_ms_per_request']:.1f} | {sum(t['errors'] for t in rows)} | " + " | ".join(ratios)
                         + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
