"""RACE multiple-choice reading comprehension: reading the original layout and the official features.

Layout: {train,dev,test}/{high,middle}/*.txt, each file one JSON object with article, questions, options
(4 per question), answers ('A'-'D') and id. Features (as google-research/albert race_utils): for each
option, the question with "_" replaced by the option (else "question option"), keeping its LAST
max_qa_length tokens; then [CLS] passage [SEP] qa [SEP], the passage cut to fit max_seq_length.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Sequence

import numpy as np

from litebert.data.examples import Examples
from litebert.errors import DataFormatError
from litebert.files import read_json

LEVELS = ("middle", "high")
NUM_CHOICES = 4


@dataclass
class RaceExample:
    guid: str  # "<file id>-<question index>"
    article: str
    question: str
    options: list[str]
    label: int | None  # 0..3 from 'A'..'D'
    level: str  # "middle" | "high"
    source: str = field(default="", compare=False)


def _race_files(path: Path) -> list[tuple[Path, str | None]]:
    if path.is_file():
        return [(path, None)]
    levels = [lv for lv in LEVELS if (path / lv).is_dir()]
    if levels:  # a split folder: middle then high
        return [(f, lv) for lv in levels for f in sorted((path / lv).glob("*.txt"))]
    return [(f, path.name if path.name in LEVELS else None) for f in sorted(path.glob("*.txt"))]


def read_race(path: str | Path) -> Examples:
    """Questions of a split folder (with high/ and middle/), a level folder, or one file.
    stats: passages, questions, and per level passages_<level> / questions_<level>."""
    path = Path(path)
    files = _race_files(path)
    if not files:
        raise DataFormatError(f"{path}: no RACE *.txt files (expected <split>/high/*.txt and <split>/middle/*.txt)")
    out: list[RaceExample] = []
    stats = {"passages": 0, "questions": 0}
    for f, level in files:
        obj = read_json(f, DataFormatError, expect=dict, what="a RACE JSON object",
                        hint="a RACE file holds one JSON object with article, questions, options and answers")
        for key, kind in (("article", str), ("questions", list), ("options", list), ("answers", list)):
            if key not in obj:
                raise DataFormatError(f"{f}: no field {key!r}")
            if not isinstance(obj[key], kind):
                raise DataFormatError(f"{f}: field {key!r} should be a {kind.__name__}, got {type(obj[key]).__name__}")
        qs, opts, answers = obj["questions"], obj["options"], obj["answers"]
        if not len(qs) == len(opts) == len(answers):
            raise DataFormatError(f"{f}: {len(qs)} questions, {len(opts)} option lists, {len(answers)} answers")
        file_id = str(obj.get("id", f.name))
        level = level or ("high" if file_id.startswith("high") else "middle" if file_id.startswith("middle") else "")
        for q, (question, options, answer) in enumerate(zip(qs, opts, answers)):
            if not isinstance(question, str):
                raise DataFormatError(f"{f}: question {q} should be a string, got {type(question).__name__}")
            if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
                raise DataFormatError(f"{f}: question {q}: options should be a list of strings, got {options!r}")
            if len(options) != NUM_CHOICES:
                raise DataFormatError(f"{f}: question {q} has {len(options)} options, expected {NUM_CHOICES}")
            if answer not in ("A", "B", "C", "D"):
                raise DataFormatError(f"{f}: question {q}: answer {answer!r} is not one of A-D")
            label = ord(answer) - ord("A")
            out.append(RaceExample(f"{file_id}-{q}", obj["article"], question, list(options), label, level, str(f)))
        stats["passages"] += 1
        stats["questions"] += len(qs)
        stats[f"passages_{level}"] = stats.get(f"passages_{level}", 0) + 1
        stats[f"questions_{level}"] = stats.get(f"questions_{level}", 0) + len(qs)
    return Examples(out, path=path, stats=stats)


def qa_text(question: str, option: str) -> str:
    """The official question+option text: fill the blank when there is one, else append the option."""
    return question.replace("_", option) if "_" in question else f"{question} {option}"


def encode_race(
    examples: Sequence[RaceExample], tokenizer, max_seq_length: int = 512, max_qa_length: int = 128
) -> list[dict]:
    """Per question: input_ids/token_type_ids/attention_mask as [C][L_c] lists (unpadded; C = its number of
    options, 4 in RACE), label, level, and truncated_tokens: the most tokens any option's sequence lost (the
    passage's end past max_seq_length, the question+option's start past max_qa_length)."""
    qa_texts = [qa_text(ex.question, opt) for ex in examples for opt in ex.options]
    qa_ids = tokenizer.encode_ids_batch(qa_texts) if qa_texts else []
    passages: dict[str, list[int]] = {}
    feats = []
    first = 0  # index in qa_ids of this question's first option
    for ex in examples:
        if ex.article not in passages:
            passages = {ex.article: tokenizer.encode_ids(ex.article)}  # questions of a passage are adjacent
        passage = passages[ex.article]
        f = {"input_ids": [], "token_type_ids": [], "attention_mask": [], "truncated_tokens": 0}
        for c in range(len(ex.options)):
            qa = qa_ids[first + c][-max_qa_length:] if max_qa_length > 0 else []
            ctx = passage[: max(0, max_seq_length - 3 - len(qa))]
            cut = len(qa_ids[first + c]) - len(qa) + len(passage) - len(ctx)
            f["truncated_tokens"] = max(f["truncated_tokens"], cut)
            ids = [tokenizer.cls_id, *ctx, tokenizer.sep_id, *qa, tokenizer.sep_id]
            f["input_ids"].append(ids)
            f["token_type_ids"].append([0] * (len(ctx) + 2) + [1] * (len(qa) + 1))
            f["attention_mask"].append([1] * len(ids))
        if ex.label is not None:
            f["label"] = ex.label
        f["level"] = ex.level
        feats.append(f)
        first += len(ex.options)
    return feats


def race_accuracy(examples: Sequence[RaceExample], predictions) -> dict[str, float]:
    """accuracy overall and per level (accuracy_middle, accuracy_high), plus the question counts."""
    pred = np.asarray(predictions)
    gold = np.asarray([ex.label for ex in examples])
    levels = np.asarray([ex.level for ex in examples])
    out: dict[str, float] = {"accuracy": float((pred == gold).mean()), "total": len(gold)}
    for lv in LEVELS:
        m = levels == lv
        if m.any():
            out[f"accuracy_{lv}"] = float((pred[m] == gold[m]).mean())
            out[f"total_{lv}"] = int(m.sum())
    return out
