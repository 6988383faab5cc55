"""What a model directory says about itself: its head family, task, labels, lengths and precision.

Inference reads everything it needs from these records, so a user never repeats a flag the training run
already set, and a copied `best/` answers exactly as the run dir does. Sources, first found wins:
- `inference.json` beside an exported `model.onnx` (written by `export-onnx`; a self-contained directory);
- otherwise `config.json` (architecture, label names as `id2label`, problem type, SQuAD v2 head, positions)
  plus the identity record `litebert.json` saved beside the weights by every save of a fine-tuned model
  (task, single or pair input, the label values of the data, trained max_seq_length, doc stride, answer
  limits, the precision it was evaluated at);
- a directory saved before the identity record existed: a fine-tuning run's `finetune.json` beside `best/`.

A run directory means the checkpoint `rundir.resolve_model_dir` picks for every `--model` (a fine-tuning run's
`best/`, a pretraining run's newest complete checkpoint). No torch here: the ONNX path imports this.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from litebert import heads
from litebert.config import LITEBERT_DIR_KEYS, AlbertConfig, dataclass_from_dict
from litebert.errors import CheckpointError, ConfigError
from litebert.files import read_json
from litebert.rundir import resolve_model_dir

CONFIG_NAME = "config.json"
FINETUNE_RECORD = "finetune.json"
INFERENCE_RECORD = "inference.json"
IDENTITY_RECORD = "litebert.json"  # beside the weights of every fine-tuned model directory
# The identity fields a fine-tuning run records (IDENTITY_RECORD); the rest of ModelRecord comes from config.json.
IDENTITY_FIELDS = ("finetune_task", "input", "label_values", "max_seq_length", "doc_stride", "max_query_length",
                   "n_best", "max_answer_length", "version_2", "precision", "custom")


def read_json_object(path: Path) -> dict:
    """A JSON object from a model directory's file; anything else is a CheckpointError naming the file."""
    return read_json(path, CheckpointError, f"not found; is {path.parent} a model directory?", expect=dict)


def read_model_config(path: str | Path) -> tuple[AlbertConfig, str]:
    """(config, format) of a model directory."""
    config_path = Path(path) / CONFIG_NAME
    data = read_json_object(config_path)
    if data.get("model_type") == "albert":
        config, fmt = AlbertConfig.from_hf_dict(data, source=str(config_path)), "hf"
    elif data.get("format") == "litebert":
        fields = {k: v for k, v in data.items() if k not in LITEBERT_DIR_KEYS}
        config, fmt = AlbertConfig.from_dict(fields, source=str(config_path)), "litebert"
    else:
        raise CheckpointError(f"{config_path}: neither a Hugging Face ALBERT config (model_type 'albert') nor a "
                              "litebert one; for an official albert_config.json use `litebert convert`")
    from litebert.memory import check_model_memory

    check_model_memory(config, str(config_path))  # every loader passes here before it builds the model
    return config, fmt


def saved_architecture(path: str | Path) -> str:
    """The class a model directory was saved from ("AlbertModel" when config.json does not say)."""
    data = read_json_object(Path(path) / CONFIG_NAME)
    names = data.get("architectures") or [data.get("architecture") or "AlbertModel"]
    return str(names[0])


def model_name(weights_dir: str | Path) -> str:
    """A model directory's name, as its model card and `serve`'s v2 endpoints give it: runs/sst2/best ->
    "sst2-best" (a run's best/ or final/ is named with its run), any other directory its own name."""
    leaf = Path(weights_dir).resolve()
    return f"{leaf.parent.name}-{leaf.name}" if leaf.name in ("best", "final") else leaf.name


@dataclass
class ModelRecord:
    """Everything inference needs to know about a model directory besides its weights and tokenizer."""

    task: str  # pipeline task (heads.PIPELINE_TASKS)
    architecture: str
    head: str  # a heads.FAMILIES name: classification | regression | multilabel | token | span | choice | mlm | base
    labels: list[str] | None  # label names, in id order (config.json id2label)
    max_seq_length: int
    finetune_task: str | None = None  # e.g. "sst-2", "squad2.0", "custom"
    input: str | None = None  # "single" or "pair" (sentence tasks); None: unknown (an old directory) or n/a
    label_values: list[str] | None = None  # the labels as the task's data spells them ("0", "1"), in id order
    precision: str | None = None  # the precision the model was evaluated at when saved
    custom: dict | None = None  # a custom task: format, text_columns, label_column
    identity: str = "config"  # where the task facts came from: identity record, run record, or config alone
    version_2: bool = False  # SQuAD v2.0: "no answer" is a possible prediction
    doc_stride: int = 128
    max_query_length: int = 64
    n_best: int = 20
    max_answer_length: int = 30
    onnx_file: str | None = None  # export directories: the graph's file name in it

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict, source: str) -> ModelRecord:
        return dataclass_from_dict(cls, data, source, CheckpointError)


