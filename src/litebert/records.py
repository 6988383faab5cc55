"""What a model directory says about itself: its config, its head, and the task it was fine-tuned for.

Inference reads everything it needs from these records, so a user never repeats a flag the training run
already set. Sources, first found wins:
- `inference.json` beside an exported `model.onnx` (written by `export-onnx`; a self-contained directory);
- otherwise `config.json` (architecture, labels, problem type, SQuAD v2 head, positions) plus, for a
  fine-tuning run, `finetune.json` (task name, max_seq_length, doc stride, answer-length limits).

A run directory means the checkpoint `rundir.resolve_model_dir` picks for every `--model` (a fine-tuning run's
`best/`, a pretraining run's newest complete checkpoint). No torch here: the ONNX path imports this.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from litebert.config import AlbertConfig, dataclass_from_dict
from litebert.errors import CheckpointError, ConfigError
from litebert.files import read_json
from litebert.rundir import resolve_model_dir

CONFIG_NAME = "config.json"
FINETUNE_RECORD = "finetune.json"
INFERENCE_RECORD = "inference.json"

# Pipeline task per saved architecture; "embeddings" works on any directory (the encoder alone).
ARCHITECTURE_TASKS = {
    "AlbertForSequenceClassification": "text-classification",
    "AlbertForTokenClassification": "token-classification",
    "AlbertForQuestionAnswering": "question-answering",
    "AlbertForMultipleChoice": "multiple-choice",
    "AlbertForMaskedLM": "fill-mask",
    "AlbertForPreTraining": "fill-mask",
    "AlbertModel": "embeddings",
}
PROBLEM_HEADS = {"regression": "regression", "multi_label_classification": "multilabel",
                 "single_label_classification": "classification"}


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
        fields = {k: v for k, v in data.items() if k not in ("format", "architecture")}
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


@dataclass
class ModelRecord:
    """Everything inference needs to know about a model directory besides its weights and tokenizer."""

    task: str  # pipeline task (ARCHITECTURE_TASKS values)
    architecture: str
    head: str  # classification | regression | multilabel | token | span | choice | mlm | base
    labels: list[str] | None
    max_seq_length: int
    finetune_task: str | None = None  # e.g. "sst-2", "squad2.0", "custom"
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
    run = _finetune_settings(weights_dir)
    head = _head(architecture, config)
    version_2 = bool(config.qa_answerability)
    finetune_task = run.get("task")
    if finetune_task and finetune_task != "custom":
        from litebert.data.tasks import get_task

        try:
            version_2 = version_2 or get_task(finetune_task).version_2
        except ConfigError:
            pass  # a task this version does not know: the config alone decides
    default_length = 384 if head == "span" else 512
    record = ModelRecord(
        task=ARCHITECTURE_TASKS.get(architecture, "embeddings"), architecture=architecture, head=head,
        labels=list(config.label_names) if config.label_names else _default_labels(head, config),
        max_seq_length=min(run.get("max_seq_length") or default_length, config.max_position_embeddings),
        finetune_task=finetune_task, version_2=version_2,
        **{k: run[k] for k in ("doc_stride", "max_query_length", "n_best", "max_answer_length") if run.get(k)})
    return weights_dir, record


def _finetune_settings(weights_dir: Path) -> dict:
    """finetune.json of the run that wrote `weights_dir` (its own folder or, for run/best, the run folder)."""
    for folder in (weights_dir, weights_dir.parent):
        if (folder / FINETUNE_RECORD).is_file() and (folder == weights_dir or weights_dir.name == "best"):
            return read_json_object(folder / FINETUNE_RECORD)
    return {}


def _head(architecture: str, config: AlbertConfig) -> str:
    if architecture == "AlbertForSequenceClassification":
        if config.problem_type:
            return PROBLEM_HEADS[config.problem_type]
        return "regression" if config.num_labels == 1 else "classification"
    return {"AlbertForTokenClassification": "token", "AlbertForQuestionAnswering": "span",
            "AlbertForMultipleChoice": "choice", "AlbertForMaskedLM": "mlm",
            "AlbertForPreTraining": "mlm"}.get(architecture, "base")


def _default_labels(head: str, config: AlbertConfig) -> list[str] | None:
    if head in ("classification", "multilabel", "token"):
        return [f"LABEL_{i}" for i in range(config.num_labels)]
    return None
