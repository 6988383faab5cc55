"""`make gpu-check`: the GPU tier in one command (under 8 minutes on one GPU), written to docs/gpu.md.

Stages, each in its own process with its own time limit (and all within --budget seconds):
  tests      `pytest -m gpu` (tests/test_gpu.py, tests/test_gpu_runs.py) on the GPU
  bench      benchmarks/bench_pretrain.py (litebert eager and compiled vs transformers AlbertForPreTraining bf16,
             seq 128 and 512) and benchmarks/bench_inference.py (batch 1 and 256), side by side in one process
             each; MFU against a matmul rate measured on the same device
  pretrain   a token store from ../shared/data (Gutenberg books, RACE passages, SQuAD contexts; the official 30k
             vocabulary), built while the tests run; `litebert pretrain --model albert-base-v2 --max-time 90s` with
             the CLI's own defaults otherwise; `litebert evaluate --model RUN` (held-out MLM at [MASK] beside the
             bigram and commonest-piece baselines)
Then docs/gpu.md: device, versions, date, every figure, the goals of issues 44 and 43 and whether each is met.

    python benchmarks/gpu_check.py                 # on a GPU machine: writes docs/gpu.md
    python benchmarks/gpu_check.py --smoke         # the plumbing on the CPU: tiny model, seconds of training,
                                                   # the report into a temporary file (its numbers mean nothing)
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field, fields
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "src"))

# Issue 44's goals on the GPU (benchmark figures, not timed tests).
TRAIN_GOAL = 3.0  # ours eager bf16 / transformers eager bf16, seq 128 and 512
MFU_GOAL = 0.60  # ours compiled, against the measured matmul rate
INFERENCE_GOAL = 3.0  # ours / transformers bf16 autocast at batch 256
LEARNING_GOAL = 1.5  # issue 43: the 90 s run at [MASK] / the bigram table of its store
RESERVE_S = 200  # kept for the 90 s pretraining (with its start, evaluation and save) and `evaluate`
EVAL_FIGURES = {"eval_mlm_acc_mask": "the model, at [MASK]", "eval_base_mask_commonest": "commonest piece, same targets",
                "eval_base_mask_bigram": "bigram of the training text, same targets",
                "eval_mlm_acc": "official masked_lm_accuracy (all targets)", "eval_sop_acc": "sentence order (SOP)"}


@dataclass
class Stage:
    name: str
    command: list[str]
    limit_s: float
    log: Path
    rc: int | None = None
    seconds: float = 0.0
    timed_out: bool = False
    output: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def status(self) -> str:
        return "timed out" if self.timed_out else "ok" if self.rc == 0 else f"failed (exit {self.rc})"


class Runner:
    """Runs stages one after another within a total budget; a stage gets min(its own limit, what is left)."""

    def __init__(self, budget_s: float, work: Path, env: dict[str, str]):
        self.deadline = time.monotonic() + budget_s
        self.work, self.env, self.stages = work, env, []

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def start(self, name: str, command: list[str], limit_s: float) -> tuple[Stage, subprocess.Popen]:
        stage = Stage(name, command, limit_s, self.work / f"{name}.log")
        self.stages.append(stage)
        print(f"[gpu-check] {name}: {shlex.join(command)}", file=sys.stderr, flush=True)
        stage.extra["t0"] = time.monotonic()
        proc = subprocess.Popen(command, cwd=REPO, env=self.env, stdout=stage.log.open("w"),
                                stderr=subprocess.STDOUT, start_new_session=True)
        # a stage waited for later (the store) still gets its own duration: a thread notes when it ends
        threading.Thread(target=lambda: (proc.wait(), stage.extra.setdefault("t1", time.monotonic())),
                         daemon=True).start()
        return stage, proc

    def wait(self, stage: Stage, proc: subprocess.Popen) -> Stage:
        limit = max(1.0, min(stage.limit_s, self.left()))
        try:
            stage.rc = proc.wait(timeout=limit - (time.monotonic() - stage.extra["t0"]))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)  # the stage's own process group (torchrun workers, servers, compile workers)
            proc.wait()
            stage.timed_out, stage.rc = True, proc.returncode
        stage.seconds = stage.extra.pop("t1", time.monotonic()) - stage.extra.pop("t0")
        stage.output = stage.log.read_text(errors="replace")
        print(f"[gpu-check] {stage.name}: {stage.status} in {stage.seconds:.0f}s", file=sys.stderr, flush=True)
        return stage

    def run(self, name: str, command: list[str], limit_s: float, reserve_s: float = 0.0) -> Stage:
        """`reserve_s`: seconds kept for the stages after this one (it gets at most what is left beyond them)."""
        limit_s = min(limit_s, self.left() - reserve_s)
        if limit_s < 5:
            stage = Stage(name, command, limit_s, self.work / f"{name}.log", timed_out=True)
            stage.output = "not started: the --budget was spent"
            self.stages.append(stage)
            return stage
        return self.wait(*self.start(name, command, limit_s))


# --------------------------------------------------------------------------------------------- the corpus


def write_corpus(shared: Path, out: Path, limit: int | None) -> dict[str, int]:
    """RACE passages and SQuAD contexts (each once) as JSONL documents; `limit` keeps the first N of each."""
    from litebert.data.race import read_race
    from litebert.data.squad import read_squad

    race = list(dict.fromkeys(e.article for split in ("dev", "test") for e in read_race(shared / "race" / split)))
    squad = list(dict.fromkeys(e.context for e in read_squad(shared / "squad" / "dev-v1.1.json")))
    race, squad = race[:limit], squad[:limit]
    with out.open("w", encoding="utf-8") as f:
        for text in race + squad:
            f.write(json.dumps({"text": text}) + "\n")
    return {"race_passages": len(race), "squad_contexts": len(squad)}


# --------------------------------------------------------------------------------------------- reading results


def measured(d: dict):
    from litebert.lab.bench import Measured

    names = {f.name for f in fields(Measured)}
    return Measured(**{k: v for k, v in d.items() if k in names})


def results_of(path: Path) -> dict:
    """{side name: Measured} of a bench script's JSON (its first section), {} when it wrote none."""
    if not path.is_file():
        return {}
    payload = json.loads(path.read_text())
    return {r["name"]: measured(r) for s in payload.get("sections", [])[:1] for r in s["results"]}


