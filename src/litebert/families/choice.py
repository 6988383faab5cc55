"""Multiple choice (RACE): the whole head family in one module, as litebert.heads' row names it. The model class is
`AlbertForMultipleChoice` (model.py); each (context, question + option) pair is scored, softmax over the options.

Result schema, at every door: {"answer": the option's index (0-based), "letter": RACE's spelling of it ("A" for
0), "option": its text, "scores": softmax over the options, "truncated_tokens"}."""

from __future__ import annotations

from typing import Annotated

import numpy as np

from litebert.data.race import RaceExample, encode_race, race_accuracy
from litebert.errors import ConfigError
from litebert.families.base import Family, need_dict, need_text, softmax


def option_letter(i: int) -> str:
    """Option i's letter, as RACE writes answers: 0 -> "A" (a served question may have up to 16 options)."""
    return chr(ord("A") + i)


def choice_item(Text, strict):
    """`serve`'s request item: {"context", "question", "options": 2 to 16 texts} (pydantic, built per server)."""
    from pydantic import Field, create_model

    return create_model("ChoiceItem", __config__=strict, context=(Text, ...), question=(Text, ...),
                        options=(Annotated[list[Text], Field(min_length=2, max_length=16)], ...))


class MultipleChoice(Family):
    task = "multiple-choice"
    request = (choice_item, "NoParams")
    warmup = {"context": "warm up", "question": "what?", "options": ["a", "b"]}
    from_request = classmethod(lambda cls, item: item)

    def check(self, item, index):
        item = need_dict(item, ("context", "question", "options"), index)
        options = item["options"]
        if not isinstance(options, list) or len(options) < 2:
            raise ConfigError(f"input {index}: 'options' should be a list of at least 2 strings")
        return (need_text(item["context"], "context", index), need_text(item["question"], "question", index),
                [need_text(o, f"options[{k}]", index) for k, o in enumerate(options)])

    def example(self, item, index):
        context, question, options = item
        return RaceExample(str(index), context, question, options, None, "")

    def echo(self, ex):
        return {"guid": ex.guid}

    def encode(self, examples):
        return encode_race(examples, self.tokenizer, self.record.max_seq_length)

    def group_key(self, feat, length):
        return len(feat["input_ids"]), length  # choices in one batch must be equal in number

    def decode(self, examples, feats, outputs):
        results = []
        for ex, feat, o in zip(examples, feats, outputs):
            probs = softmax(o["logits"])  # [C]
            best = int(probs.argmax())
            results.append({"answer": best, "letter": option_letter(best), "option": ex.options[best],
                            "scores": probs.tolist(), "truncated_tokens": feat["truncated_tokens"]})
        return results

    # training and scoring
    @staticmethod
    def num_labels(label_list) -> int:
        return 1

    def targets(self, batch):
        return {"labels": batch["label"]} if "label" in batch else {}

    def score(self, examples, feats, outputs, spec):
        return race_accuracy(examples, np.stack([o["logits"] for o in outputs]).argmax(-1))

    def collapse(self, examples, feats, outputs, spec):
        picked = {int(np.argmax(o["logits"])) for o in outputs}
        if len(outputs) > 1 and len(picked) == 1:
            return {"collapse": "one option", "single_option": option_letter(picked.pop())}
        return {}
