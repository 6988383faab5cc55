"""Sentence classification, regression and multi-label (GLUE, custom CSV/JSONL): one family module, three rows of
litebert.heads. The model class is `AlbertForSequenceClassification` (model.py); its config's problem_type says
which of the three it is. Result schema: `decode_sentence`."""

from __future__ import annotations

from typing import Any
from collections.abc import Sequence

import numpy as np

from litebert.errors import ConfigError
from litebert.families.base import Family, need_dict, need_text, softmax


def decode_sentence(head: str, logits, labels: Sequence[str] | None) -> dict:
    """One sentence's logits [num_labels] -> its answer, in the one schema every door uses:
    classification {"label", "label_id", "score", "scores": {label: p}}; multi-label {"labels", "label_ids",
    "scores"}; regression {"score"}. Labels are the model's names (config.json id2label)."""
    logits = np.asarray(logits, dtype=np.float64)
    if head == "regression":
        return {"score": float(logits[0])}
    if head == "multilabel":
        probs = 1 / (1 + np.exp(-logits))
        ids = [int(i) for i in np.flatnonzero(probs > 0.5)]
        return {"labels": [labels[i] for i in ids], "label_ids": ids, "scores": dict(zip(labels, probs.tolist()))}
    probs = softmax(logits)
    best = int(probs.argmax())
    return {"label": labels[best], "label_id": best, "score": float(probs[best]),
            "scores": dict(zip(labels, probs.tolist()))}


class TextClassification(Family):
    task = "text-classification"
    request = ("PairItem", "NoParams")

    @classmethod
    def from_request(cls, item):
        return item["text"] if item.get("text_pair") is None else (item["text"], item["text_pair"])

    def check(self, item, index):
        if isinstance(item, dict):
            item = need_dict(item, ("text",), index, optional=("text_pair",))
            pair = item.get("text_pair")
            text = need_text(item["text"], "text", index), None if pair is None else need_text(pair, "text_pair",
                                                                                                index)
        elif isinstance(item, tuple):
            if len(item) != 2:
                raise ConfigError(f"input {index}: a pair is a (text, text_pair) tuple, got {len(item)} items")
            text = need_text(item[0], "text", index), need_text(item[1], "text_pair", index)
        else:
            text = need_text(item, "text", index), None
        given = "pair" if text[1] is not None else "single"
        if self.record.input not in (None, given):  # None: an old directory that does not say
            raise ConfigError(f"input {index}: " + ("a text pair" if given == "pair" else "one text")
                              + f", but {self.what()}; send " + ("one text" if given == "pair" else "a pair"))
        return text

    def example(self, item, index):
        from litebert.data.examples import Example

        return Example(str(index), item[0], item[1])

    def echo(self, ex):
        return {"guid": ex.guid, "text": ex.text_a, **({"text_b": ex.text_b} if ex.text_b is not None else {})}

    def encode(self, examples):
        from litebert.data.tasks import encode_examples

        feats: list[Any] = [None] * len(examples)
        for paired in (False, True):  # encode_examples takes all-single or all-pair lists
            idx = [i for i, ex in enumerate(examples) if (ex.text_b is not None) == paired]
            for i, f in zip(idx, encode_examples([examples[i] for i in idx], self.tokenizer,
                                                 self.record.max_seq_length, self.label_list)):
                feats[i] = f
        return feats

    def decode(self, examples, feats, outputs):
        return [{**decode_sentence(self.record.head, o["logits"], self.labels),
                 "truncated_tokens": f.get("truncated_tokens", 0)} for f, o in zip(feats, outputs)]

    # training and scoring
    @staticmethod
    def num_labels(label_list) -> int:
        return 1 if label_list is None else len(label_list)

    def targets(self, batch):
        return {"labels": batch["label"]} if "label" in batch else {}

    def _decide(self, outputs):
        logits = np.stack([o["logits"] for o in outputs])  # [N, num_labels]
        if self.record.head == "regression":
            return logits[:, 0]
        if self.record.head == "multilabel":
            return (logits > 0).astype(int)
        return logits.argmax(-1)

    def score(self, examples, feats, outputs, spec):
        from litebert.metrics import compute_metrics

        gold = [f["label"] for f in feats]
        return compute_metrics(spec.metrics, self._decide(outputs), np.asarray(gold))

    def collapse(self, examples, feats, outputs, spec):
        if len(outputs) < 2:
            return {}
        decided, label_list = self._decide(outputs), self.label_list
        if self.record.head == "regression":  # a constant output: Pearson/Spearman divide by its zero spread (NaN)
            if float(np.ptp(decided)) <= 1e-6 * max(1.0, float(np.abs(decided).max())):
                return {"collapse": "constant", "constant_prediction": float(decided[0])}
            return {}
        if not label_list or len(label_list) < 2 or not (decided == decided[0]).all():
            return {}
        if self.record.head == "multilabel":
            return {"collapse": "one label set",
                    "single_label_set": [label_list[i] for i in np.flatnonzero(decided[0])]}
        return {"collapse": "one class", "single_class_prediction": label_list[int(decided[0])]}
