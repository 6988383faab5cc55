"""A fine-tuning run's settings: `FinetuneConfig` (library, CLI flags and --config alike) and how the unset ones
are filled from the task (paper Table 14 where it has them)."""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass


from litebert.config import (ABOVE_ZERO, FRACTION, LEARNING_RATE, NON_NEGATIVE, POSITIVE, at_least, check_options,
                             closed, option)
from litebert.data.tasks import (OUR_DEFAULTS, TaskSpec, custom_task, get_task)
from litebert.device import AUTO_PRECISION_HELP, PRECISIONS
from litebert.errors import ConfigError
from litebert.runlife import (parse_duration)
from litebert.tracking import REPORT_TO_HELP, parse_report_to


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
