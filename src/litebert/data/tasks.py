"""Fine-tuning tasks as data: one `TaskSpec` per task, readers for its files, and classification features.

A TaskSpec says where a task's files are (`files`: split -> file name in the task folder), how to read them
(`format` and column names), its labels, the head the model needs, its metrics (`main_metric` on
`eval_splits[0]` picks the best checkpoint) and the paper's Table 14 fine-tuning defaults (`hparams`).

    spec = get_task("mrpc")
    train = read_examples(spec, "glue/MRPC", "train")
    labels = label_list_for(spec, train)
    feats = encode_examples(train, tokenizer, spec.hparams.max_seq_length, labels)

Metric names mean what the task's scorer returns: metrics.compute_metrics for classification, regression
and multi-label heads; metrics.conlleval (token), metrics.squad_v1 / squad_v2 / cmrc2018 (span) and
race.race_accuracy (choice).

`read_examples` never skips input silently: a bad row is a `DataFormatError` naming file:line, except where a
task skips by design (QQP's known malformed rows, as the official processor does); those are counted in
`examples.skipped` and logged. SQuAD/CMRC2018, RACE and CoNLL tasks are read by `squad.py`, `race.py` and
`ner.py` (table `OWN_READERS`); `read_examples` dispatches to them. `Example`, `Examples` and `read_lines`, which
every reader shares, live in `examples.py`.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from litebert.data.examples import Example, Examples, read_lines
from litebert.data.ner import read_conll
from litebert.data.race import read_race
from litebert.data.squad import read_cmrc2018, read_squad
from litebert.errors import ConfigError, DataFormatError, where
from litebert.heads import FINETUNE_HEADS
from litebert.files import parse_json

logger = logging.getLogger(__name__)

HEADS = FINETUNE_HEADS  # the head families fine-tuning knows (litebert.heads)
FORMATS = ("glue-tsv", "tsv", "csv", "jsonl", "conll", "squad", "cmrc2018", "race")


@dataclass(frozen=True)
class Hparams:
    """Fine-tuning defaults. `train_steps`/`warmup_steps` (paper) or `num_train_epochs`/`warmup_ratio` (ours)."""

    learning_rate: float
    batch_size: int
    train_steps: int | None
    warmup_steps: int | None
    max_seq_length: int
    albert_dropout: float
    classifier_dropout: float = 0.1
    num_train_epochs: float | None = None
    warmup_ratio: float | None = None
    source: str = "paper Table 14"
    train_examples: int | None = None  # the official training set the paper's steps were sized for

    def sized_for(self, available: int) -> bool:
        """The paper's step count fits a training set of `available` rows: it is not far smaller than the official
        one (under half of it, the steps would mean more than twice the paper's epochs)."""
        return self.train_examples is None or available * 2 >= self.train_examples


def _t14(lr: float, bsz: int, albert_dr: float, steps: int, warmup: int, msl: int = 512,
         n: int | None = None) -> Hparams:
    return Hparams(lr, bsz, steps, warmup, msl, albert_dr, 0.1, train_examples=n)


# Tasks outside Table 14 (Chinese, NER, custom) get common BERT-style settings, marked as ours.
OUR_DEFAULTS = Hparams(2e-5, 32, None, None, 128, 0.0, 0.1, num_train_epochs=3.0, warmup_ratio=0.1,
                       source="litebert default (not in the paper)")  # fmt: skip


@dataclass(frozen=True)
class TaskSpec:
    name: str
    format: str
    head: str
    files: dict[str, str]  # split -> file (or folder, for RACE) inside the task folder
    metrics: tuple[str, ...]
    main_metric: str
    hparams: Hparams = OUR_DEFAULTS
    text_a: str | None = None  # column name or JSON key
    text_b: str | None = None
    label: str | None = None
    labels: tuple[str, ...] | None = None  # fixed label set; None = regression, or taken from the train split
    fieldnames: tuple[str, ...] | None = None  # column names for files that have no header row
    headerless: tuple[str, ...] = ()  # splits whose file has no header row
    eval_splits: tuple[str, ...] = ("dev",)
    label_delimiter: str = ","  # multi-label cells that are not a JSON list
    skip_malformed: bool = False  # by-design skip of rows missing fields (counted, logged)
    tag_scheme: str | None = None  # NER: "IOB1" | "IOB2"
    version_2: bool = False  # SQuAD v2.0 (unanswerable questions)
    label_meanings: tuple[tuple[str, str], ...] = ()  # (label, readable name) for coded labels: ("0", "negative")
    notes: str = ""

    def __post_init__(self):
        if self.head not in HEADS:
            raise ConfigError(f"task {self.name}: head {self.head!r} is not one of {HEADS}")
        if self.format not in FORMATS:
            raise ConfigError(f"task {self.name}: format {self.format!r} is not one of {FORMATS}")
        if self.main_metric not in self.metrics:
            raise ConfigError(f"task {self.name}: main_metric {self.main_metric!r} is not in metrics {self.metrics}")

    @property
    def num_labels(self) -> int | None:
        return 1 if self.head == "regression" else (len(self.labels) if self.labels else None)


# ---------------------------------------------------------------------------------------------------------
# The task table
# ---------------------------------------------------------------------------------------------------------

_BIN = ("0", "1")
_NLI2 = ("entailment", "not_entailment")
_GLUE_FILES = {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"}
_CONLL_LABELS = tuple(f"{p}-{t}" for t in ("PER", "ORG", "LOC", "MISC") for p in ("B", "I")) + ("O",)


def _glue(name, hp, a, b, label, labels, metrics=("accuracy",), main="accuracy", **kw) -> TaskSpec:
    head = "regression" if labels is None else "classification"
    kw.setdefault("files", dict(_GLUE_FILES))
    return TaskSpec(name, "glue-tsv", head, metrics=metrics, main_metric=main, hparams=hp,
                    text_a=a, text_b=b, label=label, labels=labels, **kw)  # fmt: skip


TASKS: dict[str, TaskSpec] = {
    t.name: t
    for t in [
        _glue("cola", _t14(1e-5, 16, 0.0, 5336, 320, n=8551), "sentence", None, "label", _BIN, ("mcc", "accuracy"),
              "mcc",
              fieldnames=("source", "label", "label_mark", "sentence"), headerless=("train", "dev"),
              label_meanings=(("0", "unacceptable"), ("1", "acceptable"))),
        _glue("sst-2", _t14(1e-5, 32, 0.0, 20935, 1256, n=67349), "sentence", None, "label", _BIN,
              label_meanings=(("0", "negative"), ("1", "positive"))),
        _glue("mrpc", _t14(2e-5, 32, 0.0, 800, 200, n=3668), "#1 String", "#2 String", "Quality", _BIN,
              ("accuracy", "f1"),
              label_meanings=(("0", "not_equivalent"), ("1", "equivalent"))),
        _glue("sts-b", _t14(2e-5, 16, 0.0, 3598, 214, n=5749), "sentence1", "sentence2", "score", None,
              ("pearson", "spearman", "mse"), "pearson"),
        _glue("qqp", _t14(5e-5, 128, 0.1, 14000, 1000, n=363846), "question1", "question2", "is_duplicate", _BIN,
              ("accuracy", "f1"), skip_malformed=True, label_meanings=(("0", "not_duplicate"), ("1", "duplicate")),
              notes="rows missing fields are skipped and counted, as the official QQP processor does"),
        _glue("mnli", _t14(3e-5, 128, 0.0, 10000, 1000, n=392702), "sentence1", "sentence2", "gold_label",
              ("contradiction", "entailment", "neutral"), eval_splits=("dev_matched", "dev_mismatched"),
              files={"train": "train.tsv", "dev": "dev_matched.tsv", "dev_matched": "dev_matched.tsv",
                     "dev_mismatched": "dev_mismatched.tsv", "test": "test_matched.tsv",
                     "test_matched": "test_matched.tsv", "test_mismatched": "test_mismatched.tsv"}),
        _glue("qnli", _t14(1e-5, 32, 0.0, 33112, 1986, n=104743), "question", "sentence", "label", _NLI2),
        _glue("rte", _t14(3e-5, 32, 0.1, 800, 200, n=2490), "sentence1", "sentence2", "label", _NLI2),
        _glue("wnli", _t14(2e-5, 16, 0.1, 2000, 250, n=635), "sentence1", "sentence2", "label", _BIN,
              label_meanings=(("0", "not_entailment"), ("1", "entailment"))),
        TaskSpec("afqmc", "jsonl", "classification", {"train": "train.json", "dev": "dev.json", "test": "test.json"},
                 ("accuracy",), "accuracy", text_a="sentence1", text_b="sentence2", label="label", labels=_BIN),
        TaskSpec("lcqmc", "tsv", "classification", {"train": "train.txt", "dev": "dev.txt", "test": "test.txt"},
                 ("accuracy", "f1"), "accuracy", text_a="text_a", text_b="text_b", label="label", labels=_BIN,
                 fieldnames=("text_a", "text_b", "label"), headerless=("train", "dev", "test")),
        TaskSpec("chnsenticorp", "tsv", "classification",
                 {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"}, ("accuracy",), "accuracy",
                 text_a="text_a", label="label", labels=_BIN),
        TaskSpec("conll2003", "conll", "token", {"train": "eng.train", "dev": "eng.testa", "test": "eng.testb"},
                 ("f1", "precision", "recall", "accuracy"), "f1", labels=_CONLL_LABELS, tag_scheme="IOB1",
                 notes="original CoNLL-2003 files: IOB1 tags, 4 columns, -DOCSTART- document lines"),
        TaskSpec("conll2003-iob2", "conll", "token", {"train": "train.txt", "dev": "valid.txt", "test": "test.txt"},
                 ("f1", "precision", "recall", "accuracy"), "f1", labels=_CONLL_LABELS, tag_scheme="IOB2"),
        TaskSpec("squad1.1", "squad", "span", {"train": "train-v1.1.json", "dev": "dev-v1.1.json"},
                 ("exact_match", "f1"), "f1", hparams=_t14(5e-5, 48, 0.0, 3649, 365, msl=384, n=87599)),
        TaskSpec("squad2.0", "squad", "span", {"train": "train-v2.0.json", "dev": "dev-v2.0.json"},
                 ("exact", "f1", "best_exact", "best_f1"), "f1", hparams=_t14(3e-5, 48, 0.0, 8144, 814, n=130319),
                 version_2=True),
        TaskSpec("cmrc2018", "cmrc2018", "span",
                 {"train": "cmrc2018_train.json", "dev": "cmrc2018_dev.json", "trial": "cmrc2018_trial.json"},
                 ("em", "f1", "average"), "f1", hparams=dataclasses.replace(OUR_DEFAULTS, max_seq_length=512)),
        TaskSpec("race", "race", "choice", {"train": "train", "dev": "dev", "test": "test"},
                 ("accuracy", "accuracy_middle", "accuracy_high"), "accuracy",
                 hparams=_t14(2e-5, 32, 0.1, 12000, 1000, n=87866),
                 notes="README: ALBERT v2 models diverge with these; use lr 1e-5 and albert_dropout 0 for v2"),
    ]
}  # fmt: skip
ALIASES = {"sst2": "sst-2", "stsb": "sts-b", "squad": "squad1.1", "squad1": "squad1.1", "squad2": "squad2.0",
           "squad-v1.1": "squad1.1", "squad-v2.0": "squad2.0", "conll": "conll2003", "ner": "conll2003"}  # fmt: skip


def get_task(name: str) -> TaskSpec:
    key = name.lower()
    key = ALIASES.get(key, key)
    if key not in TASKS:
        raise ConfigError(f"unknown task {name!r}; known: {sorted(TASKS)} (or build one with custom_task(...))")
    return TASKS[key]


def custom_task(
    name: str = "custom",
    format: str = "csv",
    text_columns: Sequence[str] = ("text",),
    label_column: str = "label",
    head: str = "classification",
    labels: Sequence[str] | None = None,
    label_delimiter: str = ",",
    files: dict[str, str] | None = None,
    metrics: Sequence[str] | None = None,
    main_metric: str | None = None,
    hparams: Hparams = OUR_DEFAULTS,
) -> TaskSpec:
    """A task over your own CSV/TSV/JSONL files with one or two text columns and a label column.

    head: "classification" (labels taken from train unless given), "regression" (float labels) or
    "multilabel" (a JSON list, or labels joined by `label_delimiter`). TSV files are read without quoting.
    """
    if format not in ("csv", "tsv", "jsonl"):
        raise ConfigError(f"custom task format {format!r}: use csv, tsv or jsonl")
    if head not in ("classification", "regression", "multilabel"):
        raise ConfigError(f"custom task head {head!r}: use classification, regression or multilabel")
    if not 1 <= len(text_columns) <= 2:
        raise ConfigError(f"text_columns must name 1 or 2 columns, got {list(text_columns)}")
    ext = {"csv": "csv", "tsv": "tsv", "jsonl": "jsonl"}[format]
    default_metrics = {
        "classification": ("accuracy",),
        "regression": ("pearson", "spearman", "mse"),
        "multilabel": ("micro_f1", "macro_f1", "subset_accuracy"),
    }[head]
    metrics = tuple(metrics or default_metrics)
    return TaskSpec(
        name, format, head,
        files=files or {s: f"{s}.{ext}" for s in ("train", "dev", "test")},
        metrics=metrics, main_metric=main_metric or metrics[0], hparams=hparams,
        text_a=text_columns[0], text_b=text_columns[1] if len(text_columns) > 1 else None, label=label_column,
        labels=tuple(labels) if labels is not None else None, label_delimiter=label_delimiter,
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------------------


def split_path(spec: TaskSpec, path_or_dir: str | Path, split: str) -> Path:
    """The file for `split`: `path_or_dir` itself when it is a file, else the task folder + spec.files[split]."""
    path = Path(path_or_dir)
    if path.is_file() or (spec.format == "race" and (any((path / lv).is_dir() for lv in ("high", "middle"))
                                                      or any(path.glob("*.txt")))):
        return path  # a file, or one RACE split folder ({high,middle}/*.txt), or a folder of RACE *.txt files
    if split not in spec.files:
        raise ConfigError(f"task {spec.name} has no split {split!r}; known: {sorted(spec.files)}")
    path = path / spec.files[split]
    if not path.exists():
        raise DataFormatError(f"{path}: not found (task {spec.name}, split {split}; pass the task folder or the file)")
    return path


# Formats read by a module of their own: format -> reader(path, allowed labels or None) -> Examples.
OWN_READERS: dict[str, Callable[[Path, Sequence[str] | None], Examples]] = {
    "conll": read_conll,
    "squad": lambda path, labels: read_squad(path),
    "cmrc2018": lambda path, labels: read_cmrc2018(path),
    "race": lambda path, labels: read_race(path),
}


def read_examples(spec: TaskSpec, path_or_dir: str | Path, split: str, label_list: Sequence[str] | None = None):
    """Read one split. Returns `Examples` of `Example` (sentence tasks), `TokenExample` (conll),
    `SquadExample` (squad, cmrc2018) or `RaceExample` (race).

    Labels are checked against `label_list` (pass the training labels when reading dev/test) or else the
    task's fixed label set: an unknown label is a DataFormatError naming file:line.
    """
    path = split_path(spec, path_or_dir, split)
    if spec.format in OWN_READERS:
        return OWN_READERS[spec.format](path, label_list or spec.labels)
    rows = _jsonl_rows(path) if spec.format == "jsonl" else _table_rows(spec, path, split)
    return _rows_to_examples(spec, rows, path, split, label_list)


def label_list_for(spec: TaskSpec, train_examples: Sequence[Example]) -> list[str] | None:
    """The label list the head is built on: the task's fixed set, else the sorted labels (NER: tags) seen in
    train. None for heads without labels (regression, span, choice)."""
    if spec.head in ("regression", "span", "choice"):
        return None
    if spec.labels is not None:
        return list(spec.labels)
    seen: set[str] = set()
    for ex in train_examples:
        if spec.head == "token":
            seen.update(ex.labels or ())
        elif isinstance(ex.label, tuple):
            seen.update(ex.label)
        elif ex.label is not None:
            seen.add(ex.label)
    if not seen:
        raise DataFormatError(f"task {spec.name}: the training examples carry no labels")
    return sorted(seen)


def label_names_for(spec: TaskSpec, label_list: Sequence[str] | None) -> list[str] | None:
    """The names a model's labels go by (config.json id2label): a coded label's readable name ("0" ->
    "negative" for SST-2), else the label as the data spells it."""
    if label_list is None:
        return None
    meanings = dict(spec.label_meanings)
    return [meanings.get(label, label) for label in label_list]


# A row is (line number, {column: value}); missing columns are simply absent from the dict.
Row = tuple[int, dict]


def _table_rows(spec: TaskSpec, path: Path, split: str) -> Iterator[Row]:
    """GLUE-style TSV (tab split, no quoting) or CSV (csv module quoting), with a header unless headerless."""
    if spec.format == "csv":
        yield from _csv_rows(spec, path, split)
        return
    lines = read_lines(path)
    if split in spec.headerless:
        header = list(spec.fieldnames or ())
    else:
        first = next(lines, None)
        if first is None:
            raise DataFormatError(f"{path}: empty file, expected a header row")
        header = first[1].split("\t")
    for n, line in lines:
        if not line.strip():
            continue  # blank (usually the last) line
        yield n, _zip_fields(path, n, header, line.split("\t"), spec)


def _csv_rows(spec: TaskSpec, path: Path, split: str) -> Iterator[Row]:
    # Lines go in with their "\n" so quoted fields may span lines; line_num is then the physical line.
    reader = csv.reader(line + "\n" for _, line in read_lines(path))
    try:
        header = list(spec.fieldnames) if split in spec.headerless else next(reader)
        for fields in reader:
            if fields:
                yield reader.line_num, _zip_fields(path, reader.line_num, header, fields, spec)
    except StopIteration:
        raise DataFormatError(f"{path}: empty file, expected a header row") from None
    except csv.Error as e:
        raise DataFormatError(f"{where(path, reader.line_num)}: {e}") from None


def _zip_fields(path: Path, n: int, header: list[str], fields: list[str], spec: TaskSpec) -> dict:
    if len(fields) > len(header):
        raise DataFormatError(
            f"{where(path, n)}: {len(fields)} fields but the header has {len(header)} "
            "(a tab or unquoted delimiter inside a text?)"
        )
    if len(fields) < len(header) and not spec.skip_malformed:
        raise DataFormatError(f"{where(path, n)}: {len(fields)} fields but the header has {len(header)}")
    return dict(zip(header, fields))  # a short row (skip_malformed) lacks the tail columns


def _jsonl_rows(path: Path) -> Iterator[Row]:
    for n, line in read_lines(path):
        if not line.strip():
            continue
        obj = parse_json(line, path, DataFormatError, line=n)
        if not isinstance(obj, dict):
            raise DataFormatError(f"{where(path, n)}: expected a JSON object per line, got {type(obj).__name__}")
        yield n, obj


def _rows_to_examples(spec, rows, path: Path, split: str, label_list) -> Examples:
    allowed = set(label_list) if label_list is not None else (set(spec.labels) if spec.labels else None)
    out, skipped = [], []
    labelled: bool | None = None  # decided on the first row: test splits may lack the label column
    for n, row in rows:
        loc = where(path, n)
        if labelled is None:
            labelled = spec.label in row or not split.startswith("test")
        needed = [c for c in (spec.text_a, spec.text_b, spec.label if labelled else None) if c]
        missing = [c for c in needed if c not in row]
        if missing:
            if spec.skip_malformed:
                skipped.append(f"{loc}: missing {missing}")
                continue
            raise DataFormatError(f"{loc}: no column {missing[0]!r} (columns: {sorted(row)}; task {spec.name})")
        # An empty class label would otherwise become a class of its own, "": refused, except in a test file
        # (unlabelled rows). Regression and multi-label cells are checked by _parse_label.
        empty = (labelled and spec.head == "classification" and isinstance(row[spec.label], str)
                 and not row[spec.label].strip())
        if empty and not split.startswith("test"):
            raise DataFormatError(f"{loc}: empty label in column {spec.label!r} (task {spec.name}); give every row "
                                  "a label, or remove the row")
        label = _parse_label(spec, row[spec.label], loc) if labelled and not empty else None
        _check_label(label, allowed, loc, spec)
        guid = str(row.get("index", row.get("idx", row.get("id", row.get("qid", f"{split}-{len(out)}")))))
        text_b = _text(row[spec.text_b], loc, spec.text_b) if spec.text_b else None
        out.append(Example(guid, _text(row[spec.text_a], loc, spec.text_a), text_b, label, source=loc))
    if skipped:
        logger.warning("%s: skipped %d malformed rows by design (first: %s)", path, len(skipped), skipped[0])
    if not out:
        raise DataFormatError(f"{path}: no examples (task {spec.name}, split {split})")
    return Examples(out, path=path, skipped=skipped)


def _text(value: Any, loc: str, column: str) -> str:
    if not isinstance(value, str):
        raise DataFormatError(f"{loc}: column {column!r} should hold text, got {type(value).__name__}")
    return value


def _parse_label(spec: TaskSpec, value: Any, loc: str):
    if spec.head == "regression":
        try:
            x = float(value)
        except (TypeError, ValueError):
            raise DataFormatError(f"{loc}: label {value!r} is not a number (regression task {spec.name})") from None
        if not math.isfinite(x):
            raise DataFormatError(f"{loc}: label {value!r} is not finite")
        return x
    if spec.head == "multilabel":
        if isinstance(value, str) and value.lstrip().startswith("["):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                raise DataFormatError(f"{loc}: multi-label cell {value!r} starts with '[' but is not JSON") from None
        if isinstance(value, str):
            value = [v.strip() for v in value.split(spec.label_delimiter) if v.strip()]
        if not isinstance(value, list):
            raise DataFormatError(f"{loc}: multi-label value should be a list or a delimited string, got {value!r}")
        return tuple(_label_str(v, loc) for v in value)
    return _label_str(value, loc)


def _label_str(value: Any, loc: str) -> str:
    """Labels are kept as strings: JSON 1 and TSV "1" are the same label."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise DataFormatError(f"{loc}: label {value!r} should be a string or an integer")
    return str(value).strip()


def _check_label(label, allowed: set[str] | None, loc: str, spec: TaskSpec) -> None:
    if allowed is None or label is None or isinstance(label, float):
        return
    for lab in label if isinstance(label, tuple) else (label,):
        if lab not in allowed:
            raise DataFormatError(
                f"{loc}: label {lab!r} is not in the label set {sorted(allowed)} of task {spec.name} "
                "(the training labels); fix the label or add it to the training data / the task's labels"
            )


# ---------------------------------------------------------------------------------------------------------
# Features
# ---------------------------------------------------------------------------------------------------------


def label_to_target(label, label_list: Sequence[str] | None, source: str = ""):
    """Class id (classification), float (regression: label_list None) or multi-hot floats (multi-label)."""
    if label_list is None:
        return float(label)
    index = {lab: i for i, lab in enumerate(label_list)}
    labs = label if isinstance(label, tuple) else (label,)
    unknown = [lab for lab in labs if lab not in index]
    if unknown:
        raise DataFormatError(f"{source}: label {unknown[0]!r} is not in the training label set {list(label_list)}")
    if isinstance(label, tuple):
        hot = [0.0] * len(label_list)
        for lab in labs:
            hot[index[lab]] = 1.0
        return hot
    return index[label]


def encode_examples(
    examples: Sequence[Example], tokenizer, max_seq_length: int, label_list: Sequence[str] | None
) -> list[dict]:
    """[CLS] a [SEP] (b [SEP]) features, truncated longest-first, NOT padded (the training loop pads).

    Each dict: input_ids, token_type_ids, attention_mask (lists of int), truncated_tokens (how many tokens the
    max_seq_length limit dropped) and, for labelled examples, `label`
    (class id; float for regression when label_list is None; multi-hot list of floats for multi-label).
    """
    texts = [ex.text_a for ex in examples]
    pairs = [ex.text_b for ex in examples]
    has_pair = [p is not None for p in pairs]
    if any(has_pair) and not all(has_pair):
        raise DataFormatError("encode_examples: some examples have text_b and some do not; encode them apart")
    pairs = pairs if all(has_pair) and examples else None
    # Encoded whole first, so the tokens truncation drops are counted (`truncated_tokens`, 0 when none); only the
    # rows over the limit are encoded again, truncated longest-first.
    enc = tokenizer.batch_encode(texts, pairs, truncation=False)
    full = [len(ids) for ids in enc["input_ids"]]
    over = [i for i, n in enumerate(full) if n > max_seq_length]
    if over:
        cut = tokenizer.batch_encode([texts[i] for i in over], None if pairs is None else [pairs[i] for i in over],
                                     max_length=max_seq_length, truncation="longest_first")
        for j, i in enumerate(over):
            for key in ("input_ids", "token_type_ids", "attention_mask"):
                enc[key][i] = cut[key][j]
    feats = []
    for i, ex in enumerate(examples):
        f = {"input_ids": enc["input_ids"][i], "token_type_ids": enc["token_type_ids"][i],
             "attention_mask": enc["attention_mask"][i],
             "truncated_tokens": full[i] - len(enc["input_ids"][i])}  # fmt: skip
        if ex.label is not None:
            f["label"] = label_to_target(ex.label, label_list, ex.source or ex.guid)
        feats.append(f)
    return feats


def feature_length(f: dict) -> int:
    ids = f["input_ids"]
    return max(len(r) for r in ids) if ids and isinstance(ids[0], list) else len(ids)


# Pad value per padded key; "input_ids" pads with the tokenizer's pad id.
PAD_VALUES = {"token_type_ids": 0, "attention_mask": 0, "p_mask": 1, "labels": -100}
MODEL_KEYS = ("input_ids", "token_type_ids", "attention_mask", "p_mask", "labels", "label",
              "start_positions", "end_positions", "is_impossible")  # fmt: skip


def pad_features(features: Sequence[dict], pad_id: int, return_tensors: str = "pt") -> dict:
    """Collate unpadded feature dicts into tensors, padding to the longest in the batch.

    Keys in MODEL_KEYS become tensors: lists are padded ([B, L]; RACE's per-choice lists give [B, C, L]),
    scalars stacked ([B]; float labels stay float). Other keys (offsets, ids, ...) stay Python lists.
    return_tensors: "pt" (torch) or "np" (numpy int64 / float32: the ONNX path, which needs no torch).
    """
    if return_tensors not in ("pt", "np"):
        raise ConfigError(f"return_tensors={return_tensors!r}: use 'pt' or 'np'")
    out: dict[str, Any] = {}
    for key in features[0]:
        values = [f[key] for f in features]
        if key not in MODEL_KEYS:
            out[key] = values
            continue
        first = values[0]
        if not isinstance(first, list):
            out[key] = np.asarray(values, dtype=np.float32 if isinstance(first, float) else np.int64)
        elif first and isinstance(first[0], float):  # multi-hot labels: fixed length, no padding
            out[key] = np.asarray(values, dtype=np.float32)
        else:
            pad = pad_id if key == "input_ids" else PAD_VALUES.get(key, 0)
            nested = bool(first) and isinstance(first[0], list)  # [C][L] per example (multiple choice)
            rows = [r for v in values for r in v] if nested else values
            width = max(len(r) for r in rows)
            padded = np.asarray([r + [pad] * (width - len(r)) for r in rows], dtype=np.int64)
            out[key] = padded.reshape(len(values), len(first), width) if nested else padded
    if return_tensors == "pt":
        import torch

        out = {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in out.items()}
    return out
