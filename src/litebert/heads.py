"""The head families: one row each, and every table the doors use is derived from these rows.

A head family is what a model directory *is*: sentence classification, regression, multi-label, token tagging,
span QA, multiple choice, masked-LM (fill-mask), the pretraining heads, or the bare encoder (embeddings). Each row
holds its one name (the `head` of a task in data/tasks.py and of a model record), the model class it runs, the
outputs an ONNX export of it returns (transformers' names), its label rule, its pipeline / serve task, the name
`export-onnx --task` knows it by, and where its code lives.

Its code (`code`) is one class in one module of litebert/families/, named as "module:Class" and imported on use
(so this module, read by the torch-free ONNX path, imports neither torch nor the code of any head): how examples
become features, how outputs become results in the family's one schema (every door: CLI predict/evaluate/fill-mask,
`litebert.pipeline`, `serve`, ONNX), and for the fine-tuned families targets, scores and collapse findings.

Adding a head family: its model class (model.py), its row here, and one module in litebert/families/ holding the
class the row names (families/choice.py is the pattern: training, scoring, inference and its serve request item),
with its result schema in docs/architecture.md. Everything else (records, fine-tuning, evaluate/predict, pipeline,
serve, export-onnx, the CLI choices) reads the row.

    family("squad1.1")  -> no: that is a task; get_task("squad1.1").head == "span"
    family("span") is family("question-answering") is family("qa") is family("AlbertForQuestionAnswering")
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

from litebert.errors import ConfigError

# Label rules: what a prediction of the family is, in terms of the model's label set.
LABEL_RULES = {
    "one-of": "one label of the model's label set (softmax over num_labels)",
    "number": "a real number (one output, no label set)",
    "subset": "any subset of the label set (one sigmoid per label, > 0.5)",
    "tag-per-word": "one label per word (the first sub-token's)",
    "span": "a span of the context, or '' (SQuAD v2 heads)",
    "option": "the index of one of the item's options",
    "token": "a vocabulary token per [MASK]",
    "none": "no prediction: hidden states",
}


@dataclass(frozen=True)
class HeadFamily:
    name: str  # the one name: TaskSpec.head, ModelRecord.head
    model_class: str  # litebert.model class (transformers' class name)
    pipeline_task: str  # litebert.pipeline / serve task (transformers' pipeline names where they exist)
    export_task: str  # export-onnx --task
    outputs: dict[str, tuple[str | None, ...]]  # ONNX output name -> axis names
    label_rule: str  # a LABEL_RULES key
    code: str | None = None  # "module:Class" of its code (litebert.families); None: no prediction path of its own
    finetuned: bool = False  # fine-tuned through finetune.py (a TaskSpec head)
    problem_type: str | None = None  # config.json problem_type (sequence-classification families)
    attrs: dict[str, str] = field(default_factory=dict)  # ONNX output name -> model output field, where they differ
    choice_axis: bool = False  # inputs are [batch, choice, sequence]
    default_max_length: int = 512  # max_seq_length when a directory records none
    saved_as: tuple[str, ...] = ()  # further saved architectures this family answers for

    @property
    def has_labels(self) -> bool:
        """Its predictions are names from a label set (config.json id2label)."""
        return self.label_rule in ("one-of", "subset", "tag-per-word")

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, self.pipeline_task, self.export_task, self.model_class, *self.saved_as)

    @property
    def fields(self) -> dict[str, str]:
        """Export output name -> the model output field it reads (what a TorchRunner returns)."""
        return {name: self.attrs.get(name, name) for name in self.outputs}

    def family_class(self):
        """The class of its prediction path (litebert.families): a pipeline from strings, and the fine-tuning
        loop's encode/score."""
        return _load(self.code, f"head {self.name!r} has no prediction path")


def _load(path: str | None, missing: str):
    if path is None:
        raise ConfigError(missing)
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


_SEQ = "AlbertForSequenceClassification"
_F = "litebert.families"
_SENTENCE = f"{_F}.sentence:TextClassification"