def read_record(model_dir: str | Path) -> tuple[Path, ModelRecord]:
    """(the directory holding the weights, its record). See the module docstring for the sources."""
    weights_dir = resolve_model_dir(model_dir)
    if not weights_dir.is_dir():
        raise CheckpointError(f"{weights_dir}: model directory not found")
    if (weights_dir / INFERENCE_RECORD).is_file():
        path = weights_dir / INFERENCE_RECORD
        return weights_dir, ModelRecord.from_dict(read_json_object(path), str(path))
    config, _ = read_model_config(weights_dir)
    architecture = saved_architecture(weights_dir)
    family = heads.for_saved(architecture, config.problem_type, config.num_labels)
    if (weights_dir / IDENTITY_RECORD).is_file():
        return weights_dir, _from_identity(weights_dir, config, architecture, family)
    run = _finetune_settings(weights_dir)
    head = family.name
    version_2 = bool(config.qa_answerability)
    finetune_task = run.get("task")
    if finetune_task and finetune_task != "custom":
        from litebert.data.tasks import get_task

        try:
            version_2 = version_2 or get_task(finetune_task).version_2
        except ConfigError:
            pass  # a task this version does not know: the config alone decides
    record = ModelRecord(
        task=family.pipeline_task, architecture=architecture, head=head,
        labels=list(config.label_names) if config.label_names else _default_labels(family, config),
        max_seq_length=min(run.get("max_seq_length") or family.default_max_length, config.max_position_embeddings),
        finetune_task=finetune_task, version_2=version_2, identity="run record" if run else "config",
        **{k: run[k] for k in ("doc_stride", "max_query_length", "n_best", "max_answer_length") if run.get(k)})
    return weights_dir, record


def _from_identity(weights_dir: Path, config: AlbertConfig, architecture: str, family) -> ModelRecord:
    path = weights_dir / IDENTITY_RECORD
    data = read_json_object(path)
    unknown = sorted(set(data) - set(IDENTITY_FIELDS) - {"head", "format_version"})
    if unknown:
        raise CheckpointError(f"{path}: unknown field {unknown[0]!r} (known: {', '.join(IDENTITY_FIELDS)})")
    if data.get("head") not in (None, family.name):
        raise CheckpointError(f"{path}: head {data['head']!r}, but config.json is a {family.name} model "
                              f"({architecture}); the directory mixes two models")
    fields = {k: data[k] for k in IDENTITY_FIELDS if data.get(k) is not None}
    fields["max_seq_length"] = min(fields.get("max_seq_length") or family.default_max_length,
                                   config.max_position_embeddings)
    fields["version_2"] = bool(fields.get("version_2") or config.qa_answerability)
    labels = list(config.label_names) if config.label_names else _default_labels(family, config)
    record = ModelRecord(task=family.pipeline_task, architecture=architecture, head=family.name, labels=labels,
                         identity="identity record", **fields)
    if record.label_values is not None and labels is not None and len(record.label_values) != len(labels):
        raise CheckpointError(f"{path}: {len(record.label_values)} label_values for the {len(labels)} labels of "
                              f"config.json")
    return record


def identity_dict(record: ModelRecord) -> dict[str, Any]:
    """The record's task facts as IDENTITY_RECORD holds them (config.json holds the rest)."""
    data = {"head": record.head, **{k: getattr(record, k) for k in IDENTITY_FIELDS}}
    return {k: v for k, v in data.items() if v is not None}


def _finetune_settings(weights_dir: Path) -> dict:
    """finetune.json of the run that wrote `weights_dir` (its own folder or, for run/best, the run folder)."""
    for folder in (weights_dir, weights_dir.parent):
        if (folder / FINETUNE_RECORD).is_file() and (folder == weights_dir or weights_dir.name == "best"):
            return read_json_object(folder / FINETUNE_RECORD)
    return {}


def _default_labels(family, config: AlbertConfig) -> list[str] | None:
    if family.has_labels:
        return [f"LABEL_{i}" for i in range(config.num_labels)]
    return None
