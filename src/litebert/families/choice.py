"""Multiple choice (RACE): the whole head family in one module, as litebert.heads' row names it.

Training and scoring (`ChoiceKind`: features, targets, accuracy, collapse, predictions) and inference from strings
(`MultipleChoice`: check an item, features, decode, its `serve` request model). The model class is
`AlbertForMultipleChoice` (model.py). No torch here: the ONNX pipeline path imports this module.
"""

from __future__ import annotations

from typing import Annotated

import numpy as np

from litebert.data.race import RaceExample, encode_race, race_accuracy
from litebert.errors import ConfigError
from litebert.kinds import Kind
from litebert.pipelines import Pipeline, _need_dict, _need_text, _softmax


def option_letter(i: int) -> str:
    """Option i's letter, as RACE writes answers: 0 -> "A" (a served question may have up to 16 options)."""
    return chr(ord("A") + i)


class ChoiceKind(Kind):
    def num_labels(self, label_list) -> int:
        return 1

    def encode(self, examples, tokenizer, spec, cfg, label_list):
        return encode_race(examples, tokenizer, cfg.max_seq_length)

    def targets(self, batch):
        return {"labels": batch["label"]} if "label" in batch else {}

    def score(self, examples, features, outputs, spec, label_list):
        return race_accuracy(examples, np.stack(outputs).argmax(-1))

    def collapse(self, examples, features, outputs, spec, label_list):
        picked = {int(np.argmax(o)) for o in outputs}
        if len(outputs) > 1 and len(picked) == 1:
            return {"collapse": "one option", "single_option": option_letter(picked.pop())}
        return {}

    def predictions(self, examples, features, outputs, spec, label_list):
        return [{"guid": ex.guid, "answer": option_letter(int(np.argmax(o)))} for ex, o in zip(examples, outputs)]


def choice_item(Text, strict):
    """`serve`'s request item: {"context", "question", "options": 2 to 16 texts} (pydantic, built per server)."""
    from pydantic import Field, create_model

    return create_model("ChoiceItem", __config__=strict, context=(Text, ...), question=(Text, ...),
                        options=(Annotated[list[Text], Field(min_length=2, max_length=16)], ...))


class MultipleChoice(Pipeline):
    task = "multiple-choice"
    request = (choice_item, "NoParams")
    warmup = {"context": "warm up", "question": "what?", "options": ["a", "b"]}
    from_request = classmethod(lambda cls, item: item)

    def check(self, item, index):
        item = _need_dict(item, ("context", "question", "options"), index)
        options = item["options"]
        if not isinstance(options, list) or len(options) < 2:
            raise ConfigError(f"input {index}: 'options' should be a list of at least 2 strings")
        return (_need_text(item["context"], "context", index), _need_text(item["question"], "question", index),
                [_need_text(o, f"options[{k}]", index) for k, o in enumerate(options)])

    def features(self, items):
        examples = [RaceExample(str(i), c, q, opts, None, "") for i, (c, q, opts) in enumerate(items)]
        return encode_race(examples, self.tokenizer, self.record.max_seq_length)

    def group_key(self, feat, length):
        return len(feat["input_ids"]), length  # choices in one batch must be equal in number

    def decode(self, items, feats, outputs):
        results = []
        for (_, _, options), feat, o in zip(items, feats, outputs):
            probs = _softmax(o["logits"])
            best = int(probs.argmax())
            results.append({"answer": best, "option": options[best], "scores": probs.tolist(),
                            "truncated_tokens": feat["truncated_tokens"]})
        return results
