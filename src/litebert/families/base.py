"""`Family`: the one prediction path every head family's class (one module each in litebert.families) fills in.

    examples --encode--> features --run (a runner: torch or ONNX)--> per-feature outputs --decode--> results

`litebert.pipeline` reaches it from strings (`check` an item, `example` from it), CLI predict/evaluate from a
task's files (the data readers' examples), fine-tuning's dev evaluation from its live model: the same encode, run
and decode, so a family's result schema is one (docs/architecture.md lists them). Training adds `targets`,
`num_labels`, `score` and `collapse`.

A runner maps padded numpy inputs ({"input_ids", "attention_mask", "token_type_ids"}: int64 [B, L], or [B, C, L]
for multiple choice) to numpy float32 outputs under the family's export names (litebert.heads: logits,
start_logits / end_logits, last_hidden_state); litebert.runners holds the two. No torch here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from collections.abc import Sequence

import numpy as np

from litebert.errors import ConfigError

if TYPE_CHECKING:
    from litebert.records import ModelRecord


class Family:
    """Examples -> features -> batched runs -> per-example results, for one head family. Subclasses say how
    examples become features (`encode`) and how per-feature outputs become results (`decode`)."""

    task: str  # its pipeline / serve task (litebert.heads)
    params: tuple[str, ...] = ()  # keyword options of __call__ / predict
    model_keys = ("input_ids", "attention_mask", "token_type_ids")
    # `serve`: the request item and parameter models (serving.request_models names), and one warm-up input
    request: tuple[Any, str] = ("TextItem", "NoParams")
    warmup: Any = "warm up"

    @classmethod
    def from_request(cls, item: dict):
        """A validated `serve` request item -> this family's input form (default: its text)."""
        return item["text"]

    precision = "fp32"  # the precision that answers (pipeline() sets it)
    truncation = "longest_first"
    source = "the model"
    # Results carry `truncated_tokens` (sentence tasks) or `truncated_words` (tagging); a family whose results are
    # bare vectors cannot, so its cuts are announced with a warning instead.
    results_count_truncation = True

    def __init__(self, record: ModelRecord, tokenizer, runner, batch_size: int = 32, label_list=None):
        """label_list: the labels as the task's data spells them, when encoding gold labels (training, scoring);
        results name labels by `labels`, the model's own names (config.json id2label)."""
        self.record, self.tokenizer, self.runner, self.batch_size = record, tokenizer, runner, batch_size
        self.labels, self.label_list = record.labels, label_list

    def what(self) -> str:
        """What the model is, for messages that refuse a request it was not made for."""
        r = self.record
        return (f"{self.source} is a {r.head} model" + (f" fine-tuned for {r.finetune_task}" if r.finetune_task
                                                        else "")
                + (f" on {r.input} inputs" if r.input else "") + f", max_seq_length {r.max_seq_length}")

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(task={self.task!r}, head={self.record.head!r}, "
                f"runner={type(self.runner).__name__})")

    # ------------------------------------------------------------------------------------ the prediction path

    def __call__(self, inputs, **params):
        """One item, or a list of items -> a result, or a list of results (the pipeline / serve door)."""
        single = not isinstance(inputs, list)
        items = [inputs] if single else inputs
        if not items:
            raise ConfigError(f"{self.task}: an empty list of inputs")
        self.check_params(params)
        examples = [self.example(self.check(item, i), i) for i, item in enumerate(items)]
        results = self.predict(examples, **params)
        return results[0] if single else results

    def check_params(self, params: dict) -> None:
        unknown = sorted(set(params) - set(self.params))
        if unknown:
            raise ConfigError(f"{self.task}: unknown option {unknown[0]!r} (options: {', '.join(self.params) or 'none'})")

    def predict(self, examples: list, **params) -> list:
        """Per example, its result in the family's schema: every door ends here."""
        feats = self.encode(examples)
        self.check_truncation(feats)
        return self.decode(examples, feats, self.run(feats, **params), **params)

    def check(self, item, index: int):
        """A request item, checked (a clear error naming the input and field)."""
        return item

    def example(self, item, index: int):
        """A checked item -> the example the family's data code encodes (what a task's file reader yields)."""
        return item

    def echo(self, example) -> dict:
        """What a CLI `predict` row says about its input, before the result (its id and text)."""
        return {}

    def encode(self, examples: list) -> list[dict]:
        raise NotImplementedError

    def decode(self, examples: list, feats: list[dict], outputs: list, **params) -> list:
        raise NotImplementedError

    def check_truncation(self, feats: list[dict]) -> None:
        """truncation="error": refuse inputs that max_seq_length would cut (features count what they dropped);
        otherwise a family whose results cannot say so warns."""
        cut = [(i, f["truncated_tokens"]) for i, f in enumerate(feats) if f.get("truncated_tokens", 0) > 0]
        if cut and self.truncation != "error" and not self.results_count_truncation:
            import warnings

            warnings.warn(f"{self.task}: {len(cut)} of {len(feats)} input(s) cut to the model's max_seq_length "
                          f"{self.record.max_seq_length} ({sum(n for _, n in cut)} tokens dropped; "
                          "truncation='error' refuses instead)", stacklevel=4)
        if self.truncation != "error":
            return
        if cut:
            i, n = cut[0]
            raise ConfigError(f"input {i}: {n} tokens over the model's max_seq_length "
                              f"{self.record.max_seq_length} (truncation='error'; {len(cut)} input(s) too long)")

    def run(self, feats: list[dict], **params) -> list[dict[str, np.ndarray]]:
        """Per feature, its outputs (sliced out of the padded batch), in feature order. Batches hold features of
        similar length (sorted), so padding stays small."""
        from litebert.data.tasks import feature_length, pad_features

        order = sorted(range(len(feats)), key=lambda i: self.group_key(feats[i], feature_length(feats[i])))
        out: list[Any] = [None] * len(feats)
        for start in range(0, len(order), self.batch_size):
            idx = order[start:start + self.batch_size]
            groups = [idx]
            keys = [self.group_key(feats[i], 0) for i in idx]
            if len(set(keys)) > 1:  # multiple choice: one batch per number of options
                groups = [[i for i, k in zip(idx, keys) if k == key] for key in dict.fromkeys(keys)]
            for group in groups:
                batch = pad_features([{k: feats[i][k] for k in self.model_keys} for i in group],
                                     self.tokenizer.pad_id, return_tensors="np")
                for i, o in zip(group, self.reduce(batch, self.runner(batch), **params)):
                    out[i] = o
        return out

    def group_key(self, feat: dict, length: int):
        return length

    def reduce(self, batch: dict, outputs: dict, **params) -> list:
        """Batch outputs -> one entry per row (default: each output's row)."""
        n = len(batch["input_ids"])
        return [{k: v[i] for k, v in outputs.items()} for i in range(n)]

    def embeddings(self):
        """An embeddings pipeline over this model's encoder (same weights, no second copy); PyTorch backends."""
        from litebert import heads

        if self.task == "embeddings":
            return self
        if not hasattr(self.runner, "encoder"):
            raise ConfigError("embeddings from a task's ONNX graph need the 'base' export (pipeline('embeddings', "
                              "dir, 'onnx', onnx_file=...))")
        # the embeddings family's class by its heads row (it subclasses this one: no import of it here)
        embeddings = heads.for_pipeline("embeddings").family_class()
        return embeddings(self.record, self.tokenizer, self.runner.encoder(), self.batch_size)

    # ------------------------------------------------------------------------------------ training and scoring

    @staticmethod
    def num_labels(label_list) -> int:
        return len(label_list)

    def targets(self, batch: dict) -> dict:
        """The loss's inputs in a training batch."""
        return {}

    def score(self, examples, feats, outputs, spec, label_list) -> dict[str, float]:
        raise NotImplementedError

    def collapse(self, examples, feats, outputs, spec, label_list) -> dict:
        """{"collapse": what, ...its detail} when every prediction is the same degenerate answer (one class, a
        constant, one tag, no answer, one option); {} otherwise. litebert.collapse.collapse_warning words it."""
        return {}


def need_text(value, field: str, index: int) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"input {index}: {field!r} should be a string, got {type(value).__name__}")
    if not value.strip():
        raise ConfigError(f"input {index}: {field!r} is empty")
    return value


def need_dict(item, fields: Sequence[str], index: int, optional: Sequence[str] = ()) -> dict:
    if not isinstance(item, dict):
        raise ConfigError(f"input {index}: expected an object with {', '.join(fields)}, got {type(item).__name__}")
    unknown = sorted(set(item) - set(fields) - set(optional))
    if unknown:
        raise ConfigError(f"input {index}: unknown field {unknown[0]!r} (expected {', '.join(fields)})")
    missing = [f for f in fields if f not in item]
    if missing:
        raise ConfigError(f"input {index}: missing field {missing[0]!r}")
    return item


def softmax(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)