FAMILIES: tuple[HeadFamily, ...] = (
    HeadFamily("classification", _SEQ, "text-classification", "classification", {"logits": ("batch", None)},
               "one-of", _SENTENCE, True,
               problem_type="single_label_classification"),
    HeadFamily("regression", _SEQ, "text-classification", "classification", {"logits": ("batch", None)},
               "number", _SENTENCE, True, problem_type="regression"),
    HeadFamily("multilabel", _SEQ, "text-classification", "classification", {"logits": ("batch", None)},
               "subset", _SENTENCE, True,
               problem_type="multi_label_classification"),
    HeadFamily("token", "AlbertForTokenClassification", "token-classification", "token-classification",
               {"logits": ("batch", "sequence", None)}, "tag-per-word",
               f"{_F}.token:TokenClassification", True),
    HeadFamily("span", "AlbertForQuestionAnswering", "question-answering", "qa",
               {"start_logits": ("batch", "sequence"), "end_logits": ("batch", "sequence")}, "span",
               f"{_F}.span:QuestionAnswering", True, default_max_length=384),
    HeadFamily("choice", "AlbertForMultipleChoice", "multiple-choice", "multiple-choice",
               {"logits": ("batch", "choice")}, "option", f"{_F}.choice:MultipleChoice", True,
               choice_axis=True),
    HeadFamily("mlm", "AlbertForMaskedLM", "fill-mask", "masked-lm", {"logits": ("batch", "sequence", None)},
               "token", f"{_F}.mlm:FillMask", attrs={"logits": "mlm_logits"}, saved_as=("AlbertForPreTraining",)),
    HeadFamily("pretraining", "AlbertForPreTraining", "fill-mask", "pretraining",
               {"prediction_logits": ("batch", "sequence", None), "sop_logits": ("batch", None)}, "token",
               attrs={"prediction_logits": "mlm_logits"}),
    HeadFamily("base", "AlbertModel", "embeddings", "base",
               {"last_hidden_state": ("batch", "sequence", None), "pooler_output": ("batch", None)}, "none",
               f"{_F}.embeddings:Embeddings", attrs={"last_hidden_state": "sequence_output",
                                                 "pooler_output": "pooled_output"}),
)
BY_NAME: dict[str, HeadFamily] = {f.name: f for f in FAMILIES}

# Derived tables (never written by hand elsewhere).
FINETUNE_HEADS = tuple(f.name for f in FAMILIES if f.finetuned)  # TaskSpec.head values
PIPELINE_TASKS = tuple(dict.fromkeys(f.pipeline_task for f in FAMILIES if f.code))
EXPORT_TASKS = tuple(dict.fromkeys(f.export_task for f in FAMILIES))
PROBLEM_TYPES = {f.problem_type: f.name for f in FAMILIES if f.problem_type}


def family(name: str) -> HeadFamily:
    """The family a name means, in any of its vocabularies: head name, pipeline task, export task, model class.
    A pipeline or export task shared by several families (text-classification) means the first (classification)."""
    if name in BY_NAME:
        return BY_NAME[name]
    for f in FAMILIES:
        if name in f.names:
            return f
    known = sorted({n for f in FAMILIES for n in f.names[:3]})
    raise ConfigError(f"{name!r} is not a head family, pipeline task or export task; known: {', '.join(known)}")


def for_pipeline(task: str) -> HeadFamily:
    if task not in PIPELINE_TASKS:
        raise ConfigError(f"task {task!r} is not one of {', '.join(PIPELINE_TASKS)}")
    return next(f for f in FAMILIES if f.pipeline_task == task)


def for_export(task: str) -> HeadFamily:
    """export-onnx --task: its own names, or any name of a family."""
    return next((f for f in FAMILIES if f.export_task == task), None) or family(task)


def for_saved(architecture: str, problem_type: str | None = None, num_labels: int = 2) -> HeadFamily:
    """The family of a saved model: its architecture, and for sequence classification its problem type."""
    if architecture == _SEQ:
        if problem_type:
            return BY_NAME[PROBLEM_TYPES[problem_type]]
        return BY_NAME["regression" if num_labels == 1 else "classification"]
    return next((f for f in FAMILIES if architecture in (f.model_class, *f.saved_as)), BY_NAME["base"])


def describe() -> list[dict[str, Any]]:
    """The table as rows (docs, the closing note, `litebert heads`-style listings)."""
    return [{"name": f.name, "model_class": f.model_class, "export_outputs": list(f.outputs),
             "label_rule": f.label_rule, "pipeline_task": f.pipeline_task, "export_task": f.export_task}
            for f in FAMILIES]
