"""`evaluate` and `predict`: a saved fine-tuned model scored on, or predicting for, a task's files, through its head
family's prediction path (litebert.families: the pipeline's, so every door answers alike)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from collections.abc import Sequence


from litebert.collapse import collapse_warning
from litebert.finetune_config import FinetuneConfig, resolve_task
from litebert.finetune_run import run_record
from litebert.finetune_setup import SPAN_SETTINGS, check_positions, load_task_model, read_split
from litebert import heads
from litebert.data.examples import Example
from litebert.data.tasks import (TaskSpec, read_examples)
from litebert.device import for_inference, pick_device, resolve_precision
from litebert.errors import ConfigError, DataFormatError
from litebert.records import ModelRecord, read_record
from litebert.runners import TorchRunner


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
    pipeline reads them: a saved model's lengths have one home, its record. The task asked for is checked against the model's."""
    weights_dir, record = read_record(model_dir)
    saved = record.custom or {}
    if record.identity != "identity record" and record.finetune_task == "custom":  # an old run: its finetune.json
        saved = {k: v for k, v in run_record(model_dir).items() if k in ("format", "text_columns", "label_column")}
    inherited = {k: v for k, v in saved.items() if v is not None and custom.get(k) is None and task == "custom"}
    if task == "custom" and custom.get("head") is None and record.head in ("classification", "regression",
                                                                           "multilabel"):
        inherited["head"] = record.head
    # The lengths' one home for a saved model is its record (what the pipeline and serve read too): the run's,
    # or for a bare directory its family's default within the position table (records.read_record).
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
