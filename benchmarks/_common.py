"""Shared by the benchmark scripts: flags, thread setup, the result table and the JSON that run_all.py collects.

The timing engine itself (interleaved turns, peak RSS, calibration GEMM, the workloads) is `litebert.lab.bench`, so
`litebert bench` and these scripts measure the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import torch

from litebert.lab.bench import Measured, format_table, host_line, machine_info, ratio

REPO = Path(__file__).resolve().parents[1]


def base_parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", default="albert-base", help="preset name or config JSON")
    p.add_argument("--threads", type=int, default=os.cpu_count(), help="torch threads, the same on every side")
    p.add_argument("--repeats", type=int, default=3, help="turns per side (the sides alternate: A B A B ...)")
    p.add_argument("--steps", type=int, default=1, help="steps per turn")
    p.add_argument("--quick", action="store_true", help="fewer turns and steps: a rough number in little time")
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda when present)")
    p.add_argument("--json", default=None, help="also write the results here (run_all.py collects them)")
    p.add_argument("--quiet", action="store_true", help="no per-turn progress on stderr")
    return p


def setup(args: argparse.Namespace) -> torch.device:
    from litebert.device import pick_device

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    return pick_device(args.device)


def load_model_config(spec: str):
    from litebert.config import AlbertConfig

    return AlbertConfig.load(spec)


def logger(args: argparse.Namespace):
    return None if args.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))


def command_line() -> str:
    """How this script was run, from the repo root (without --json, which only says where results go)."""
    args, skip = [], False
    for a in sys.argv[1:]:
        if skip or a.startswith("--json="):
            skip = False
            continue
        if a == "--json":
            skip = True
            continue
        args.append(a)
    return "python " + " ".join(shlex.quote(a) for a in [os.path.relpath(sys.argv[0], REPO), *args])


def side_rows(results: list[Measured], ours: str, peak_flops: float, unit: str) -> tuple[list[str], list[list]]:
    """Table rows: every side with its throughput, the ratio of `ours` over it, MFU and memory."""
    by_name = {r.name: r for r in results}
    headers = ["side", "what it runs", f"{unit}/s", "s/step", f"{ours} vs this (median [min-max])",
               "same, CPU time", "MFU", "first call s", "peak RSS MB", "+RSS MB"]
    rows = []
    for r in results:
        if r.error:
            rows.append([r.name, r.note, "failed", r.error, "", "", "", "", "", ""])
            continue
        if r.name.startswith("calibration"):
            rows.append([r.name, r.note, f"{r.throughput / 1e12:.2f} TFLOP/s", r.step_s, "", "", "100%",
                         r.first_step_s, r.peak_rss_mb, r.rss_growth_mb])
            continue
        ratio_text, cpu_text = ("1.00", "1.00") if r.name == ours else ("", "")
        if r.name != ours and ours in by_name and not by_name[ours].error:
            ratio_text = "{:.2f}x [{:.2f}-{:.2f}]".format(*ratio(by_name[ours], r))
            if r.cpu_seconds and by_name[ours].cpu_seconds:
                cpu_text = "{:.2f}x [{:.2f}-{:.2f}]".format(*ratio(by_name[ours], r, "cpu"))
        mfu = r.mfu(peak_flops)
        rows.append([r.name, r.note, r.throughput, r.step_s, ratio_text, cpu_text,
                     f"{100 * mfu:.0f}%" if mfu == mfu else "-", r.first_step_s, r.peak_rss_mb, r.rss_growth_mb])
    return headers, rows


def target_entry(name: str, ours: Measured, ref: Measured, target: float, higher_is_better: bool = True,
                 command: str = "", context: bool = False) -> dict[str, Any]:
    """One line of the issue's target table: the median ratio and whether it meets the target. `context`: a ratio
    shown beside the targets to read them by (e.g. against the reference's faster precision on this host), not
    a target itself."""
    def oriented(clock: str) -> tuple[float, float, float]:
        if ours.error or ref.error or (clock == "cpu" and not (ours.cpu_seconds and ref.cpu_seconds)):
            return (float("nan"),) * 3
        med, lo, hi = ratio(ours, ref, clock)
        return (med, lo, hi) if higher_is_better else (1 / med, 1 / hi, 1 / lo)

    value, lo, hi = oriented("wall")
    cpu = oriented("cpu")
    met = value >= target if higher_is_better else value <= target
    return {"name": name, "value": value, "min": lo, "max": hi, "cpu_value": cpu[0], "target": target,
            "comparison": ">=" if higher_is_better else "<=", "met": bool(met), "command": command or command_line(),
            **({"context": True} if context else {})}


def fastest_reference_entry(name: str, ours: Measured, target_ref: Measured, refs: list[Measured], target: float,
                            higher_is_better: bool = True) -> list[dict[str, Any]]:
    """A context line for a target whose reference precision is not the reference's fastest on this machine (e.g.
    HF under bf16 autocast where bf16 matmuls are slower than fp32): ours against the fastest reference side
    (lowest median step time), so nobody reads a ratio against a slowed-down reference as a speed-up. Empty when
    the target's reference is already the fastest. `name` names the line, with "{ref}" where the side goes."""
    ok = [r for r in refs if not r.error and r.seconds]
    if not ok or target_ref.error:
        return []
    fastest = min(ok, key=lambda r: r.step_s / r.units_per_step)
    if fastest is target_ref:
        return []
    return [target_entry(name.format(ref=f"{fastest.name} (the reference's fastest precision here; context, not "
                                         "a target)"), ours, fastest, target, higher_is_better, context=True)]


def print_report(title: str, headers: list[str], rows: list[list], notes: list[str], targets: list[dict]) -> None:
    print(f"\n## {title}\n")
    print(format_table(headers, rows))
    if targets:
        print()
        print(format_table(["target", "measured (median [min-max])", "CPU-time median", "goal", "met"],
                           [[t["name"], f"{t['value']:.2f}x [{t['min']:.2f}-{t['max']:.2f}]",
                             f"{t.get('cpu_value', float('nan')):.2f}x", f"{t['comparison']} {t['target']:g}x",
                             "context" if t.get("context") else "yes" if t["met"] else "NO"] for t in targets]))
    for n in notes:
        print(f"- {n}")
    print(f"\ncommand: {command_line()}")
    print(f"host: {host_line()}")


def write_json(args: argparse.Namespace, device: torch.device, payload: dict[str, Any]) -> None:
    if not args.json:
        return
    payload = {"command": command_line(), "machine": machine_info(device), **payload}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(payload, indent=2, default=str) + "\n")
