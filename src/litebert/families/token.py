"""Token tagging (CoNLL NER): the whole head family in one module. The model class is
`AlbertForTokenClassification` (model.py). A word's tag and score come from its first sub-token, as in training.

Result schema, at every door: {"words": [{"word", "start", "end", "tag", "score"}], "entities": [{"entity",
"text", "start", "end", "score"}], "truncated_words": N}; offsets are characters of the input text (a CoNLL
file's sentence reads as its words joined by single spaces). Words past max_seq_length have no position: they are
left out of "words", and counted in "truncated_words"."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from litebert.data.ner import TokenExample, align_predictions, encode_token_examples
from litebert.families.base import Family, need_text, softmax

WORD_RE = re.compile(r"\w+|[^\w\s]")  # how a text is cut into words: \w+ runs and single punctuation marks


@dataclass
class TextWords(TokenExample):
    """A text cut into words, with each word's (start, end) character span."""
    text: str = ""
    spans: list[tuple[int, int]] = field(default_factory=list)


def text_words(ex: TokenExample) -> tuple[str, list[tuple[int, int]]]:
    """The text an example's words come from, and their spans (a file's words: joined by single spaces)."""
    if isinstance(ex, TextWords):
        return ex.text, ex.spans
    spans, at = [], 0
    for w in ex.words:
        spans.append((at, at + len(w)))
        at += len(w) + 1
    return " ".join(ex.words), spans


def entities(text: str, tagged: list[dict]) -> list[dict]:
    """Group word tags into entity spans with conlleval's chunk rules (IOB1, IOB2 and IOBES alike)."""
    from litebert.metrics import _split_tag, chunk_end, chunk_start

    spans: list[dict] = []
    prev, prev_type, current = "O", "", None
    for word in [*tagged, None]:
        tag, type_ = _split_tag(word["tag"]) if word else ("O", "")
        if current is not None and chunk_end(prev, tag, prev_type, type_):
            spans.append(current)
            current = None
        if word and chunk_start(prev, tag, prev_type, type_):
            current = {"entity": type_, "start": word["start"], "end": word["end"], "scores": []}
        if current is not None and word:
            current["end"] = word["end"]
            current["scores"].append(word["score"])
        prev, prev_type = tag, type_
    return [{"entity": s["entity"], "text": text[s["start"]:s["end"]], "start": s["start"], "end": s["end"],
             "score": float(np.mean(s["scores"]))} for s in spans]


class TokenClassification(Family):
    task = "token-classification"

    def check(self, item, index):
        return need_text(item, "text", index)

    def example(self, text, index):
        found = list(WORD_RE.finditer(text))
        return TextWords(str(index), [m.group() for m in found], None, text=text,
                         spans=[(m.start(), m.end()) for m in found])

    def echo(self, ex):
        return {"guid": ex.guid}

    def encode(self, examples):
        return encode_token_examples(examples, self.tokenizer, self.record.max_seq_length, self.label_list)

    def decode(self, examples, feats, outputs):
        results = []
        for ex, feat, o in zip(examples, feats, outputs):
            text, spans = text_words(ex)
            probs = softmax(o["logits"][: len(feat["input_ids"])])  # [L, num_labels]
            tagged = []
            for pos, w in enumerate(feat["word_ids"]):
                if w >= 0:  # a word's first sub-token
                    best = int(probs[pos].argmax())
                    tagged.append({"word": ex.words[w], "start": spans[w][0], "end": spans[w][1],
                                   "tag": self.labels[best], "score": float(probs[pos, best])})
            results.append({"words": tagged, "entities": entities(text, tagged),
                            "truncated_words": len(ex.words) - len(tagged)})
        return results

    # training and scoring
    def targets(self, batch):
        return {"labels": batch["labels"]} if "labels" in batch else {}

    def _tags(self, examples, feats, outputs):
        return align_predictions(examples, feats, [o["logits"].argmax(-1) for o in outputs], self.label_list)

    def score(self, examples, feats, outputs, spec):
        from litebert.metrics import conlleval

        tags, truncated = self._tags(examples, feats, outputs)
        result = conlleval([ex.labels for ex in examples], tags)
        return {k: v for k, v in result.items() if isinstance(v, (int, float))} | {"truncated_words": truncated}

    def collapse(self, examples, feats, outputs, spec):
        tags, _ = self._tags(examples, feats, outputs)
        seen = {t for row in tags for t in row}
        if len(seen) == 1 and sum(map(len, tags)) > 1 and self.label_list and len(self.label_list) > 1:
            return {"collapse": "one tag", "single_class_prediction": seen.pop()}
        return {}