def inference_results(path: Path) -> dict[int, dict]:
    if not path.is_file():
        return {}
    out = {}
    for s in json.loads(path.read_text()).get("sections", []):
        batch = int(s["title"].split("batch ")[1].split(",")[0])
        out[batch] = {r["name"]: measured(r) for r in s["results"]}
    return out


def speedup(ours, ref) -> float:
    from litebert.lab.bench import ratio

    if ours is None or ref is None or ours.error or ref.error or not ours.seconds:
        return float("nan")
    return ratio(ours, ref)[0]


def cli_figures(run_dir: Path) -> dict:
    """The pretraining run's logged throughput: the median of its windows after the first (which holds the
    start), with the run's own mfu figure."""
    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        return {}
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    train = [r for r in rows if "tokens_per_s" in r]
    steady = train[1:] or train
    if not steady:
        return {}
    health = [(r["step"], r["health_spread"]) for r in rows if "health_spread" in r]  # (step, spread)
    return {"steps": train[-1]["step"], "tokens_per_s": statistics.median(r["tokens_per_s"] for r in steady),
            "mfu": statistics.median(r["mfu"] for r in steady),
            "windows": len(steady),
            "lowest_spread": min(health, key=lambda h: h[1]) if health else None,
            "last_spread": health[-1] if health else None}


def learning_rows(cli: dict, scores: dict) -> list[list[str]]:
    """Issue 43's goals for the 90 s run: [MASK] against the bigram table, and no collapse (litebert.health)."""
    from litebert.health import COLLAPSE_SPREAD, DEEP_COLLAPSE_SPREAD

    rows = []
    if "eval_mlm_acc_mask" in scores and scores.get("eval_base_mask_bigram"):
        value = scores["eval_mlm_acc_mask"] / scores["eval_base_mask_bigram"]
        rows.append(["90 s albert-base from scratch (CLI defaults): at [MASK] / the bigram table", fmt(value),
                     f">= {LEARNING_GOAL:g}x", met(value, LEARNING_GOAL)])
    for key, what, floor in (("lowest_spread", "its lowest health_spread (a collapse: under", DEEP_COLLAPSE_SPREAD),
                             ("last_spread", "its last health_spread (collapsed at the end: under", COLLAPSE_SPREAD)):
        if cli.get(key):
            step, spread = cli[key]
            rows.append([f"{what} {floor:g})", f"{spread:.2g} at step {step}", f">= {floor:g}",
                         "yes" if spread >= floor else "NO"])
    return rows


