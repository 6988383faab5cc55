"""How the cost of a pretraining step grows: tokens/s and peak memory against sequence length, model size and DDP
ranks, for litebert's own `train_step` as `litebert pretrain` runs it (precision "auto", i.e. what
`litebert.device.resolve_precision` picks on this machine, or --precision; eager, as the CLI's default; LAMB, clip
1.0; synthetic full-length batches, P = 20). Each point records its precision, which is part of its key, so points
measured in different precisions stand side by side instead of replacing each other.

    python benchmarks/bench_scaling.py --out DIR            # the full sweep (hours on a shared machine: background it)
    python benchmarks/bench_scaling.py --out DIR --quick    # albert-tiny only: a smoke check
    python benchmarks/bench_scaling.py --json docs/benchmarks_scaling.json --resume     # finish an interrupted sweep
    python benchmarks/bench_scaling.py --json docs/benchmarks_scaling.json --render-only \
        --markdown block.md --png docs/benchmarks_scaling.png   # tables and chart from the JSON, no measuring

Every point runs in a fresh child process, so its peak RSS (the kernel's VmHWM: Python, torch, weights, gradients,
optimizer state, activations, everything) is that point's alone; 2 DDP ranks report the sum of the two ranks'
VmHWM. Points are written to --json as they finish, so an interrupted sweep keeps what it measured; --resume skips
the points already there. Before each point the script compares the host's MemAvailable with an estimate of the
point's need (twice `litebert.memory.training_bytes`, the library's lower bound, plus 0.5 GiB per process) plus
--margin-gib, and waits while it does not fit; a watchdog in the child stops it if MemAvailable falls below 1 GiB.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
GIB = 2 ** 30
PREDICTIONS = 20  # the official max_predictions_per_seq

# ------------------------------------------------------------------------------------------------ the sweep


def sweep(quick: bool, threads: int, max_repeats: int = 2) -> list[dict[str, Any]]:
    """The points, in run order: one pass over every point, then the second repeat of the cheap ones (so a
    burst of load from other tenants does not hit all repeats of one point)."""
    def pt(group, model, seq, batch, *, ranks=1, thr=threads, ckpt=False, steps=3, repeats=2):
        return dict(group=group, model=model, seq=seq, batch=batch, ranks=ranks, threads=thr,
                    checkpointing=ckpt, steps=steps, repeats=min(repeats, max_repeats))

    if quick:
        points = [pt("model", "albert-tiny", 64, 2, ckpt=c, steps=1, repeats=1) for c in (False, True)]
        points += [pt("seq", "albert-tiny", s, 256 // s, steps=1, repeats=1) for s in (32, 64)]
        points += [pt("ranks", "albert-tiny", 32, 4, ranks=r, thr=t, steps=1, repeats=1) for r, t in ((1, 1), (2, 1))]
    else:
        # Model size at seq 512, batch 1 (the smallest batch; accumulation makes any global batch), the largest
        # first while the machine's memory is free; xlarge and xxlarge once each (a step takes minutes).
        points = [pt("model", m, 512, 1, steps=1, repeats=1) for m in ("albert-xxlarge", "albert-xlarge")]
        points += [pt("model", m, 512, 1, steps=2) for m in ("albert-large", "albert-base", "albert-tiny")]
        # Sequence length at a fixed 512 tokens per step (albert-base).
        points += [pt("seq", "albert-base", s, 512 // s, steps=2) for s in (64, 128, 256, 512)]
        # The 2 cores as 1 process x 1 thread, 1 process x 2 threads, and 2 DDP ranks x 1 thread.
        points += [pt("ranks", "albert-base", 128, 4, ranks=r, thr=t, steps=2) for r, t in ((1, 1), (1, 2), (2, 1))]
        # The memory-saving variant of the largest model last: the point is made without it.
        points += [pt("model", "albert-xxlarge", 512, 1, ckpt=True, steps=1, repeats=1)]
    order = [dict(p, repeat=0) for p in points]
    order += [dict(p, repeat=r) for r in range(1, max(p["repeats"] for p in points)) for p in points
              if r < p["repeats"]]
    return order


def key(point: dict[str, Any], repeat: bool = True) -> str:
    parts = [point["group"], point["model"], f"seq{point['seq']}", f"b{point['batch']}", f"r{point['ranks']}",
             f"t{point['threads']}", "ckpt" if point["checkpointing"] else "full", point["precision"]]
    return "/".join(parts + ([f"rep{point['repeat']}"] if repeat else []))


def estimate_bytes(point: dict[str, Any]) -> tuple[int, int]:
    """(the library's lower bound for all ranks together, the need this script plans for)."""
    from litebert.memory import training_bytes

    config = model_config(point["model"])
    per_rank = training_bytes(config, point["batch"] // point["ranks"], point["seq"],
                              min(PREDICTIONS, point["seq"] - 3), point["checkpointing"])
    lower = per_rank * point["ranks"]
    return lower, 2 * lower + point["ranks"] * GIB // 2


def available_bytes() -> int:
    from litebert.memory import available_bytes as available
    import torch

    return available(torch.device("cpu")) or 0


def model_config(name: str):
    from litebert.config import AlbertConfig

    return AlbertConfig.load(name)


# ------------------------------------------------------------------------------------------------ one point (child)


def vm_hwm_mb(pid: int | str = "self") -> float:
    """Peak resident set of a live process (VmHWM), MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pids: list) -> float:
    """User + system CPU seconds of these live processes ("self" or pids) together, from /proc/PID/stat."""
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat), clock ticks
    return total / os.sysconf("SC_CLK_TCK")


def watchdog(floor_bytes: int) -> None:
    """Stop this process (exit 3) if the host's available memory falls below `floor_bytes`: a point that
    outgrows its estimate must not push the machine's other users into the OOM killer."""
    def watch():
        while True:
            free = available_bytes()
            if free and free < floor_bytes:
                print(f"watchdog: MemAvailable {free / GIB:.1f} GiB < {floor_bytes / GIB:.1f} GiB; stopping",
                      file=sys.stderr, flush=True)
                os._exit(3)
            time.sleep(0.2)

    threading.Thread(target=watch, daemon=True).start()


def measure(point: dict[str, Any]) -> dict[str, Any]:
    """Build the point's train step, time its first step alone (lazy init), then `steps` steps one by one."""
    import torch

    from litebert.lab.bench import DDPSide, ours_train_step, synthetic_pretraining_batch
    from litebert.device import resolve_precision
    from litebert.model import model_flops_per_token

    torch.set_num_threads(point["threads"])
    torch.manual_seed(0)
    device = torch.device("cpu")
    precision = resolve_precision(point.get("precision", "auto"), device)
    config = model_config(point["model"])
    predictions = min(PREDICTIONS, point["seq"] - 3)
    batch = synthetic_pretraining_batch(config, point["batch"], point["seq"], predictions)
    base_mb = vm_hwm_mb()  # Python + torch + litebert imported, the batch built
    ddp = None
    if point["ranks"] == 1:
        step = ours_train_step(config, batch, device, precision, gradient_checkpointing=point["checkpointing"])
    else:  # the ranks are other processes (1 thread each); this one only hands out the steps and waits
        ddp = DDPSide(config, batch, precision, world=point["ranks"], gradient_checkpointing=point["checkpointing"])
        step = ddp.step
    try:
        t0 = time.perf_counter()
        step()
        first = time.perf_counter() - t0
        pids = [p.pid for p in ddp.procs] if ddp else ["self"]
        seconds, cpu = [], []
        for _ in range(point["steps"]):
            t0, c0 = time.perf_counter(), cpu_seconds(pids)
            step()
            seconds.append(time.perf_counter() - t0)
            cpu.append(cpu_seconds(pids) - c0)
        ranks_mb = [vm_hwm_mb(p.pid) for p in ddp.procs] if ddp else []
    finally:
        if ddp is not None:
            ddp.close()
    own_mb = vm_hwm_mb()
    tokens = point["batch"] * point["seq"]
    step_s = statistics.median(seconds)
    return {"precision": precision, "step_s": step_s, "seconds": seconds,
            "cpu_seconds": cpu, "first_step_s": first, "tokens_per_step": tokens,
            "tokens_per_s": tokens / step_s,
            "flops_per_token": model_flops_per_token(config, point["seq"], predictions / point["seq"]),
            # The memory a user needs: this process when it trains alone; the ranks' sum under DDP (the
            # coordinating process holds no model: reported apart).
            "peak_rss_mb": sum(ranks_mb) if ddp else own_mb, "rank_peak_rss_mb": ranks_mb,
            "coordinator_peak_rss_mb": own_mb if ddp else None, "baseline_rss_mb": base_mb}


# ------------------------------------------------------------------------------------------------ the sweep (parent)


def git_commit() -> str:
    """The commit measured: $BENCH_COMMIT when set (a sweep run from an exported copy of the tree), else HEAD."""
    if os.environ.get("BENCH_COMMIT"):
        return os.environ["BENCH_COMMIT"]
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True).stdout.strip()
        return out.stdout.strip() + ("+changes" if dirty else "")
    except OSError:
        return "unknown"


