"""`litebert ablate`: the paper's controlled comparisons at small scale, under equal budgets.

A suite is a list of variants of one small base model. Each variant is pretrained for the same number of steps
on the same token store (same seed), evaluated on held-out pairs of both kinds (SOP and NSP), then fine-tuned on
a small fixed downstream task with several seeds. Every suite also gets a "random-init" row: the base model
fine-tuned without pretraining, the floor that tells how much of the downstream score pretraining bought.
Everything goes into DIR:

    DIR/_data/{tokenizer,store}           built once from --corpus
    DIR/_data/steps.json                  the step count, probed once from --budget-minutes on the base model, so
                                          every suite in DIR runs the same budget
    DIR/_runs/<run id>/pretrain/          a normal pretraining run dir (resumable); the run id names the variant's
                                          full settings, so a variant shared by two suites (e.g. the all-shared E128
                                          SOP base) is trained once
    DIR/_runs/<run id>/result.json        written last: a finished run is never re-run
    DIR/<suite>/<variant>.json            the suite's view of that result
    DIR/<suite>/results.md, *.png         the table and the plots

Suites (paper tables): embedding (Table 3), sharing (Table 4), objective (Table 5), dropout (Table 9), and scale
(parameter count against measured training throughput of the released configs).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Callable, Sequence

from litebert.config import AlbertConfig
from litebert.errors import ConfigError, TrainingError
from litebert.files import atomic_write_bytes, parse_json, read_json

BASE = dict(embedding_size=128, hidden_size=256, num_hidden_layers=6, num_attention_heads=4, intermediate_size=1024,
            max_position_embeddings=512)

# A damaged record of a finished step (a full disk, a hand edit) names its file; removing it redoes just that step.
STALE_HINT = "remove it and `litebert ablate` redoes that part of the study"


@dataclass
class Variant:
    name: str
    model: dict[str, Any] = field(default_factory=dict)  # AlbertConfig overrides on BASE
    train: dict[str, Any] = field(default_factory=dict)  # PretrainConfig overrides


def suite_variants(suite: str, hidden: int = BASE["hidden_size"]) -> list[Variant]:
    sizes = [e for e in (32, 64, 128) if e < hidden] + [hidden]  # the paper's E values below H, then E = H
    if suite == "embedding":
        return [Variant(f"{s}-E{e}", {"embedding_size": e, "sharing": s}) for s in ("all", "none") for e in sizes]
    if suite == "sharing":
        return [Variant(f"E{e}-{s}", {"embedding_size": e, "sharing": s})
                for e in dict.fromkeys((hidden, min(128, hidden))) for s in ("all", "attention", "ffn", "none")]
    if suite == "objective":
        return [Variant(f"objective-{o}", train={"objective": o}) for o in ("none", "nsp", "sop")]
    if suite == "dropout":
        return [Variant("dropout-0", train={"dropout": 0.0}), Variant("dropout-0.1", train={"dropout": 0.1})]
    raise ConfigError(f"unknown suite {suite!r}; use embedding, sharing, objective, dropout or scale")


@dataclass
class AblateConfig:
    suite: str
    corpus: list[str]
    out: str
    steps: int | None = None  # per variant; default from --budget-minutes
    budget_minutes: float = 4.0  # pretraining minutes for the base variant; sets the shared step count
    seeds: int = 3  # downstream fine-tuning seeds
    vocab_size: int = 8000
    max_seq_length: int = 128
    batch_size: int = 32
    lr: float = 2e-3
    glue: str | None = None  # GLUE folder with SST-2 (default: $LITEBERT_SHARED_DATA/glue)
    finetune_train_examples: int = 2000
    finetune_steps: int = 300
    finetune_lr: float = 2e-4
    precision: str = "auto"
    hidden_size: int = BASE["hidden_size"]  # the base model's H (heads of 64, FFN 4H)
    num_layers: int = BASE["num_hidden_layers"]
    threads: int | None = None  # torch threads for every run (default: torch's choice)
    pretrain_seed: int = 0  # another seed re-runs every variant: the seed-to-seed spread of the pretraining

    @property
    def suite_dir(self) -> Path:
        """Where the suite's views, table and plots go: DIR/SUITE, or DIR/SUITE-seedS for pretraining seed S > 0."""
        return Path(self.out) / (self.suite if self.pretrain_seed == 0 else f"{self.suite}-seed{self.pretrain_seed}")

    @property
    def base(self) -> dict[str, Any]:
        H = self.hidden_size
        return {**BASE, "hidden_size": H, "num_attention_heads": max(1, H // 64), "intermediate_size": 4 * H,
                "num_hidden_layers": self.num_layers, "embedding_size": min(BASE["embedding_size"], H)}


def prepare_data(cfg: AblateConfig) -> Path:
    from litebert.data.store import TokenStore
    from litebert.data.store_build import build_store
    from litebert.tokenizer_train import train_sentencepiece

    data = Path(cfg.out) / "_data"
    if (data / "store" / "meta.json").is_file():
        return data
    data.mkdir(parents=True, exist_ok=True)
    train_sentencepiece(cfg.corpus, data / "tokenizer", vocab_size=cfg.vocab_size)
    build_store(cfg.corpus, data / "tokenizer", data / "store", workers=2, validation_fraction=0.05, overwrite=True,
                max_doc_sentences=50)
    TokenStore.open(data / "store")
    return data


def variant_config(cfg: AblateConfig, variant: Variant) -> AlbertConfig:
    return AlbertConfig(vocab_size=cfg.vocab_size, **{**cfg.base, **variant.model})


def write_model_config(cfg: AblateConfig, variant: Variant, run_dir: Path) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    variant_config(cfg, variant).to_json(run_dir / "model_config.json")


def pretrain_config(cfg: AblateConfig, data: Path, run_dir: Path, variant: Variant, steps: int):
    """The variant's PretrainConfig, reading its model config from run_dir/model_config.json."""
    from litebert.pretrain import PretrainConfig

    train = dict(model=str(run_dir / "model_config.json"), data=str(data / "store"), tokenizer=str(data / "tokenizer"),
                 out=str(run_dir / "pretrain"), steps=steps, batch_size=cfg.batch_size,
                 micro_batch_size=cfg.batch_size, max_seq_length=cfg.max_seq_length, lr=cfg.lr,
                 warmup_steps=max(1, steps // 20), log_every=max(1, steps // 50), save_every=max(1, steps // 4),
                 eval_every=0, eval_batches=40, precision=cfg.precision, keep=1, seed=cfg.pretrain_seed,
                 threads=cfg.threads)
    return PretrainConfig(**{**train, **variant.train})


def steps_for_budget(cfg: AblateConfig, data: Path) -> int:
    """How many steps the base model runs in --budget-minutes (timed by `measure_seconds_per_step`). Probed once
    per DIR and kept in _data/steps.json, so every suite of one study gets the same step count."""
    from litebert.pretrain import measure_seconds_per_step

    record = data / "steps.json"
    key = {"base": cfg.base, "vocab_size": cfg.vocab_size, "batch_size": cfg.batch_size,
           "max_seq_length": cfg.max_seq_length, "budget_minutes": cfg.budget_minutes, "precision": cfg.precision}
    if record.is_file():
        saved = read_json(record, TrainingError, expect=dict, hint=STALE_HINT)
        if saved.get("key") == key:
            return int(saved["steps"])
    with tempfile.TemporaryDirectory(prefix="litebert-ablate-") as tmp:  # holds the base model's config
        write_model_config(cfg, Variant("base"), Path(tmp))
        per_step = measure_seconds_per_step(pretrain_config(cfg, data, Path(tmp), Variant("base"), steps=8), steps=8)
    steps = max(10, int(cfg.budget_minutes * 60 / per_step))
    record.write_text(json.dumps({"key": key, "steps": steps, "seconds_per_step": per_step}, indent=2) + "\n")
    return steps


def run_id(config: AlbertConfig, pc) -> str:
    """A readable, unique name for a variant's full settings: same settings in two suites, same run."""
    settings = {"model": config.stable_dict(), "train": {k: v for k, v in dataclasses.asdict(pc).items()
                                                     if k not in ("model", "out", "threads", "resume")}}
    digest = hashlib.sha1(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:8]
    return (f"{config.sharing}-E{config.embedding_size}-H{config.hidden_size}-L{config.num_hidden_layers}-"
            f"{pc.objective}-dropout{pc.dropout:g}-{pc.steps}steps{f'-seed{pc.seed}' if pc.seed else ''}-{digest}")


def finetune_sst2(checkpoint: Path, out_prefix: Path, glue: Path, *, seeds: int, lr: float, steps: int,
                  train_examples: int | None, eval_every: int, precision: str = "auto",
                  threads: int | None = None) -> list[float]:
    """Fine-tune `checkpoint` on the first `train_examples` SST-2 sentences once per seed (runs in
    OUT_PREFIX-seedS) and return each seed's best dev accuracy. Batch 32, seq 64, 10% warmup: SST-2 sentences
    are short, and these settings are shared by every comparison that calls this."""
    from litebert.finetune import FinetuneConfig, finetune

    scores = []
    for seed in range(seeds):
        ft = FinetuneConfig(task="sst-2", model=str(checkpoint), data=str(glue / "SST-2"),
                            out=f"{out_prefix}-seed{seed}", seed=seed, lr=lr, batch_size=32, steps=steps,
                            max_seq_length=64, max_train_examples=train_examples, eval_every=eval_every,
                            precision=precision, warmup_ratio=0.1, threads=threads,
                            overwrite=True)  # the run dir is this comparison's cache: a stale or cut-off run is redone
        result = finished_finetune(ft) or finetune(ft)
        scores.append(result["best"]["accuracy"])
    return scores


def finished_finetune(ft) -> dict[str, Any] | None:
    """The result of a finished fine-tuning run in ft.out with the same settings, or None. finetune() writes
    result.json last, so a run cut off midway is redone; re-running a comparison with more seeds or learning
    rates trains only what is new."""
    out = Path(ft.out)
    if not (out / "result.json").is_file() or not (out / "finetune.json").is_file():
        return None
    saved = read_json(out / "finetune.json", TrainingError, expect=dict, hint=STALE_HINT)
    wanted = {k: v for k, v in dataclasses.asdict(ft).items() if v is not None and k not in ("threads", "overwrite")}
    if not all(saved.get(k) == v for k, v in wanted.items()):
        return None
    return read_json(out / "result.json", TrainingError, expect=dict, hint=STALE_HINT)


def downstream(cfg: AblateConfig, checkpoint: Path, run_dir: Path) -> dict[str, Any]:
    """SST-2 dev accuracy after fine-tuning on a fixed subset, over several seeds: mean, std, all."""
    from litebert.lab.shared_data import shared_data_dir

    glue = Path(cfg.glue) if cfg.glue else shared_data_dir() / "glue"
    if not (glue / "SST-2" / "train.tsv").is_file():
        return {"sst2_note": f"no SST-2 at {glue}; downstream scoring skipped"}
    scores = finetune_sst2(checkpoint, run_dir / "sst2", glue, seeds=cfg.seeds, lr=cfg.finetune_lr,
                           steps=cfg.finetune_steps, train_examples=cfg.finetune_train_examples,
                           eval_every=cfg.finetune_steps, precision=cfg.precision, threads=cfg.threads)
    return {"sst2_acc_mean": statistics.mean(scores), "sst2_acc_std": statistics.pstdev(scores),
            "sst2_acc": scores, "sst2_collapsed": collapsed_seeds(run_dir / "sst2", cfg.seeds)}


def collapsed_seeds(out_prefix: Path, seeds: int) -> int:
    """How many seeds' kept models collapsed (every dev prediction one class: finetune's result.json says so)."""
    results = [Path(f"{out_prefix}-seed{seed}") / "result.json" for seed in range(seeds)]
    return sum(1 for r in results if r.is_file()
               and read_json(r, TrainingError, expect=dict, hint=STALE_HINT).get("collapse"))


def run_variant(cfg: AblateConfig, data: Path, variant: Variant, steps: int, wait: bool = True) -> dict | None:
    """Train and score one variant, or read its finished run. With wait=False, a run another process holds is
    left alone (None) so the caller can do other variants first."""
    view = cfg.suite_dir / f"{variant.name}.json"
    config = variant_config(cfg, variant)
    run_dir = Path(cfg.out) / "_runs" / run_id(config, pretrain_config(cfg, data, Path(), variant, steps))
    result = cached_result(run_dir, lambda: train_and_score(cfg, data, variant, steps, run_dir), wait)
    if result is None:
        return None
    result = {"variant": variant.name, **result, "run_dir": str(run_dir)}
    view.write_text(json.dumps(result, indent=2) + "\n")
    return result


def cached_result(run_dir: Path, compute: Callable[[], dict[str, Any]], wait: bool = True) -> dict[str, Any] | None:
    """RUN_DIR/result.json, computed once under the run's lock: a finished run is read, never re-run, and two
    processes never compute the same run. The result file is written last, so a run cut off midway is redone
    (and resumes from its own checkpoints). None when wait=False and another process holds the run."""
    done = run_dir / "result.json"
    with run_lock(run_dir, wait) as mine:
        if not mine:
            return None
        if not done.is_file():
            atomic_write_bytes(done, (json.dumps(compute(), indent=2) + "\n").encode())
    return read_json(done, TrainingError, expect=dict, hint=STALE_HINT)


@contextlib.contextmanager
def run_lock(run_dir: Path, wait: bool = True):
    """An exclusive lock on one run, so `ablate` processes sharing a DIR (say, two suites on two cores) never
    train the same run at once. Yields True once held; with wait=False, yields False at once if another process
    holds it."""
    import fcntl

    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / ".lock", "w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def train_and_score(cfg: AblateConfig, data: Path, variant: Variant, steps: int, run_dir: Path) -> dict[str, Any]:
    """Pretrain one variant and score it on held-out SOP and NSP pairs and downstream."""
    from litebert.model import AlbertForPreTraining
    from litebert.params import count_parameters
    from litebert.pretrain import pretrain
    from litebert.pretrain_eval import evaluate_checkpoint

    write_model_config(cfg, variant, run_dir)
    pc = pretrain_config(cfg, data, run_dir, variant, steps)
    t0 = time.perf_counter()
    last = pretrain(pc)
    seconds = time.perf_counter() - t0
    checkpoint = Path(pc.out) / f"checkpoint-{steps}"
    model = AlbertForPreTraining.from_pretrained(checkpoint)
    evals = {}
    for objective in ("sop", "nsp"):
        scores = evaluate_checkpoint(model, data / "store", objective, pc.max_seq_length, batches=40,
                                     precision=cfg.precision)
        evals.update({"mlm_acc": scores["eval_mlm_acc"], "mlm_loss": scores["eval_mlm_loss"],
                      f"{objective}_acc": scores[f"eval_{objective}_acc"]})
        if objective == "sop":  # by kind of target, and the no-model baselines on the same targets (mlm_scores)
            evals.update({k.removeprefix("eval_"): v for k, v in scores.items()
                          if k.startswith(("eval_mlm_acc_", "eval_base_"))})
    result = {"model": variant.model, "train": variant.train, "steps": steps,
              "parameters": count_parameters(model.config), "pretrain_seconds": seconds,
              "tokens_per_s": last.get("tokens_per_s"), "final_loss": last.get("loss"), **evals,
              **downstream(cfg, checkpoint, run_dir)}
    return result


def random_init_reference(cfg: AblateConfig) -> dict[str, Any]:
    """The base model fine-tuned from random init (no pretraining): the floor for the SST-2 column."""
    import torch

    from litebert.model import AlbertForPreTraining
    from litebert.params import count_parameters
    from litebert.tokenizer import load_tokenizer

    config = variant_config(cfg, Variant("base"))
    key = json.dumps({"model": config.stable_dict(), "finetune": [cfg.finetune_lr, cfg.finetune_steps,
                                                              cfg.finetune_train_examples, cfg.seeds]}, sort_keys=True)
    run_dir = Path(cfg.out) / "_runs" / f"random-init-{hashlib.sha1(key.encode()).hexdigest()[:8]}"

    def score() -> dict[str, Any]:
        torch.manual_seed(0)
        AlbertForPreTraining(config).save_pretrained(run_dir / "model",
                                                     tokenizer=load_tokenizer(Path(cfg.out) / "_data" / "tokenizer"))
        return {"parameters": count_parameters(config), **downstream(cfg, run_dir / "model", run_dir)}

    return {"variant": "random-init", **cached_result(run_dir, score), "run_dir": str(run_dir)}


def run_scale(cfg: AblateConfig) -> list[dict[str, Any]]:
    """Parameters vs measured training throughput of the released configs (the paper's speed column)."""
    from litebert.params import count_parameters

    results = []
    for preset in ("bert-base", "albert-base", "albert-large", "albert-xlarge", "bert-large"):
        config = AlbertConfig.from_preset(preset)
        tps = measure_train_throughput(config, cfg.max_seq_length, batch=8, precision=cfg.precision)
        results.append({"variant": preset, "parameters": count_parameters(config), "tokens_per_s": tps})
    base = next(r["tokens_per_s"] for r in results if r["variant"] == "bert-large")
    for r in results:
        r["speedup_vs_bert_large"] = r["tokens_per_s"] / base
    return results


def measure_train_throughput(config: AlbertConfig, seq_len: int, batch: int, precision: str, steps: int = 3) -> float:
    """Tokens/s of a full pretraining step (sparse MLM head, SOP, LAMB), median of `steps` after a warm-up."""
    from litebert.lab.bench import ours_pretrain_step, synthetic_pretraining_batch
    from litebert.device import pick_device, resolve_precision

    device = pick_device()
    step = ours_pretrain_step(config, synthetic_pretraining_batch(config, batch, seq_len, predictions=20), device,
                              resolve_precision(precision, device))
    times = []
    for _ in range(steps + 1):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return batch * seq_len / statistics.median(times[1:])


def ablate(cfg: AblateConfig) -> Path:
    if cfg.threads:
        import torch

        torch.set_num_threads(cfg.threads)
    out = cfg.suite_dir
    out.mkdir(parents=True, exist_ok=True)
    if cfg.suite == "scale":
        results = run_scale(cfg)
    else:
        data = prepare_data(cfg)
        steps = cfg.steps or steps_for_budget(cfg, data)
        print(f"ablate {cfg.suite}: {steps} pretraining steps per variant", file=sys.stderr)
        variants = suite_variants(cfg.suite, cfg.hidden_size)
        # Variants another process is training are done last (by then they are usually finished): two workers
        # on one DIR split a suite between them instead of queueing behind each other.
        first = [run_variant(cfg, data, v, steps, wait=False) for v in variants]
        results = [r if r is not None else run_variant(cfg, data, v, steps) for v, r in zip(variants, first)]
        if any("sst2_acc_mean" in r for r in results):
            results.append(random_init_reference(cfg))
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    write_report(cfg, results, out)
    return out / "results.md"


COLUMNS = [("variant", "{}"), ("parameters", "{:,}"), ("steps", "{}"), ("tokens_per_s", "{:.0f}"),
           ("final_loss", "{:.3f}"), ("mlm_acc_mask", "{:.3f}"), ("mlm_acc", "{:.3f}"), ("sop_acc", "{:.3f}"),
           ("nsp_acc", "{:.3f}"), ("speedup_vs_bert_large", "{:.2f}x")]


def format_table(results: list[dict[str, Any]]) -> str:
    cols = [(k, f) for k, f in COLUMNS if any(k in r for r in results)]
    has_sst2 = any("sst2_acc_mean" in r for r in results)
    head = [k for k, _ in cols] + (["SST-2 dev acc (mean ± std)"] if has_sst2 else [])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        cells = [f.format(r[k]) if r.get(k) is not None else "" for k, f in cols]
        if has_sst2:
            cells.append(sst2_cell(r) if "sst2_acc_mean" in r else "")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def sst2_cell(r: dict[str, Any]) -> str:
    """Mean ± std over seeds, unless seeds collapsed to one class: a collapsed run's accuracy is that class's
    share of dev, not a measure of the variant, so an all-collapsed row is marked instead of averaged."""
    n, collapsed = len(r["sst2_acc"]), r.get("sst2_collapsed", 0)
    if collapsed == n:
        return f"**COLLAPSED** (all {n} seeds predict one class; {r['sst2_acc_mean']:.3f} is its share of dev)"
    cell = f"{r['sst2_acc_mean']:.3f} ± {r['sst2_acc_std']:.3f} (n={n})"
    return cell + (f", {collapsed} of {n} seeds collapsed" if collapsed else "")


def write_report(cfg: AblateConfig, results: list[dict[str, Any]], out: Path) -> None:
    command = "litebert ablate " + " ".join(sys.argv[2:]) if sys.argv[1:2] == ["ablate"] else f"ablate({cfg})"
    text = [f"# Ablation suite: {cfg.suite}", "", f"Command: `{command}`", "",
            f"Base model: {cfg.base}, vocab {cfg.vocab_size}, seq {cfg.max_seq_length}, batch {cfg.batch_size}, "
            f"lr {cfg.lr} (LAMB), every variant the same steps and seed. Downstream: SST-2, "
            f"{cfg.finetune_train_examples} training sentences, {cfg.finetune_steps} steps, lr {cfg.finetune_lr}, "
            f"{cfg.seeds} seeds, accuracy on the full dev set. random-init: the base model fine-tuned without "
            "pretraining.", "", format_table(results), "", baseline_line(results)]
    plots = write_plots(results, out)
    text += [f"![{p.stem}]({p.name})" for p in plots]
    (out / "results.md").write_text("\n".join(text) + "\n")


def baseline_line(results: list[dict[str, Any]]) -> str:
    """What guessing without a model scores on the same held-out targets (the same for every variant)."""
    r = next((r for r in results if "base_mask_commonest" in r), None)
    if r is None:
        return ""
    return (f"mlm_acc_mask: accuracy at the positions shown as [MASK] (the fill-in task); mlm_acc: the official "
            f"figure over every target, kept and random-replaced ones included. Without a model, at [MASK]: the "
            f"commonest piece {r['base_mask_commonest']:.3f}, a bigram table {r['base_mask_bigram']:.3f}; over every "
            f"target, copy-else-commonest {r['base_copy_commonest']:.3f}.\n")


def moving_average(values: Sequence[float], window: int) -> list[float]:
    """Trailing mean over up to `window` values: training-batch losses are noisy at batch 32."""
    return [statistics.fmean(values[max(0, i - window + 1): i + 1]) for i in range(len(values))]


def write_plots(results: list[dict[str, Any]], out: Path) -> list[Path]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    paths = []
    metrics = [k for k in ("mlm_acc_mask", "mlm_acc", "sop_acc", "nsp_acc", "sst2_acc_mean", "tokens_per_s") if
               any(r.get(k) is not None for r in results)]
    if metrics:
        fig, axes = plt.subplots(1, len(metrics), figsize=(4 * len(metrics), 3.5), squeeze=False)
        names = [r["variant"] for r in results]
        for ax, key in zip(axes[0], metrics):
            values = [r[key] if r.get(key) is not None else math.nan for r in results]
            errors = [r.get("sst2_acc_std", 0) for r in results] if key == "sst2_acc_mean" else None
            ax.bar(range(len(names)), values, yerr=errors, capsize=3)
            ax.set_xticks(range(len(names)), names, rotation=60, ha="right", fontsize=7)
            ax.set_title(key)
            if key in ("sop_acc", "nsp_acc"):
                ax.axhline(0.5, ls="--", lw=1, color="gray")  # chance
        fig.tight_layout()
        paths.append(out / "bars.png")
        fig.savefig(paths[-1], dpi=100)
        plt.close(fig)
    curves = [(r["variant"], Path(r.get("run_dir", "")) / "pretrain" / "metrics.jsonl") for r in results]
    curves = [(n, p) for n, p in curves if p.is_file()]
    if curves:
        fig, ax = plt.subplots(figsize=(6, 4))
        for name, path in curves:
            rows = [parse_json(line, path, TrainingError, line=i) for i, line in enumerate(path.read_text().splitlines(), 1)
                    if line.strip()]
            # MLM loss, not the total: the total adds a pair loss that objective "none" does not have
            points = [(r["step"], r["mlm_loss"]) for r in rows
                      if r.get("mlm_loss") is not None and math.isfinite(r["mlm_loss"])]
            if points:
                steps, losses = zip(*points)
                ax.plot(steps, moving_average(losses, 5), label=name)
        ax.set_xlabel("step")
        ax.set_ylabel("training MLM loss (mean of 5 logs)")
        ax.legend(fontsize=7)
        fig.tight_layout()
        paths.append(out / "curves.png")
        fig.savefig(paths[-1], dpi=100)
        plt.close(fig)
    return paths
