"""Fine-tuning, evaluation and prediction: one loop for every task.

A task is data (`litebert.data.tasks.TaskSpec`); what differs between head families (sentence classification
or regression, token tagging, span QA, multiple choice) is only how features are made and how outputs become
metrics and predictions. That lives in the family's class (litebert.families, named by litebert.heads), the
same prediction path the pipeline and `serve` run; the loop itself is shared.

Run dir layout: `RUN_DIR/best/` (the checkpoint with the best dev score on the task's main metric, as the
official scripts keep `model.ckpt-best`), `RUN_DIR/metrics.jsonl`, `RUN_DIR/finetune.json` (the settings).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from collections.abc import Sequence

import numpy as np
import torch

from litebert import heads
from litebert import model as models
from litebert.config import (ABOVE_ZERO, FRACTION, LEARNING_RATE, NON_NEGATIVE, POSITIVE, at_least, check_options,
                             closed, option)
from litebert.data.examples import Example, Examples
from litebert.data.tasks import (OUR_DEFAULTS, TaskSpec, custom_task, feature_length, get_task, label_list_for,
                                 label_names_for, pad_features, read_examples, split_path)
from litebert.device import AUTO_PRECISION_HELP, PRECISIONS, autocast, for_inference, pick_device, resolve_precision
from litebert.checkpoint import checkpoint_dirs, cleanup_incomplete, find_latest_checkpoint
from litebert.errors import CheckpointError, ConfigError, DataFormatError, LitebertError
from litebert.faults import inject_fault
from litebert.files import atomic_write, fsync_dir, move_into_place, read_json
from litebert.health import HEALTH_BATCH, is_collapsed, representation_health, warn_collapsed
from litebert.model_card import Result, Training, write_model_card
from litebert.optim import build_optimizer, make_scheduler
from litebert.progress import eta, format_seconds, make_bar, on_terminal, say
from litebert.pretrained import model_files
from litebert.records import ModelRecord, identity_dict, read_record
from litebert.rundir import resolve_model_dir
from litebert.runners import TorchRunner
from litebert.runlife import (TermSignal, budget_reached, changed_fields, check_state_keys, holding_run_dir,
                              newest_verified, parse_duration, restore_rng, restore_training, rng_state,
                              save_run_checkpoint, sigterm_error, stopping_line, truncate_metrics)
from litebert.tokenizer import load_tokenizer
from litebert.tracking import REPORT_TO_HELP, Trackers, parse_report_to


@dataclass
class FinetuneConfig:
    task: str = option("sst-2", "a task name (litebert.data.tasks.TASKS) or custom")
    model: str = option("", "a model directory (converted, Hugging Face, or a pretraining checkpoint), a pretraining "
                            "run dir (its newest checkpoint) or a Hub id in the local Hugging Face cache")
    data: str = option("", "the task folder (train and dev files by the task's names), or a training file with --dev")
    out: str = option("runs/finetune", "run directory: best/, metrics.jsonl, finetune.json (the settings; --config "
                                       "repeats the run), result.json")
    dev: str | None = option(None, "dev file, when --data is a training file (default: the task folder's dev split)")
    # custom tasks
    format: str | None = option(None, "custom task: file format (default: from the run record, for "
                                      "evaluate/predict)", choices=("csv", "tsv", "jsonl"))
    text_columns: str | None = option(None, "custom task: one text column, or two as a,b (default: from the run "
                                            "record)")
    label_column: str | None = option(None, "custom task: label column (default: from the run record)")
    head: str = option("classification", "custom task: classification (labels from train), regression (a number) "
                                         "or multilabel", choices=("classification", "regression", "multilabel"))
    # hyperparameters: None = the task's defaults (paper Table 14 where it has them)
    lr: float | None = option(None, "peak learning rate (default: the task's: paper Table 14, else 2e-5)", check=LEARNING_RATE)
    batch_size: int | None = option(None, "examples per optimizer step (default: the task's: paper Table 14, else "
                                          "32)", check=POSITIVE)
    micro_batch_size: int | None = option(None, "examples per forward pass; accumulation makes up --batch-size "
                                                "(default: --batch-size)", check=POSITIVE)
    steps: int | None = option(None, "optimizer steps (default: the paper's for a Table 14 task on its full "
                                     "training set, else from --epochs)", check=POSITIVE)
    epochs: float | None = option(None, "passes over the training set, when --steps is not given (default: 3 "
                                        "where the paper gives no steps, or on a subset such as "
                                        "--max-train-examples)", check=ABOVE_ZERO)
    warmup_ratio: float | None = option(None, "linear warmup as a share of the steps (default: the task's: paper "
                                              "warmup / steps, else 0.1)", check=closed(0.0, 1.0))
    warmup_steps: int | None = option(None, "linear warmup steps, instead of --warmup-ratio (default: from "
                                            "--warmup-ratio)", check=NON_NEGATIVE)
    max_seq_length: int | None = option(None, "tokens per example, longer ones truncated (default: the task's: "
                                              "paper Table 14, else 128)", check=at_least(8))
    albert_dropout: float | None = option(None, "dropout inside the encoder (default: the task's: paper Table 14, "
                                                "else 0)", check=FRACTION)
    classifier_dropout: float | None = option(None, "dropout before the task head (default: the task's, 0.1)", check=FRACTION)
    optimizer: str = option("adamw", "adamw, lamb or adamw_official (the BERT code's AdamW)",
                            choices=("adamw", "lamb", "adamw_official"))
    weight_decay: float = option(0.01, "decoupled weight decay", check=NON_NEGATIVE)
    max_grad_norm: float = option(1.0, "gradient clipping norm", check=ABOVE_ZERO)
    grad_accum: int | None = option(None, "old spelling: micro batch = batch_size, batch per step = batch_size x "
                                          "grad_accum", check=POSITIVE)
    # span QA
    doc_stride: int = option(128, "span tasks: stride between windows over a long context, in tokens", check=POSITIVE)
    max_query_length: int = option(64, "span tasks: question tokens kept", check=POSITIVE)
    n_best: int = option(20, "span tasks: candidate answers considered per question", check=POSITIVE)
    max_answer_length: int = option(30, "span tasks: longest answer, in tokens", check=POSITIVE)
    # run
    precision: str = option("auto", AUTO_PRECISION_HELP, choices=PRECISIONS)
    gradient_checkpointing: bool = option(False, "recompute activations in the backward pass: less memory, ~30% "
                                                 "slower")
    seed: int = option(0, "seed of the head's initialisation, dropout and the data order", check=NON_NEGATIVE)
    eval_every: int | None = option(None, "steps between dev evaluations (default: once per epoch, and at the "
                                          "end)", check=NON_NEGATIVE)
    patience: int = option(0, "stop after this many evaluations without a better dev score (0: never stop early)", check=NON_NEGATIVE)
    max_train_examples: int | None = option(None, "use only the first N training examples (default: all); the "
                                                  "schedule then defaults to 3 epochs", check=POSITIVE)
    max_eval_examples: int | None = option(None, "score only the first N dev examples (default: all)", check=POSITIVE)
    eval_batch_size: int = option(64, "examples per forward pass when scoring", check=POSITIVE)
    log_every: int = option(20, "steps between training-loss log lines and metrics.jsonl records", check=POSITIVE)
    max_time: str | float | None = option(None, "stop cleanly after this much wall-clock time of this session, "
                                                "saving a checkpoint: seconds or 30m, 2h, 1h30m; the schedule stays "
                                                "over the run's steps, and the same command (a larger or no "
                                                "--max-time) goes on from there (default: no limit)")
    report_to: str | None = option(None, REPORT_TO_HELP)
    device: str | None = option(None, "cpu, cuda, cuda:N or mps (default: cuda when present, else cpu)")
    threads: int | None = option(None, "torch threads (default: torch's choice)", check=POSITIVE)
    # The pooler of a pretraining checkpoint is shaped by SOP alone (see docs/recipes.md for its measured effect).
    reinit_pooler: bool = option(False, "re-initialise the pooler ([CLS] -> dense -> tanh) with the model's own "
                                        "initialisation before fine-tuning (drawn from --seed)")
    # A rerun into a directory that already holds a run would mix two runs' metrics.jsonl records and leave the old
    # best/ in place until the new run beats its score, so it is refused unless asked for.
    overwrite: bool = option(False, "replace the run already in --out (its metrics.jsonl, best/ and result.json); "
                                    "default: refuse")

    def __post_init__(self) -> None:
        check_options(self)  # types, choices and rules of every field: one check for library, CLI and --config
        parse_report_to(self.report_to)  # known trackers, their libraries installed: refused before any work
        self.max_seconds  # noqa: B018 (validates --max-time)

    @functools.cached_property
    def max_seconds(self) -> float | None:  # read on every step's budget check: parsed once
        return None if self.max_time is None else parse_duration(self.max_time, "--max-time")


# --------------------------------------------------------------------------------------------- set-up


def resolve_task(cfg: FinetuneConfig) -> TaskSpec:
    if cfg.task != "custom":
        return get_task(cfg.task)
    if not (cfg.format and cfg.text_columns and cfg.label_column):
        raise ConfigError("task 'custom' needs --format, --text-columns and --label-column")
    return custom_task(format=cfg.format, text_columns=cfg.text_columns.split(","), label_column=cfg.label_column,
                       head=cfg.head)


def resolve_hparams(cfg: FinetuneConfig, spec: TaskSpec, subset: bool = False) -> FinetuneConfig:
    """Fill every None hyperparameter from the task's defaults.

    The paper's step counts are sized for the task's full official training set; on a subset (`subset`: fewer
    examples than the file holds, e.g. --max-train-examples) they would mean hundreds of epochs, so the default
    schedule there is epoch-based (OUR_DEFAULTS' epochs), with the paper's warmup share kept."""
    hp = spec.hparams
    filled = dict(
        lr=cfg.lr or hp.learning_rate, batch_size=cfg.batch_size or hp.batch_size,
        max_seq_length=cfg.max_seq_length or hp.max_seq_length,
        albert_dropout=hp.albert_dropout if cfg.albert_dropout is None else cfg.albert_dropout,
        classifier_dropout=hp.classifier_dropout if cfg.classifier_dropout is None else cfg.classifier_dropout)
    if cfg.steps is None and cfg.epochs is None:
        if subset and hp.train_steps:
            filled.update(steps=None, epochs=OUR_DEFAULTS.num_train_epochs)
        else:
            filled.update(steps=hp.train_steps, epochs=hp.num_train_epochs)
    if cfg.warmup_ratio is not None and cfg.warmup_steps is not None:
        raise ConfigError("give --warmup-steps or --warmup-ratio, not both")
    if cfg.warmup_ratio is None and cfg.warmup_steps is None:
        ratio = hp.warmup_ratio if hp.warmup_ratio is not None else (
            hp.warmup_steps / hp.train_steps if hp.train_steps else 0.1)
        filled["warmup_ratio"] = ratio
    if cfg.grad_accum is not None:  # the old spelling: --batch-size was the micro batch
        if cfg.micro_batch_size is not None:
            raise ConfigError("give --micro-batch-size or (the old) --grad-accum, not both")
        if cfg.grad_accum < 1:
            raise ConfigError(f"--grad-accum {cfg.grad_accum}: must be >= 1")
        filled.update(micro_batch_size=filled["batch_size"], batch_size=filled["batch_size"] * cfg.grad_accum)
    micro = filled.get("micro_batch_size", cfg.micro_batch_size) or filled["batch_size"]
    if micro < 1 or filled["batch_size"] % micro:
        raise ConfigError(f"--batch-size {filled['batch_size']} is not a multiple of --micro-batch-size {micro}")
    filled.update(micro_batch_size=micro, grad_accum=None)  # resolved: the record can be fed back as it is
    return dataclasses.replace(cfg, **filled)


def warmup_for(cfg: FinetuneConfig, steps: int) -> int:
    return cfg.warmup_steps if cfg.warmup_steps is not None else round(cfg.warmup_ratio * steps)


def read_split(spec: TaskSpec, cfg: FinetuneConfig, split: str, label_list=None, limit: int | None = None):
    """One split, cut to `limit` examples; the uncut count is kept in `.available` (Examples)."""
    source = cfg.dev if (split != "train" and cfg.dev) else cfg.data
    examples = read_examples(spec, source, split, label_list=label_list)
    skipped = getattr(examples, "skipped", [])
    if skipped:
        print(f"{spec.name}/{split}: {len(skipped)} rows skipped by design (first: {skipped[0]})", file=sys.stderr)
    out = Examples(examples[:limit] if limit else examples, path=getattr(examples, "path", None), skipped=skipped)
    out.available = len(examples)
    return out


def check_dev_source(spec: TaskSpec, cfg: FinetuneConfig) -> None:
    """The dev split must not silently be the training data: model selection and the reported score would be on
    rows the model trained on. (--dev naming the training file on purpose is allowed, with a warning.)"""
    dev_split = spec.eval_splits[0]
    if cfg.dev is None:
        if split_path(spec, cfg.data, "train") == split_path(spec, cfg.data, dev_split):
            raise ConfigError(f"--data {cfg.data} is one split, so there is no dev split to score on (the training "
                              "rows would be scored instead); pass --dev FILE, or --data the task folder holding both")
    elif Path(cfg.dev).resolve() == split_path(spec, cfg.data, "train").resolve():
        print(f"WARNING: --dev {cfg.dev} is the training data: dev scores and the best checkpoint are chosen on "
              "rows the model trains on", file=sys.stderr)


def length_grouped_batches(lengths: Sequence[int], batch_size: int, seed: int, epoch: int) -> list[list[int]]:
    """Shuffle, then sort by length inside windows of 50 batches, then shuffle the batches: each batch holds
    similar lengths, so dynamic padding wastes little, and the order is still random (seeded by epoch)."""
    rng = np.random.default_rng([seed, epoch])
    order = rng.permutation(len(lengths))
    window = batch_size * 50
    batches = []
    for start in range(0, len(order), window):
        chunk = sorted(order[start:start + window], key=lambda i: lengths[i])
        batches += [chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size)]
    return [batches[i] for i in rng.permutation(len(batches))]


def load_task_model(model_dir: str | Path, label_list, spec: TaskSpec, cfg: FinetuneConfig | None):
    tokenizer = load_tokenizer(model_dir)
    overrides: dict[str, Any] = {}
    if cfg is not None:  # training: the head follows the task; eval/predict: the saved head as it is
        overrides = dict(num_labels=heads.family(spec.head).family_class().num_labels(label_list), hidden_dropout_prob=cfg.albert_dropout,
                         attention_probs_dropout_prob=cfg.albert_dropout,
                         classifier_dropout_prob=cfg.classifier_dropout)
        family = heads.family(spec.head)
        if family.has_labels and label_list is not None:
            overrides["label_names"] = label_names_for(spec, label_list)
        if family.problem_type:
            overrides["problem_type"] = family.problem_type
        if spec.head == "span":
            overrides["qa_answerability"] = bool(spec.version_2)
    model = models.MODEL_CLASSES[heads.family(spec.head).model_class].from_pretrained(model_dir, **overrides)
    if model.config.vocab_size != tokenizer.vocab_size:
        raise LitebertError(f"{model_dir}: the model's vocab_size {model.config.vocab_size} does not match its "
                            f"tokenizer's {tokenizer.vocab_size}")
    fresh = model.load_report.get("initialised", [])
    if cfg is None and fresh:  # scoring a random head would print a chance-level number as if it meant something
        raise CheckpointError(f"{model_dir}: the {spec.head} head is newly initialised (no trained weights for "
                              f"{', '.join(fresh)}); this is not a model fine-tuned for {spec.name}. Fine-tune it "
                              f"first (litebert finetune {spec.name} --model {model_dir} ...) and pass that run dir")
    if cfg is not None:
        check_positions(model, cfg.max_seq_length, model_dir)
        model.set_gradient_checkpointing(cfg.gradient_checkpointing)
    return model, tokenizer


def check_positions(model, max_seq_length: int, model_dir) -> None:
    """Refuse before any work a sequence length the position table cannot hold (else: a tensor-size crash)."""
    positions = model.config.max_position_embeddings
    if max_seq_length > positions:
        raise ConfigError(f"--max-seq-length {max_seq_length} (the task's default unless given) exceeds the "
                          f"model's max_position_embeddings {positions} ({model_dir}); pass --max-seq-length "
                          f"{positions} or less")


# --------------------------------------------------------------------------------------------- the loop


def start_health(model, train_feats: list[dict], pad_id: int) -> dict[str, float]:
    """Representation health (litebert.health) of the model about to be fine-tuned, on the first training
    features (multiple-choice [B, C, L] inputs are flattened to [B * C, L])."""
    batch = pad_features(train_feats[:HEALTH_BATCH], pad_id)
    length = batch["input_ids"].shape[-1]
    inputs = {k: batch[k].reshape(-1, length) for k in ("input_ids", "attention_mask", "token_type_ids")}
    return representation_health(model.albert, inputs)


RUN_OUTPUTS = ("metrics.jsonl", "best", "result.json")


def clear_previous_run(out_dir: Path, model_dir: Path, overwrite: bool) -> Path | None:
    """Refuse an --out that already holds a finished fine-tuning run, or with --overwrite remove that run's outputs
    (never the model being fine-tuned: fine-tuning a run's own best/ into the same --out is refused either way).
    An unfinished run (a checkpoint, no result.json: stopped by SIGTERM, --max-time or a crash) is resumed instead:
    its newest complete checkpoint is returned (which one verifies is decided when it is read: newest_verified)."""
    if out_dir.is_dir():
        cleanup_incomplete(out_dir)  # what a save cut short left behind
    found = [name for name in RUN_OUTPUTS if (out_dir / name).exists()]
    found += [p.name for p in checkpoint_dirs(out_dir)] if out_dir.is_dir() else []
    if not found:
        return None
    if not overwrite and not (out_dir / "result.json").exists():
        latest = find_latest_checkpoint(out_dir)
        if latest is not None:
            return latest
    if not overwrite:
        raise ConfigError(f"--out {out_dir} already holds a fine-tuning run ({', '.join(found)}); pass --overwrite "
                          f"to replace it, or choose another --out")
    if any(model_dir.resolve().is_relative_to((out_dir / name).resolve()) for name in found):
        raise ConfigError(f"--model {model_dir} lies inside --out {out_dir}, which --overwrite would delete; "
                          f"choose another --out")
    for name in found:
        path = out_dir / name
        shutil.rmtree(path) if path.is_dir() else path.unlink()


# What a resume restores must equal what the run would have used: a change to any of these would splice two
# recipes into one run (the data order, the schedule, the model). Output-only settings may change.
MAY_CHANGE_ON_RESUME = ("out", "device", "threads", "eval_batch_size", "log_every", "overwrite", "precision",
                        "max_time")


def check_same_recipe(record: Path, cfg: FinetuneConfig) -> None:
    """Refuse to resume a run recorded in `record` (finetune.json) with other settings, naming them."""
    saved = read_json(record, CheckpointError, expect=dict, hint="use a new --out or --overwrite")
    now = dataclasses.asdict(cfg)
    changed = changed_fields(saved, now, [k for k in now if k not in MAY_CHANGE_ON_RESUME])
    if changed:
        raise ConfigError(f"{record}: the unfinished run in {record.parent} was made with " + ", ".join(changed)
                          + "; resume it with its settings, start over with --overwrite, or use another --out")


LOOP_STATE = ("step", "optimizer", "scheduler", "rng", "best", "stale", "epoch", "queue")


def save_loop_state(out_dir: Path, step: int, model, optimizer, scheduler, loop: dict) -> None:
    """checkpoint-STEP/ (atomic, the one before it removed): the weights and everything the loop needs to go on
    exactly as if it had not stopped (optimizer, schedule, every RNG, epoch and the rest of its batch order, best
    score)."""
    state = {"step": step, "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
             "rng": rng_state(), "best": loop["best"], "stale": loop["stale"], "epoch": loop["epoch"],
             "queue": [[int(i) for i in batch] for batch in loop["queue"]]}
    save_run_checkpoint(out_dir, step, model_files(model, "litebert"), state, keep=1)


def read_loop_state(out_dir: Path, model, optimizer, scheduler) -> tuple[Path, dict]:
    """Put the newest checkpoint that verifies into place (weights, optimizer, schedule, RNG); return it and the
    loop's own state."""
    found = newest_verified(out_dir, "litebert finetune")
    if found is None:
        raise CheckpointError(f"{out_dir}: its checkpoint vanished before it could be read; run again")
    ckpt, state, weights = found
    check_state_keys(ckpt, state, LOOP_STATE, "a litebert fine-tuning state")
    restore_training(ckpt, state, weights, model, optimizer, scheduler,
                     hint="start over with --overwrite or use another --out")
    restore_rng(state["rng"])
    return ckpt, state


def save_best(model, tokenizer, out_dir: Path, eval_metrics: dict, training: Training | None = None) -> None:
    """best/ as a whole: weights, tokenizer, model card and eval_metrics.json are written into a temporary sibling
    and swapped in, so a failed save (a full disk) leaves the previous best/ complete, never weights and metrics of
    different steps or a best/ without its tokenizer."""
    tmp = out_dir / f".best.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        model.save_pretrained(tmp, tokenizer=tokenizer)
        write_model_card(tmp, training, location=out_dir / "best", parameters=model.encoder_parameters())  # the run's card, named for where it lands
        _write_json(tmp / "eval_metrics.json", eval_metrics)
        fsync_dir(tmp)
        aside = move_into_place(tmp, out_dir / "best")
        fsync_dir(out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)


@holding_run_dir(lambda cfg: cfg.out)
def finetune(cfg: FinetuneConfig) -> dict[str, Any]:
    spec = resolve_task(cfg)
    cfg = dataclasses.replace(cfg, model=str(resolve_model_dir(cfg.model)))
    resume = clear_previous_run(Path(cfg.out), Path(cfg.model), cfg.overwrite)
    check_dev_source(spec, cfg)
    train = read_split(spec, cfg, "train", limit=cfg.max_train_examples)
    if not train:
        raise DataFormatError(f"{cfg.data}: no training examples")
    # A subset (--max-train-examples) or a folder far smaller than the official set: the paper's step count, sized
    # for the full set, would mean hundreds of epochs, so the schedule is in epochs.
    subset = len(train) < train.available or not spec.hparams.sized_for(train.available)
    cfg = resolve_hparams(cfg, spec, subset=subset)
    torch.manual_seed(cfg.seed)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    device = pick_device(cfg.device)
    precision = resolve_precision(cfg.precision, device)
    out_dir = Path(cfg.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    if resume is not None:
        check_same_recipe(out_dir / "finetune.json", cfg)
    _write_json(out_dir / "finetune.json", dataclasses.asdict(cfg))

    label_list = label_list_for(spec, train) if heads.family(spec.head).has_labels else None
    dev_split = spec.eval_splits[0]
    dev = read_split(spec, cfg, dev_split, label_list=label_list, limit=cfg.max_eval_examples)
    model, tokenizer = load_task_model(cfg.model, label_list, spec, cfg)
    record = record_for(spec, cfg, label_list, precision)
    model.identity = identity_dict(record)  # saved beside the weights of best/
    if cfg.reinit_pooler:
        if model.albert.pooler is None:
            raise ConfigError(f"--reinit-pooler: {cfg.model} has no pooler")
        model.albert.pooler.apply(model._init_module)  # drawn from the seeded RNG: reproducible per --seed
    model.to(device)
    # The prediction path of the family (litebert.families), over the live model: training's dev scores are
    # computed exactly as `evaluate` computes them on the saved model.
    family = heads.family(spec.head)
    fam = family.family_class()(record, tokenizer, TorchRunner(model, family.fields, device, precision),
                                cfg.eval_batch_size, label_list)
    train_feats = fam.encode(train)
    health = start_health(model, train_feats, tokenizer.pad_id)
    if is_collapsed(health):
        warn_collapsed(health, f"--model {cfg.model}")
    dev_feats = fam.encode(dev)

    per_step, accum = cfg.batch_size, cfg.batch_size // cfg.micro_batch_size
    steps = cfg.steps or max(1, math.ceil(cfg.epochs * len(train_feats) / per_step))
    print(start_line(cfg, spec, train, dev, len(train_feats), steps, precision, subset), file=sys.stderr,
          flush=True)
    optimizer = build_optimizer(model, cfg.optimizer, lr=cfg.lr, weight_decay=cfg.weight_decay)
    scheduler = make_scheduler(optimizer, warmup_for(cfg, steps), steps)
    eval_every = cfg.eval_every or max(1, math.ceil(len(train_feats) / per_step))
    lengths = [feature_length(f) for f in train_feats]
    best: dict[str, Any] = {"score": -math.inf}
    stale, epoch, queue, step, stop = 0, 0, [], 0, ""
    if resume is not None:
        resume, state = read_loop_state(out_dir, model, optimizer, scheduler)
        best, stale, epoch, queue, step = (state["best"], state["stale"], state["epoch"], state["queue"],
                                           state["step"])
        truncate_metrics(out_dir / "metrics.jsonl", step)
        say(f"resumed from {resume} at step {step}")
    log = (out_dir / "metrics.jsonl").open("a" if resume is not None else "w")
    # --report-to: the records below also go to the trackers, with the run record (finetune.json) as parameters
    trackers = Trackers(parse_report_to(cfg.report_to), out_dir, "finetune", dataclasses.asdict(cfg))
    bar = _progress(steps, cfg.log_every)
    t0 = time.perf_counter()
    with TermSignal() as term:  # SIGTERM: finish the step, save a checkpoint, stop
        while step < steps:
            model.train()
            for _ in range(accum):
                if not queue:
                    queue, epoch = length_grouped_batches(lengths, cfg.micro_batch_size, cfg.seed, epoch), epoch + 1
                batch = pad_features([train_feats[i] for i in queue.pop()], tokenizer.pad_id)
                inputs = {k: batch[k].to(device) for k in fam.model_keys}
                targets = {k: v.to(device) for k, v in fam.targets(batch).items()}
                with autocast(precision, device):
                    loss = model(**inputs, **targets).loss / accum
                loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
            if not math.isfinite(loss.item()) or not math.isfinite(grad_norm.item()):
                raise LitebertError(f"step {step}: non-finite loss {loss.item()} or gradient; lower --lr")
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            scheduler.step()
            step += 1
            if step % cfg.log_every == 0 or step == steps:
                _write(log, trackers, {"step": step, "loss": loss.item() * accum, "lr": scheduler.get_last_lr()[0],
                                       "grad_norm": grad_norm.item(), "epoch": epoch,
                                       "elapsed": time.perf_counter() - t0})
            bar(step, loss.item() * accum, scheduler.get_last_lr()[0], time.perf_counter() - t0)
            if step % eval_every == 0 or step == steps:
                outputs = fam.run(dev_feats)
                metrics = fam.score(dev, dev_feats, outputs, spec)
                score = metrics[spec.main_metric]
                collapsed = fam.collapse(dev, dev_feats, outputs, spec)
                _write(log, trackers, {"step": step, "split": dev_split, **metrics, **collapsed})
                say(f"step {step}: {dev_split} " + " ".join(f"{k}={v:.4f}" for k, v in metrics.items()
                                                           if isinstance(v, float))
                    + f" elapsed={format_seconds(time.perf_counter() - t0)}")
                if collapsed:
                    say(collapse_warning(collapsed, dev_split, step))
                if score > best["score"]:
                    best, stale = {"score": score, "step": step, "metrics": metrics, "collapsed": collapsed}, 0
                    save_best(model, tokenizer, out_dir, {"step": step, "split": dev_split, **metrics, **collapsed},
                              training_record(cfg, spec, len(train), len(dev), step, metrics, collapsed))
                else:
                    stale += 1
                    if cfg.patience and stale >= cfg.patience:
                        say(f"early stop at step {step}: no gain in {stale} evaluations")
                        break
            inject_fault("stop", step, 0)  # (tests: a real SIGTERM arrives while the process is stopped here)
            # --max-time: this session's clock; the schedule stays over `steps`, so stopping changes nothing else
            stop = budget_reached(time.perf_counter() - t0, cfg.max_time, cfg.max_seconds) if step < steps else ""
            if term.received or stop or step % eval_every == 0 or step == steps:  # the last one resumes the run
                save_loop_state(out_dir, step, model, optimizer, scheduler,
                                {"best": best, "stale": stale, "epoch": epoch, "queue": queue})
            if term.received:
                log.close()
                raise sigterm_error(step, out_dir)
            if stop:
                say(stopping_line(step, steps, stop, "the same command with a larger --max-time, or none, goes on"))
                break
    log.close()
    trackers.finish({"best/step": best.get("step"), **{f"best/{k}": v for k, v in best.get("metrics", {}).items()}},
                    step)
    result = {"task": spec.name, "main_metric": spec.main_metric, "best_step": best.get("step"),
              "best": best.get("metrics", {}), "steps": step, "train_examples": len(train),
              "dev_examples": len(dev), "start_health": health}
    if stop:  # unfinished: no result.json, so the same command resumes from the checkpoint just saved
        return {**result, "stopped": stop}
    if best.get("collapsed"):  # the kept model's degenerate answer, for tables that aggregate runs (ablate)
        result["collapse"] = best["collapsed"]
        result["warnings"] = [collapse_warning(best["collapsed"], dev_split, best["step"])]
    _write_json(out_dir / "result.json", result)
    return result


def training_record(cfg: FinetuneConfig, spec: TaskSpec, train_examples: int, dev_examples: int, step: int,
                    metrics: dict[str, float], collapsed: dict) -> Training:
    """What the model card of best/ says: the run's settings and the dev figures of the step it holds."""
    recipe = {k: getattr(cfg, k) for k in ("lr", "batch_size", "epochs", "steps", "warmup_ratio", "warmup_steps",
                                           "optimizer", "weight_decay", "max_seq_length", "precision", "seed")}
    dev = Result(spec.eval_splits[0], spec.name, step, metrics, examples=dev_examples)
    warnings = [collapse_warning(collapsed, dev.split, step)] if collapsed else []
    return Training("finetune", cfg.model, cfg.data, step, recipe, [dev], task=spec.name, examples=train_examples,
                    warnings=warnings)


def run_record(model_dir: str | Path) -> dict:
    """The settings a fine-tuning run recorded (RUN/finetune.json, beside best/), or {} for a bare model dir."""
    path = Path(model_dir)
    for candidate in (path / "finetune.json", path.parent / "finetune.json"):
        if candidate.is_file() and (candidate.parent / "best").is_dir():
            return read_json(candidate, CheckpointError, expect=dict)
    return {}


def record_for(spec: TaskSpec, cfg: FinetuneConfig, label_list, precision: str) -> ModelRecord:
    """What a directory this run saves is (litebert.records.IDENTITY_RECORD, via identity_dict): a copied best/
    answers as the run."""
    custom = ({"format": cfg.format, "text_columns": cfg.text_columns, "label_column": cfg.label_column}
              if spec.name == "custom" else None)
    sentence = heads.family(spec.head).pipeline_task == "text-classification"
    record = ModelRecord(
        task=heads.family(spec.head).pipeline_task, architecture=heads.family(spec.head).model_class,
        head=spec.head, labels=None, max_seq_length=cfg.max_seq_length, finetune_task=spec.name,
        input=("pair" if spec.text_b else "single") if sentence else None,
        label_values=list(label_list) if label_list is not None else None, precision=precision,
        custom=custom, version_2=spec.version_2,
        **({k: getattr(cfg, k) for k in SPAN_SETTINGS} if spec.head == "span" else {}))
    return record


SPAN_SETTINGS = ("doc_stride", "max_query_length", "n_best", "max_answer_length")  # FinetuneConfig = ModelRecord fields


def check_task(spec: TaskSpec, record: ModelRecord, model_dir, allow_mismatch: bool) -> str | None:
    """Refuse to score or predict `spec` with a model fine-tuned for another task (its record says which), unless
    `allow_mismatch`: then the returned note says so, and the output carries it. None: the model's own task."""
    family = heads.family(spec.head)
    what = (f"{model_dir} is a {record.head} model ({record.architecture})"
            + (f" fine-tuned for {record.finetune_task}" if record.finetune_task else "")
            + (f" with labels {record.labels}" if record.labels else ""))
    if record.head != spec.head:  # another head cannot compute this task's outputs at all
        raise ConfigError(f"{what}; task {spec.name} needs a {family.name} model ({family.model_class})")
    trained = record.finetune_task
    if trained is None or trained == spec.name:
        return None
    note = f"{what}, not for {spec.name}"
    if not allow_mismatch:
        raise ConfigError(f"{note}; use a model fine-tuned for {spec.name}, or pass --allow-task-mismatch to run "
                          "it anyway (the output then says so)")
    return f"task mismatch: {note}; its answers use its own labels"


def _scoring_setup(task: str, model_dir: str | Path, data, custom: dict, allow_task_mismatch: bool,
                   precision: str, batch_size: int):
    """(cfg, spec, the family's prediction path over the model, note) for evaluate/predict.

    The model's record (litebert.records: its identity record, or an old run's finetune.json) supplies what was
    not given: a custom task's format and columns, and the lengths it was trained with (max_seq_length, a span
    model's doc stride and answer settings; not the task's defaults, which the model may not even hold), as the
    pipeline reads them. The task asked for is checked against the model's."""
    weights_dir, record = read_record(model_dir)
    saved = record.custom or {}
    if record.identity != "identity record" and record.finetune_task == "custom":  # an old run: its finetune.json
        saved = {k: v for k, v in run_record(model_dir).items() if k in ("format", "text_columns", "label_column")}
    inherited = {k: v for k, v in saved.items() if v is not None and custom.get(k) is None and task == "custom"}
    if task == "custom" and custom.get("head") is None and record.head in ("classification", "regression",
                                                                           "multilabel"):
        inherited["head"] = record.head
    if record.identity != "config":
        inherited |= {k: getattr(record, k) for k in ("max_seq_length", *SPAN_SETTINGS) if custom.get(k) is None}
    custom = {**{k: v for k, v in custom.items() if v is not None}, **inherited}
    cfg = FinetuneConfig(task=task, model=str(model_dir), data=str(data), **custom)
    spec = resolve_task(cfg)
    note = check_task(spec, record, model_dir, allow_task_mismatch)
    device = pick_device(cfg.device)
    model, tokenizer = load_task_model(weights_dir, None, spec, None)
    family = heads.family(spec.head)
    label_list, labels = None, record.labels
    if family.has_labels:
        label_list = record.label_values or model.config.label_names  # old directories: the data's spellings
        labels = model.config.label_names or label_list
    cfg = dataclasses.replace(cfg, max_seq_length=cfg.max_seq_length or spec.hparams.max_seq_length)
    check_positions(model, cfg.max_seq_length, weights_dir)
    precision = resolve_precision(precision, device)
    runner = TorchRunner(for_inference(model, precision, device), family.fields, device)  # no autocast on top
    lengths = {k: getattr(cfg, k) for k in ("max_seq_length", *SPAN_SETTINGS)}
    fam = family.family_class()(dataclasses.replace(record, version_2=spec.version_2, **lengths), tokenizer, runner,
                                batch_size, label_list)
    fam.labels, fam.precision, fam.source = labels, precision, str(model_dir)
    return cfg, spec, fam, note


def evaluate(task: str, model_dir: str | Path, data: str | Path, split: str | None = None,
             precision: str = "auto", batch_size: int = 64, limit: int | None = None,
             allow_task_mismatch: bool = False, **custom) -> dict:
    """Score a fine-tuned model directory on a split (default: the task's dev split)."""
    cfg, spec, fam, note = _scoring_setup(task, model_dir, data, custom, allow_task_mismatch, precision, batch_size)
    split = split or spec.eval_splits[0]
    examples = read_split(spec, cfg, split, label_list=fam.label_list, limit=limit)
    check_labelled(examples, spec, split)
    feats = fam.encode(examples)
    outputs = fam.run(feats)
    collapsed = fam.collapse(examples, feats, outputs, spec)
    if collapsed:
        print(collapse_warning(collapsed, split), file=sys.stderr)
    if note:
        print(f"WARNING: {note}", file=sys.stderr)
    return {"task": spec.name, "split": split, "examples": len(examples), "precision": fam.precision,
            **({"task_mismatch": note} if note else {}), **fam.score(examples, feats, outputs, spec), **collapsed}


def check_labelled(examples, spec: TaskSpec, split: str) -> None:
    """Scoring needs gold answers: a split without them (GLUE test files) is refused, naming the way to go."""
    missing = [ex for ex in examples if not _has_gold(ex)]
    if missing:
        where = getattr(examples, "path", None) or split
        raise DataFormatError(f"{where}: {len(missing)} of {len(examples)} {split} examples have no gold label "
                              f"(a test split?), so there is nothing to score; `litebert predict {spec.name}` "
                              "writes predictions for unlabelled data")


def _has_gold(example) -> bool:
    """A label (sentences, choices) or tags (tokens); span examples always have answers ([] = unanswerable)."""
    for name in ("label", "labels"):
        if hasattr(example, name):
            return getattr(example, name) is not None
    return True


def predict(task: str, model_dir: str | Path, input_path: str | Path | None = None, precision: str = "auto",
            batch_size: int = 64, texts: Sequence[str] | None = None, allow_task_mismatch: bool = False,
            **custom) -> list[dict]:
    """Predictions for a file in the task's format (labels not needed), or for `texts` (sentence tasks; a pair
    as "first\tsecond"), one dict per example, carrying its input text."""
    if (input_path is None) == (texts is None):
        raise ConfigError("predict: give an input file (--input) or texts (--text), one of the two")
    cfg, spec, fam, note = _scoring_setup(task, model_dir, input_path or "", custom, allow_task_mismatch,
                                          precision, batch_size)
    if texts is not None:
        if heads.family(spec.head).pipeline_task != "text-classification":
            raise ConfigError(f"--text works for sentence tasks; {spec.name} ({spec.head}) needs an --input file")
        pair = spec.text_b is not None
        examples = []
        for i, text in enumerate(texts):
            parts = text.split("\t")
            if len(parts) != (2 if pair else 1):
                raise ConfigError(f"--text #{i + 1} {text!r}: task {spec.name} takes "
                                  + ("a pair: the two texts joined by a tab" if pair else "one text (no tab)"))
            examples.append(Example(f"text-{i}", parts[0], parts[1] if pair else None, source=f"--text #{i + 1}"))
    else:
        examples = read_examples(spec, input_path, "test", label_list=fam.label_list)
    # Each row: the example's id and text, then its result in the family's schema (the pipeline's), then which
    # precision gave it and whether the model was run off its task.
    return [{**fam.echo(ex), **result, "precision": fam.precision, **({"task_mismatch": note} if note else {})}
            for ex, result in zip(examples, fam.predict(examples))]


COLLAPSE_ADVICE = "Try another --lr (often lower), more steps, or check the labels"


# Per kind of `Family.collapse` finding: what every prediction is, and what that does to the score.
COLLAPSE_WORDS = {
    "constant": "every {split} prediction{at} is the same number {constant_prediction:.4g}: the regression head has "
                "collapsed to a constant, so the correlations (pearson, spearman) are undefined (NaN: a constant "
                "has no spread) and mse is that of one guess",
    "one tag": "every {split} word{at} is tagged {single_class_prediction!r}: the tagger predicts one tag only, so "
               "entity f1 is 0 while accuracy is that tag's share of the words",
    "no answer": "every {split} answer{at} is empty ({empty_answers} questions): the span head predicts no answer "
                 "at all, so only unanswerable questions score",
    "one option": "every {split} prediction{at} is option {single_option}: the model has collapsed to one option, "
                  "and its accuracy is that option's share of the split",
    "one label set": "every {split} prediction{at} is the label set {single_label_set}: the multi-label head has "
                     "collapsed to one answer",
    "one class": "every {split} prediction{at} is the class {single_class_prediction!r}: the model has collapsed to "
                 "one class, and its score is that class's share of the split",
}


def collapse_warning(collapsed: dict, split: str, step: int | None = None) -> str:
    at = f" at step {step}" if step is not None else ""
    said = COLLAPSE_WORDS[collapsed.get("collapse", "one class")].format(split=split, at=at, **collapsed)
    return f"WARNING: {said}. {COLLAPSE_ADVICE}"


def prediction_collapse(rows: list[dict]) -> str | None:
    """The same finding on predictions (`predict`'s rows, any head): what every row answers, or None."""
    if len(rows) < 2:
        return None
    for key, what in (("label", "the class"), ("labels", "the label set"), ("words", "tagged"),
                      ("answer", "the answer")):
        if key in rows[0]:
            values = ({json.dumps(w["tag"]) for r in rows for w in r[key]} if key == "words"
                      else {json.dumps(r[key]) for r in rows})
            if len(values) == 1:
                return f"every one of the {len(rows)} predictions is {what} {values.pop()}: a collapsed model"
            return None
    if "score" in rows[0] and len({r["score"] for r in rows}) == 1:
        return f"every one of the {len(rows)} predictions is the same number {rows[0]['score']:.4g}: a collapsed model"
    return None


def start_line(cfg: FinetuneConfig, spec: TaskSpec, train, dev, n_features: int, steps: int, precision: str,
               subset: bool) -> str:
    """What this run will do, before it does it: a run's numbers are readable only next to these."""
    per_step = cfg.batch_size
    epochs = steps * per_step / max(n_features, 1)
    if cfg.steps is not None and cfg.epochs is None and spec.hparams.train_steps == cfg.steps:
        why = f"{spec.hparams.source} steps"
    elif subset and cfg.epochs == OUR_DEFAULTS.num_train_epochs and cfg.steps is None:
        held = (f"a subset ({len(train)} of {train.available})" if len(train) < train.available else
                f"{len(train)} rows, far fewer than the {spec.hparams.train_examples} the paper's steps are sized for")
        why = (f"{cfg.epochs:g} epochs: the training set is {held}, so the paper's step count, sized for the full "
               "set, is not used")
    else:
        why = f"{cfg.epochs:g} epochs" if cfg.steps is None else "--steps"
    accum = (f" ({cfg.micro_batch_size} x {cfg.batch_size // cfg.micro_batch_size} accumulation)"
             if cfg.micro_batch_size < cfg.batch_size else "")
    of = f" (of {train.available})" if len(train) < train.available else ""
    return (f"litebert finetune: {spec.name} from {cfg.model}; {len(train)} train examples"
            f"{of}, {len(dev)} dev; {steps} steps = {epochs:.2f} epochs "
            f"({why}); batch {cfg.batch_size}{accum}, lr {cfg.lr:g}, warmup {warmup_for(cfg, steps)} "
            f"steps, max_seq_length {cfg.max_seq_length}, {precision}; " + stop_words(cfg, steps))


def stop_words(cfg: FinetuneConfig, steps: int) -> str:
    """What ends the run, for the start line."""
    if cfg.max_seconds is None:
        return f"stops after step {steps}"
    return (f"stops after step {steps} or at --max-time {cfg.max_time} of this session, whichever comes first "
            "(the schedule stays over the steps)")


def _write(f, trackers: Trackers, record: dict) -> None:
    """One metrics record: a line of metrics.jsonl, and the same figures to the --report-to trackers."""
    clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in record.items()}
    f.write(json.dumps(clean) + "\n")
    f.flush()
    trackers.log(record)


def _write_json(path: Path, obj: dict) -> None:
    """A run record, whole or not at all (a torn finetune.json would refuse the resume; a torn result.json would
    mark a run finished that cannot be read)."""
    text = json.dumps(obj, indent=2, default=str) + "\n"
    atomic_write(path, lambda tmp: tmp.write_text(text))


def _progress(total: int, log_every: int):
    """Per-step update: a tqdm bar on a terminal; otherwise a log line every `log_every` steps (and the last)."""
    if not on_terminal():
        def line(step, loss, lr, elapsed):
            if step % log_every == 0 or step == total:
                say(f"step {step}/{total} loss={loss:.4f} lr={lr:.3g} elapsed={format_seconds(elapsed)} "
                    f"eta={format_seconds(eta(elapsed, step, total - step))}")
        return line
    bar = make_bar(total, desc="finetune")

    def update(step, loss, lr, elapsed):
        bar.update(step - bar.n)
        bar.set_postfix_str(f"loss={loss:.4f} lr={lr:.2g}")
    return update