def save(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)  # atomic: a reader never sees half a file


def wait_for_memory(need: int, margin: int, max_wait: float, log) -> tuple[bool, float]:
    """Wait until MemAvailable >= need + margin (polling every 20 s, at most `max_wait` s): (fits, waited s)."""
    t0 = time.time()
    while True:
        free = available_bytes()
        if free >= need + margin:
            return True, time.time() - t0
        if time.time() - t0 >= max_wait:
            return False, time.time() - t0
        log(f"   waiting: {free / GIB:.1f} GiB available < {(need + margin) / GIB:.1f} GiB (need + margin)")
        time.sleep(20)


def run_sweep(args: argparse.Namespace) -> dict[str, Any]:
    from litebert.lab.bench import machine_info

    import torch

    from litebert.device import resolve_precision

    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    precision = resolve_precision(args.precision, torch.device("cpu"))  # each point's, and part of its key
    path = Path(args.json)
    data = json.loads(path.read_text()) if args.resume and path.is_file() else {}
    done = {key(p) for p in data.get("points", []) if "error" not in p}
    data.setdefault("started", time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
    data.setdefault("commit", git_commit())
    data["machine"] = machine_info()
    data["command"] = ("python benchmarks/bench_scaling.py" + (" --quick" if args.quick else "")
                       + (f" --precision {args.precision}" if args.precision != "auto" else ""))
    data["points"] = [p for p in data.get("points", []) if "error" not in p]
    path.parent.mkdir(parents=True, exist_ok=True)
    wanted = [dict(p, precision=precision) for p in sweep(args.quick, args.threads, args.max_repeats)]
    wanted = [p for p in wanted
              if (not args.only or p["group"] in args.only.split(","))
              and (not args.models or p["model"] in args.models.split(","))
              and (not args.keys or key(p) in args.keys.split(","))]
    for i, point in enumerate(wanted):
        if key(point) in done:
            continue
        lower, need = estimate_bytes(point)
        log(f"== [{i + 1}/{len(wanted)}] {key(point)}: estimated need {need / GIB:.1f} GiB "
            f"(lower bound {lower / GIB:.1f})")
        fits, waited = wait_for_memory(need, int(args.margin_gib * GIB), args.max_wait, log)
        record = dict(point, key=key(point), lower_bound_mb=lower / 2**20, estimate_mb=need / 2**20,
                      waited_for_memory_s=round(waited), load_before=os.getloadavg()[0])
        if not fits:
            record["error"] = f"not run: MemAvailable stayed below {(need / GIB + args.margin_gib):.1f} GiB"
        else:
            t0 = time.time()
            proc = subprocess.run(["nice", "-n", str(args.nice), sys.executable, __file__, "--point", json.dumps(point)],
                                  cwd=REPO, capture_output=True, text=True)
            record["wall_s"] = time.time() - t0
            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
            if proc.returncode == 0 and lines:
                record.update(json.loads(lines[-1]))
            else:
                tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
                record["error"] = f"exit {proc.returncode}: {tail[:300]}"
        record["load_after"] = os.getloadavg()[0]
        data["points"].append(record)
        data["updated"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        save(path, data)
        log("   " + (record.get("error") or f"{record['tokens_per_s']:.0f} tokens/s, {record['step_s']:.2f} s/step, "
                                          f"peak RSS {record['peak_rss_mb'] / 1024:.2f} GiB")
            + f" (load {record['load_before']:.1f})")
    return data


# ------------------------------------------------------------------------------------------------ report


def summarize(data: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per point (repeats merged): median over repeats of the per-repeat median step, [min-max]."""
    rows: dict[str, dict[str, Any]] = {}
    for p in data["points"]:
        k = key(p, repeat=False)
        row = rows.setdefault(k, {**{f: p[f] for f in ("group", "model", "seq", "batch", "ranks", "threads",
                                                      "checkpointing", "steps", "precision")},
                                  "flops_per_token": p.get("flops_per_token", float("inf")),
                                  "runs": [], "errors": [], "loads": [], "lower_bound_mb": p["lower_bound_mb"]})
        row["loads"] += [p["load_before"], p["load_after"]]
        (row["errors"] if "error" in p else row["runs"]).append(p)
    out = []
    for row in rows.values():
        runs = row["runs"]
        if runs:
            rates = [r["tokens_per_s"] for r in runs]
            row.update(tokens_per_s=statistics.median(rates), rate_min=min(rates), rate_max=max(rates),
                       step_s=statistics.median(r["step_s"] for r in runs),
                       cpu_step_s=statistics.median([statistics.median(r["cpu_seconds"]) for r in runs
                                                     if r["cpu_seconds"]] or [float("nan")]),
                       first_step_s=statistics.median(r["first_step_s"] for r in runs),
                       tokens_per_cpu_s=runs[0]["tokens_per_step"] / statistics.median(
                           [statistics.median(r["cpu_seconds"]) for r in runs if r["cpu_seconds"]] or [float("nan")]),
                       peak_rss_mb=max(r["peak_rss_mb"] for r in runs),
                       gflop_per_cpu_s=statistics.median(
                           r["flops_per_token"] * r["tokens_per_step"] / statistics.median(r["cpu_seconds"]) / 1e9
                           for r in runs if r["cpu_seconds"]) if any(r["cpu_seconds"] for r in runs) else float("nan"))
        out.append(row)
    return out


def num(x: float) -> str:
    """3 significant digits below 100, thousands separators above."""
    return "-" if x != x else f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def describe(row: dict[str, Any]) -> str:
    what = f"{row['model']}, seq {row['seq']}, batch {row['batch']}, {row['ranks']} rank(s) x {row['threads']} thread(s)"
    return what + (", checkpointing" if row["checkpointing"] else "") + f", {row['precision']}"


def markdown(data: dict[str, Any], command: str) -> str:
    rows = summarize(data)
    machine = data.get("machine", {})
    loads = [x for r in rows for x in r["loads"]]
    lines = [f"Measured {data.get('started', '?')} to {data.get('updated', '?')} at commit {data.get('commit', '?')} "
             f"by `{command}`; load average (1 min) seen before/after the points: {min(loads):.1f} to "
             f"{max(loads):.1f} on {machine.get('logical_cpus', '?')} cores.", ""]
    titles = {"model": "Model size", "seq": "Sequence length", "ranks": "DDP ranks and threads on the same cores"}
    headers = ["point", "tokens/s (median [min-max] over repeats)", "s/step", "CPU s/step", "tokens per CPU-s",
               "first step s",
               "GFLOP per CPU-s",
               "peak RSS GiB", "lower bound GiB", "repeats x steps", "load avg"]
    for group, title in titles.items():
        body = []
        for r in (r for r in rows if r["group"] == group):
            load = f"{min(r['loads']):.1f}-{max(r['loads']):.1f}"
            if not r["runs"]:
                body.append(f"| {describe(r)} | {r['errors'][-1]['error']} | | | | | | | "
                            f"{r['lower_bound_mb'] / 1024:.2f} | | {load} |")
                continue
            spread = f" [{num(r['rate_min'])}-{num(r['rate_max'])}]" if len(r["runs"]) > 1 else ""
            cpu = f"{r['cpu_step_s']:.2f}" if r["cpu_step_s"] == r["cpu_step_s"] else "-"
            body.append(f"| {describe(r)} | {num(r['tokens_per_s'])}{spread} | {r['step_s']:.2f} | {cpu} | "
                        f"{num(r['tokens_per_cpu_s'])} | "
                        f"{r['first_step_s']:.1f} | {num(r['gflop_per_cpu_s'])} | {r['peak_rss_mb'] / 1024:.2f} | "
                        f"{r['lower_bound_mb'] / 1024:.2f} | {len(r['runs'])} x {r['steps']} | {load} |")
        if body:
            lines += [f"#### {title}", "", "| " + " | ".join(headers) + " |",
                      "|" + "---|" * len(headers), *body, ""]
    base = [p["baseline_rss_mb"] for p in data["points"] if "baseline_rss_mb" in p]
    lines += ["- peak RSS: the kernel's VmHWM of a fresh process per point (Python and torch included"
              + (f", about {statistics.median(base) / 1024:.2f} GiB before the model is built" if base else "")
              + "); for 2 ranks, the sum of both ranks' VmHWM.",
              "- lower bound: `litebert.memory.training_bytes`, what the CLI checks before a run starts (all ranks).",
              "- GFLOP per CPU-s: `litebert.model.model_flops_per_token` x tokens per CPU-second (matmul FLOPs; "
              "recomputation under checkpointing is not counted, so it reads lower there).", ""]
    return "\n".join(lines)


def chart(data: dict[str, Any], png: Path) -> Path | None:
    """Top row throughput (wall-clock tokens/s and tokens per CPU-second), bottom row peak RSS; columns: sequence
    length, model size, ranks."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no chart (pip install 'litebert[plot]')", file=sys.stderr)
        return None
    rows = [r for r in summarize(data) if r["runs"]]
    fig, axes = plt.subplots(2, 3, figsize=(15, 8), squeeze=False)
    series = (("tokens_per_s", "wall clock: tokens/s", "tab:blue"),
              ("tokens_per_cpu_s", "tokens per CPU-second (all processes)", "tab:green"))
    for col, group in enumerate(("seq", "model", "ranks")):
        sel = [r for r in rows if r["group"] == group]
        if not sel:
            continue
        if group == "seq":
            sel.sort(key=lambda r: r["seq"])
            labels = [f"{r['seq']}\nbatch {r['batch']}" for r in sel]
            title = f"sequence length ({sel[0]['model']}, {sel[0]['batch'] * sel[0]['seq']} tokens per step)"
        elif group == "model":
            sel.sort(key=lambda r: (r["flops_per_token"], r["checkpointing"], r["precision"]))
            several = len({r["precision"] for r in sel}) > 1
            labels = [r["model"].replace("albert-", "") + ("\n+ckpt" if r["checkpointing"] else "")
                      + (f"\n{r['precision']}" if several else "") for r in sel]
            title = f"model size (seq {sel[0]['seq']}, batch {sel[0]['batch']})"
        else:
            labels = [f"{r['ranks']} rank(s)\nx {r['threads']} thread(s)" for r in sel]
            title = f"ranks ({sel[0]['model']}, seq {sel[0]['seq']}, batch {sel[0]['batch']} in total)"
        xs = list(range(len(sel)))
        for i, (field, name, color) in enumerate(series):
            axes[0][col].bar([x + (i - 0.5) * 0.4 for x in xs], [r[field] for r in sel], width=0.4, color=color,
                             label=name)
        axes[1][col].bar(xs, [r["peak_rss_mb"] / 1024 for r in sel], color="tab:orange")
        for ax in (axes[0][col], axes[1][col]):
            ax.set_xticks(xs, labels, fontsize=7)
        axes[0][col].set_title(title, fontsize=9)
        if group == "model":
            axes[0][col].set_yscale("log")
            axes[1][col].axhline(24, color="red", lw=1, ls="--", label="the machine's total memory, 24 GiB")
            axes[1][col].legend(fontsize=7)
        for x, r in zip(xs, sel):
            axes[1][col].text(x, r["peak_rss_mb"] / 1024, f"{r['peak_rss_mb'] / 1024:.1f}", ha="center",
                              va="bottom", fontsize=7)
    handles, names = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncol=2, fontsize=8)
    for ax in axes[0]:
        ax.set_ylabel("training tokens per second")
    for ax in axes[1]:
        ax.set_ylabel("peak RSS GiB (VmHWM, all ranks)")
    loads = [x for r in rows for x in r["loads"]] or [float("nan")]
    precisions = ", ".join(sorted({r["precision"] for r in rows}))
    fig.suptitle(f"litebert train_step ({precisions}, eager, LAMB), commit {data.get('commit', '?')}; "
                 f"{data.get('machine', {}).get('logical_cpus', '?')}-core machine shared with other work, "
                 f"load average {min(loads):.0f}-{max(loads):.0f}", fontsize=10)
    fig.tight_layout(rect=(0, 0.04, 1, 0.96))
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=100)
    plt.close(fig)
    return png


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", help="directory for scaling.json, scaling.md and scaling.png (what run_all.py collects)")
    p.add_argument("--json", help="results file, written point by point (default: OUT/scaling.json)")
    p.add_argument("--quick", action="store_true", help="albert-tiny only, 1 step: a smoke check in about a minute")
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads in the sequence-length and model-size points (1: the CPU time of a step is "
                        "its cost, whatever the other tenants of the machine do)")
    p.add_argument("--precision", default="auto", help="auto (what litebert pretrain picks here) | bf16 | fp32")
    p.add_argument("--only", default="", help="comma-separated groups: seq, model, ranks")
    p.add_argument("--models", default="", help="comma-separated model names: only their points")
    p.add_argument("--keys", default="", help="comma-separated point keys (as in the results file): only these")
    p.add_argument("--resume", action="store_true", help="keep the points already in --json, run the rest")
    p.add_argument("--max-repeats", type=int, default=2,
                   help="runs of each cheap point (1: one pass; a later --resume with 2 adds the second)")
    p.add_argument("--margin-gib", type=float, default=4.0,
                   help="free memory to leave to the machine's other users beyond a point's estimated need")
    p.add_argument("--max-wait", type=float, default=1800, help="seconds to wait for memory before skipping a point")
    p.add_argument("--nice", type=int, default=5, help="niceness of the measuring processes")
    p.add_argument("--render-only", action="store_true", help="no measuring: tables and chart from --json")
    p.add_argument("--markdown", help="write the results tables (Markdown) here (default: OUT/scaling.md)")
    p.add_argument("--png", help="write the chart here (default: OUT/scaling.png)")
    p.add_argument("--point", help=argparse.SUPPRESS)  # internal: measure one point (JSON), print its result
    args = p.parse_args(argv)
    if args.point:
        watchdog(GIB)
        print(json.dumps(measure(json.loads(args.point))))
        return 0
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        args.json = args.json or str(out / "scaling.json")
        args.markdown = args.markdown or str(out / "scaling.md")
        args.png = args.png or str(out / "scaling.png")
    if not args.json:
        p.error("give --out DIR or --json FILE")
    if not args.render_only:
        from litebert.lab.bench import host_line

        print(f"host: {host_line()}", flush=True)
    data = json.loads(Path(args.json).read_text()) if args.render_only else run_sweep(args)
    command = data.get("command", "python benchmarks/bench_scaling.py")
    if args.markdown:
        Path(args.markdown).write_text(markdown(data, command))
    if args.png:
        chart(data, Path(args.png))
    failed = [pt["key"] for pt in data["points"] if "error" in pt]
    if failed:
        print(f"{len(failed)} point(s) failed or were not run: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