def junit_properties(path: Path) -> tuple[str, list[str]]:
    """(the counts line, the properties the tests recorded) of pytest's junit XML."""
    if not path.is_file():
        return "no report", []
    root = ET.parse(path).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    counts = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    passed = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    line = (f"{passed} passed, {counts['failures']} failed, {counts['errors']} errors, {counts['skipped']} skipped "
            f"of {counts['tests']}")
    props = [f"{p.get('name')}: {p.get('value')}" for p in root.iter("property")]
    return line, props


# --------------------------------------------------------------------------------------------- the report


def versions(device_name: str) -> list[str]:
    import torch

    out = [f"date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
           f"python {platform.python_version()}, torch {torch.__version__} (CUDA build {torch.version.cuda}), "
           f"platform {platform.platform()}"]
    try:
        import transformers

        out.append(f"transformers {transformers.__version__}")
    except ImportError:
        out.append("transformers: not installed")
    from litebert import __version__

    out.append(f"litebert {__version__}, commit {git_commit()}")
    if device_name.startswith("cuda") and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        out.append(f"device: {props.name}, {props.total_memory / 2**30:.0f} GiB, compute capability "
                   f"{props.major}.{props.minor}, {torch.cuda.device_count()} visible")
    else:
        from litebert.lab.bench import host_line

        out.append(f"device: {device_name} ({host_line()})")
    return out


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              timeout=10).stdout.strip() or "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def fmt(x: float, pct: bool = False) -> str:
    if x != x:
        return "-"
    return f"{100 * x:.0f}%" if pct else f"{x:.2f}x"


def goal_rows(work: Path, matmul_peak: float, cli: dict) -> list[list[str]]:
    rows = []
    for seq in (128, 512):
        r = results_of(work / f"pretrain-{seq}.json")
        ours, eager, hf = r.get("ours"), r.get("ours eager"), r.get("HF bf16")
        value = speedup(eager, hf)
        rows.append([f"training step, seq {seq}: ours eager bf16 / transformers eager bf16", fmt(value),
                     f">= {TRAIN_GOAL:g}x", met(value, TRAIN_GOAL)])
        value = speedup(ours, hf)
        rows.append([f"training step, seq {seq}: ours compiled / transformers eager bf16", fmt(value), "context",
                     "-"])
        mfu = ours.mfu(matmul_peak) if ours is not None and not ours.error and ours.seconds else float("nan")
        rows.append([f"MFU, ours compiled, seq {seq}, vs the measured matmul rate", fmt(mfu, True),
                     f">= {MFU_GOAL:.0%}", met(mfu, MFU_GOAL)])
    inf = inference_results(work / "inference.json")
    for batch, goal in ((256, INFERENCE_GOAL), (1, None)):
        sides = inf.get(batch, {})
        value = speedup(sides.get("ours"), sides.get("HF bf16 autocast"))
        rows.append([f"inference batch {batch}: ours / transformers bf16 autocast", fmt(value),
                     f">= {goal:g}x" if goal else "context", met(value, goal) if goal else "-"])
    if cli:
        r128 = results_of(work / "pretrain-128.json")
        eager = r128.get("ours eager")
        bench_tps = eager.throughput if eager is not None and eager.seconds else float("nan")
        rows.append(["`litebert pretrain` (CLI defaults) tokens/s / bench's ours eager at seq 128",
                     fmt(cli["tokens_per_s"] / bench_tps), "context: what the CLI loses", "-"])
    return rows


def met(value: float, goal: float) -> str:
    return "-" if value != value else "yes" if value >= goal else "NO"


def eval_scores(output: str) -> dict:
    """The figures of `litebert evaluate`'s JSON (the last object it printed), {} without one."""
    start = output.rfind("\n{")
    try:
        return json.loads(output[start + 1:]) if start >= 0 else {}
    except json.JSONDecodeError:
        return {}


