"""What fine-tuning and scoring set up before the loop: a task's splits, the task model (its head following the
task, or the saved one), the record of what the saved directory is, the model card's training record."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any
from collections.abc import Sequence

import numpy as np

from litebert.collapse import collapse_warning
from litebert.finetune_config import FinetuneConfig
from litebert import heads
from litebert import model as models
from litebert.data.examples import Examples
from litebert.data.tasks import (TaskSpec, label_names_for, pad_features, read_examples, split_path)
from litebert.errors import CheckpointError, ConfigError, LitebertError
from litebert.health import HEALTH_BATCH, representation_health
from litebert.model_card import Result, Training
from litebert.records import ModelRecord
from litebert.tokenizer import load_tokenizer


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


def start_health(model, train_feats: list[dict], pad_id: int) -> dict[str, float]:
    """Representation health (litebert.health) of the model about to be fine-tuned, on the first training
    features (multiple-choice [B, C, L] inputs are flattened to [B * C, L])."""
    batch = pad_features(train_feats[:HEALTH_BATCH], pad_id)
    length = batch["input_ids"].shape[-1]
    inputs = {k: batch[k].reshape(-1, length) for k in ("input_ids", "attention_mask", "token_type_ids")}
    return representation_health(model.albert, inputs)


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


def training_record(cfg: FinetuneConfig, spec: TaskSpec, train_examples: int, dev_examples: int, step: int,
                    metrics: dict[str, float], collapsed: dict) -> Training:
    """What the model card of best/ says: the run's settings and the dev figures of the step it holds."""
    recipe = {k: getattr(cfg, k) for k in ("lr", "batch_size", "epochs", "steps", "warmup_ratio", "warmup_steps",
                                           "optimizer", "weight_decay", "max_seq_length", "precision", "seed")}
    dev = Result(spec.eval_splits[0], spec.name, step, metrics, examples=dev_examples)
    warnings = [collapse_warning(collapsed, dev.split, step)] if collapsed else []
    return Training("finetune", cfg.model, cfg.data, step, recipe, [dev], task=spec.name, examples=train_examples,
                    warnings=warnings)
