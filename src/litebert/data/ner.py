"""CoNLL-style token classification (NER): reading, word -> sub-token features, and back.

File format: one token per line, whitespace-separated columns, the word first and its tag last; blank lines
end sentences; `-DOCSTART-` lines separate documents (counted in `stats["documents"]`, not examples).
Features label only the first sub-token of each word (the others get -100, ignored by the loss);
`align_predictions` reads the prediction at each word's first sub-token, which is what conlleval scores.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Sequence

from litebert.data.examples import Examples, read_lines
from litebert.errors import DataFormatError, where

IGNORE_INDEX = -100


@dataclass
class TokenExample:
    guid: str
    words: list[str]
    labels: list[str] | None  # one tag per word
    source: str = field(default="", compare=False)  # "file:line" of the first word


def read_conll(path: str | Path, labels: Sequence[str] | None = None):
    """Sentences of a CoNLL file as TokenExamples. `labels`: allowed tags (an unknown tag is an error)."""
    path = Path(path)
    allowed = set(labels) if labels is not None else None
    out: list[TokenExample] = []
    words: list[str] = []
    tags: list[str] = []
    start = 0
    documents = 0

    def flush():
        if words:
            out.append(TokenExample(f"{path.name}-{len(out)}", list(words), list(tags), where(path, start)))
            words.clear()
            tags.clear()

    for n, line in read_lines(path):
        fields = line.split()
        if not fields:
            flush()
            continue
        if fields[0] == "-DOCSTART-":
            flush()
            documents += 1
            continue
        if len(fields) < 2:
            raise DataFormatError(f"{where(path, n)}: expected 'word ... tag' (at least 2 columns), got {line!r}")
        if allowed is not None and fields[-1] not in allowed:
            raise DataFormatError(
                f"{where(path, n)}: tag {fields[-1]!r} is not in the label set {sorted(allowed)} "
                "(the training tags); fix the tag or pass a label list that has it"
            )
        if not words:
            start = n
        words.append(fields[0])
        tags.append(fields[-1])
    flush()
    if not out:
        raise DataFormatError(f"{path}: no sentences found")
    stats = {"documents": documents, "sentences": len(out), "tokens": sum(len(e.words) for e in out)}
    return Examples(out, path=path, stats=stats)


def encode_token_examples(
    examples: Sequence[TokenExample], tokenizer, max_seq_length: int, label_list: Sequence[str] | None
) -> list[dict]:
    """[CLS] sub-tokens [SEP] per sentence, unpadded. Keys: input_ids, token_type_ids, attention_mask,
    labels (first sub-token of a word: its tag id; others and specials: -100; absent when unlabelled) and
    word_ids (word index per position, -1 for specials and continuations; used by align_predictions).
    Words that do not fit in max_seq_length are left out (align_predictions tags them "O" and counts them).
    """
    index = {lab: i for i, lab in enumerate(label_list or ())}
    # One batched call for every word of every sentence: words are encoded on their own, which for
    # SentencePiece equals encoding the sentence (pieces never cross spaces) and for WordPiece is BERT's way.
    flat = [w for ex in examples for w in ex.words]
    pieces = tokenizer.encode_ids_batch(flat) if flat else []
    feats, k = [], 0
    budget = max_seq_length - 2
    for ex in examples:
        ids, word_ids, labs = [tokenizer.cls_id], [-1], [IGNORE_INDEX]
        for w, _word in enumerate(ex.words):
            sub = pieces[k + w] or [tokenizer.unk_id]  # a word must keep a position to be predicted
            if len(ids) - 1 + len(sub) > budget:
                break
            ids += sub
            word_ids += [w] + [-1] * (len(sub) - 1)
            if ex.labels is not None:
                tag = ex.labels[w]
                if tag not in index:
                    raise DataFormatError(f"{ex.source}: tag {tag!r} is not in the label list {list(index)}")
                labs += [index[tag]] + [IGNORE_INDEX] * (len(sub) - 1)
        k += len(ex.words)
        ids.append(tokenizer.sep_id)
        word_ids.append(-1)
        labs.append(IGNORE_INDEX)
        f = {"input_ids": ids, "token_type_ids": [0] * len(ids), "attention_mask": [1] * len(ids),
             "word_ids": word_ids}  # fmt: skip
        if ex.labels is not None:
            f["labels"] = labs
        feats.append(f)
    return feats


def align_predictions(
    examples: Sequence[TokenExample], features: Sequence[dict], predictions, label_list: Sequence[str]
) -> tuple[list[list[str]], int]:
    """Per-word predicted tags from per-position predicted ids ([N][L], padding past the feature is ignored).

    Returns (tags per example, number of words that had no position because of truncation; tagged "O").
    """
    out, truncated = [], 0
    for ex, feat, pred in zip(examples, features, predictions, strict=True):
        tags = ["O"] * len(ex.words)
        seen = 0
        for pos, w in enumerate(feat["word_ids"]):
            if w >= 0:
                tags[w] = label_list[int(pred[pos])]
                seen += 1
        truncated += len(ex.words) - seen
        out.append(tags)
    return out, truncated