def write_report(path: Path, runner: Runner, work: Path, device: str, smoke: bool, corpus: dict,
                 matmul: dict, cli: dict) -> None:
    lines = ["# GPU check", "",
             "Written by `make gpu-check` (benchmarks/gpu_check.py); edits are overwritten. "
             + ("SMOKE RUN on the CPU: tiny model, seconds of work; the numbers mean nothing." if smoke else
                "Benchmark figures are side-by-side ratios measured in one process each; nothing here is a "
                "timed test."), ""]
    lines += [f"- {v}" for v in versions(device)]
    peak = max(matmul.values()) if matmul else float("nan")
    lines += ["", "## Stages", "", "| stage | status | seconds | command |", "|---|---|---|---|"]
    lines += [f"| {s.name} | {s.status} | {s.seconds:.0f} | `{shlex.join(s.command)}` |" for s in runner.stages]
    scores = eval_scores(next((s.output for s in runner.stages if s.name == "evaluate"), ""))
    lines += ["", "## Goals (issues 44 and 43)", "",
              f"Measured matmul rate of this device in bf16 (the MFU denominator): {peak / 1e12:.4g} TFLOP/s, the faster "
              "of " + ", ".join(f"{k} {v / 1e12:.4g}" for k, v in matmul.items()) + ".", "",
              "| figure | measured | goal | met |", "|---|---|---|---|"]
    lines += ["| " + " | ".join(r) + " |" for r in goal_rows(work, peak, cli) + learning_rows(cli, scores)]
    tests = next((s for s in runner.stages if s.name == "tests"), None)
    if tests is not None:
        counts, props = junit_properties(work / "tests.xml")
        lines += ["", "## Tests: `pytest -m gpu`", "", f"{counts} ({tests.status}, {tests.seconds:.0f}s)", ""]
        lines += [f"- {p}" for p in props]
        failed = [ln for ln in tests.output.splitlines() if ln.startswith(("FAILED", "ERROR", "SKIPPED"))]
        lines += ["", "```", *failed[:40], "```"] if failed else []
    for s in runner.stages:
        if s.name.startswith(("pretrain-", "inference")):
            body = s.output.split("\n## ", 1)
            lines += ["", f"## Benchmark {s.name} ({s.status})", "",
                      ("## " + body[1]).replace("## ", "### ", 1) if len(body) > 1 else f"```\n{s.output[-3000:]}\n```"]
    lines += ["", "## 90-second pretraining and its held-out evaluation", ""]
    lines += [f"Corpus: {', '.join(f'{v:,} {k}' for k, v in corpus.items())}."]
    if cli:
        lines += [f"`litebert pretrain` logged {cli['tokens_per_s']:,.0f} tokens/s and mfu {cli['mfu']:.2f} (medians "
                  f"of {cli['windows']} log windows after the first; its own calibration GEMM), {cli['steps']} "
                  "steps."]
    if scores:
        lines += ["", "| held-out MLM (`litebert evaluate --model RUN`) | accuracy |", "|---|---|"]
        lines += [f"| {what} | {100 * scores[k]:.1f}% |" for k, what in EVAL_FIGURES.items() if k in scores]
    for s in runner.stages:
        if s.name in ("store", "pretraining", "evaluate"):
            tail = s.output.strip().splitlines()[-25:]
            lines += ["", f"### {s.name} ({s.status}, {s.seconds:.0f}s)", "", "```", *tail, "```"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


# --------------------------------------------------------------------------------------------- main


def measure_matmul(device: str, precision: str) -> dict[str, float]:
    """The device's matmul rate in the training precision: the model's FFN GEMM and a large square one."""
    import torch

    from litebert.device import measure_peak_flops

    dev = torch.device(device)
    sizes = {"[16384x768]x[768x3072]": (16384, 768, 3072), "[8192x8192]x[8192x8192]": (8192, 8192, 8192)}
    if dev.type == "cpu":
        sizes = {"[512x128]x[128x512]": (512, 128, 512)}
    return {name: measure_peak_flops(dev, precision, *mkn, seconds=1.0) for name, mkn in sizes.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--smoke", action="store_true", help="the plumbing on the CPU: tiny model, a few steps, the "
                                                      "report into a temporary file unless --doc is given")
    p.add_argument("--device", default=None, help="default: cuda (cpu under --smoke)")
    p.add_argument("--doc", default=None, help="where the report goes (default: docs/gpu.md; --smoke: a temp file)")
    p.add_argument("--budget", type=float, default=None, help="seconds for everything (default 470; --smoke 900)")
    p.add_argument("--work", default=None, help="folder for logs, JSON, the store and the run (default: a temp "
                                               "folder, kept)")
    p.add_argument("--shared-data", default=None, help="default: $LITEBERT_SHARED_DATA or ../shared/data")
    args = p.parse_args(argv)
    from litebert.lab.shared_data import shared_data_dir

    device = args.device or ("cpu" if args.smoke else "cuda")
    if not args.smoke:
        import torch

        if device.startswith("cuda") and not torch.cuda.is_available():
            print(f"gpu-check: no CUDA device (torch {torch.__version__}, CUDA build {torch.version.cuda}); "
                  "`--smoke` checks the plumbing on the CPU", file=sys.stderr)
            return 2
    shared = Path(args.shared_data) if args.shared_data else shared_data_dir()
    work = Path(args.work or tempfile.mkdtemp(prefix="litebert-gpu-check-"))
    work.mkdir(parents=True, exist_ok=True)
    doc = Path(args.doc) if args.doc else (work / "gpu.md" if args.smoke else REPO / "docs" / "gpu.md")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
           "PYTHONUNBUFFERED": "1", "LITEBERT_GPU_TEST_DEVICE": device}
    runner = Runner(args.budget or (900 if args.smoke else 470), work, env)
    py = sys.executable
    model = "albert-tiny" if args.smoke else "albert-base-v2"

    # The store is built on the CPU while the tests run on the GPU (nothing timed runs beside it).
    corpus = write_corpus(shared, work / "contexts.jsonl", 40 if args.smoke else None)
    books = sorted((shared / "gutenberg").glob("*.txt"))[:2 if args.smoke else None]
    corpus["gutenberg_books"] = len(books)
    store_cmd = [py, "-m", "litebert", "data", "build", "--input", *map(str, books), str(work / "contexts.jsonl"),
                 "--tokenizer", str(shared / "albert-vocab" / "30k-clean.model"), "--out", str(work / "store"),
                 "--max-doc-sentences", "200", "--validation-fraction", "0.1" if args.smoke else "0.02", "--overwrite", "--quiet"]
    store_stage, store_proc = runner.start("store", store_cmd, 150)

    tests = [py, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider", "-rs", f"--junitxml={work / 'tests.xml'}",
             "tests/test_gpu.py", "tests/test_gpu_runs.py"]
    if args.smoke:  # the plumbing only: the CPU runs of the whole tier are minutes (`LITEBERT_GPU_TEST_DEVICE=cpu`)
        tests += ["-k", "fp32 and not compiled and not checkpoint"]
    runner.run("tests", tests, 240)

    bench = [py, str(HERE / "bench_pretrain.py"), "--model", model, "--device", device, "--reference", "bf16",
             "--also-eager", "--quiet", "--no-ddp"]
    shapes = [(32, 4)] if args.smoke else [(128, 128), (512, 32)]
    for seq, batch in shapes:
        runner.run(f"pretrain-{seq}", bench + ["--seq", str(seq), "--batch", str(batch), "--json",
                                                str(work / f"pretrain-{seq}.json")]
                   + (["--quick", "--precision", "bf16"] if args.smoke else ["--repeats", "3", "--steps", "5"]),
                   300 if args.smoke else 120, reserve_s=RESERVE_S)  # a CPU compiles for minutes
    runner.run("inference", [py, str(HERE / "bench_inference.py"), "--model", model, "--device", device, "--quiet",
                             "--no-levers", "--json", str(work / "inference.json")]
               + (["--batches", "1,4", "--seq", "32", "--quick", "--no-compile"] if args.smoke
                  else ["--batches", "1,256", "--seq", "128", "--repeats", "3"]), 120, reserve_s=RESERVE_S)
    matmul = measure_matmul(device, "bf16")

    runner.wait(store_stage, store_proc)
    run_dir = work / "run"
    train = [py, "-m", "litebert", "pretrain", "--model", model, "--data", str(work / "store"), "--out",
             str(run_dir), "--device", device, "--max-time", "20s" if args.smoke else "90s", "--steps", "100000"]
    if args.smoke:
        train += ["--batch-size", "8", "--micro-batch-size", "8", "--max-seq-length", "64", "--eval-batches", "2"]
    runner.run("pretraining", train, 90 if args.smoke else 170)
    runner.run("evaluate", [py, "-m", "litebert", "evaluate", "--model", str(run_dir)], 90)

    write_report(doc, runner, work, device, args.smoke, corpus, matmul, cli_figures(run_dir))
    print(f"[gpu-check] report -> {doc} (logs and JSON in {work})", file=sys.stderr)
    return 0 if all(s.rc == 0 for s in runner.stages) else 1


if __name__ == "__main__":
    sys.exit(main())
