"""Task table, readers of every shipped sentence-level dataset (counts from shared/data/README.md), errors,
custom CSV/TSV/JSONL tasks and classification features."""

import logging
from collections import Counter

import pytest

from litebert.data.examples import Example
from litebert.data.tasks import (
    TASKS,
    custom_task,
    encode_examples,
    get_task,
    label_list_for,
    pad_features,
    read_examples,
)
from litebert.errors import ConfigError, DataFormatError

# (task, folder, split, rows, label counts or None) -- numbers from shared/data/README.md
SHIPPED = [
    ("sst-2", "glue/SST-2", "train", 67349, {"1": 37569, "0": 29780}),
    ("sst-2", "glue/SST-2", "dev", 872, {"1": 444, "0": 428}),
    ("sst-2", "glue/SST-2", "test", 1821, None),
    ("cola", "glue/CoLA", "train", 8551, {"1": 6023, "0": 2528}),
    ("cola", "glue/CoLA", "dev", 1043, {"1": 721, "0": 322}),
    ("cola", "glue/CoLA", "test", 1063, None),
    ("mrpc", "glue/MRPC", "train", 3668, {"1": 2474, "0": 1194}),
    ("mrpc", "glue/MRPC", "dev", 408, {"1": 279, "0": 129}),
    ("mrpc", "glue/MRPC", "test", 1725, None),
    ("sts-b", "glue/STS-B", "train", 5749, None),
    ("sts-b", "glue/STS-B", "dev", 1500, None),
    ("sts-b", "glue/STS-B", "test", 1379, None),
    ("rte", "glue/RTE", "train", 2490, {"entailment": 1249, "not_entailment": 1241}),
    ("rte", "glue/RTE", "dev", 277, {"entailment": 146, "not_entailment": 131}),
    ("rte", "glue/RTE", "test", 3000, None),
    ("wnli", "glue/WNLI", "train", 635, {"0": 323, "1": 312}),
    ("wnli", "glue/WNLI", "dev", 71, None),
    ("wnli", "glue/WNLI", "test", 146, None),
    ("afqmc", "chinese/afqmc", "dev", 4316, {"0": 2978, "1": 1338}),
    ("lcqmc", "chinese/lcqmc", "dev", 8802, None),
    ("lcqmc", "chinese/lcqmc", "test", 12500, None),
    ("chnsenticorp", "chinese/chnsenticorp", "train", 9600, {"0": 4801, "1": 4799}),
    ("chnsenticorp", "chinese/chnsenticorp", "dev", 1200, None),
    ("chnsenticorp", "chinese/chnsenticorp", "test", 1200, None),
]


@pytest.mark.parametrize("task,folder,split,rows,label_counts", SHIPPED, ids=[f"{t}-{s}" for t, _, s, *_ in SHIPPED])
def test_shipped_datasets(shared_data, task, folder, split, rows, label_counts):
    spec = get_task(task)
    examples = read_examples(spec, shared_data / folder, split)
    assert len(examples) == rows and not examples.skipped
    unlabelled = split == "test" and task not in ("lcqmc",)  # LCQMC's test file is labelled
    if unlabelled:
        assert all(ex.label is None for ex in examples)
    elif spec.head == "regression":
        assert all(0.0 <= ex.label <= 5.0 for ex in examples)
    else:
        assert set(Counter(ex.label for ex in examples)) <= set(spec.labels)
    if label_counts is not None:
        assert dict(Counter(ex.label for ex in examples)) == label_counts
    pair = spec.text_b is not None
    assert all(isinstance(ex.text_a, str) and ex.text_a for ex in examples)
    assert all((ex.text_b is not None) == pair for ex in examples)


def test_glue_layout_details(shared_data):
    # CoLA train has no header: the first line is an example; its columns are source, label, mark, sentence.
    cola = read_examples(get_task("cola"), shared_data / "glue/CoLA", "train")
    first = (shared_data / "glue/CoLA/train.tsv").read_text(encoding="utf-8").split("\n")[0].split("\t")
    assert (cola[0].text_a, cola[0].label) == (first[3], first[1])
    # CoLA test has a header; its guid is the index column.
    assert read_examples(get_task("cola"), shared_data / "glue/CoLA", "test")[0].guid == "0"
    # MRPC: the BOM does not end up in the first column name, and label is the Quality column.
    mrpc = read_examples(get_task("mrpc"), shared_data / "glue/MRPC", "dev")
    assert mrpc[0].label == "1" and mrpc[0].text_b.startswith('"The foodservice pie')  # unquoted TSV
    stsb = read_examples(get_task("sts-b"), shared_data / "glue/STS-B", "dev")
    assert stsb[0].label == 5.0 and stsb[1].label == 4.75


def test_mnli_dev_matched_and_mismatched(tmp_path):
    header = ["index", "promptID", "pairID", "genre", "sentence1_binary_parse", "sentence2_binary_parse",
              "sentence1_parse", "sentence2_parse", "sentence1", "sentence2"]  # fmt: skip
    dev_header = header + ["label1", "label2", "label3", "label4", "label5", "gold_label"]
    row = lambda i, lab: [str(i), "1", "2", "fiction", "(x)", "(y)", "(X)", "(Y)", f"premise {i}", f"hyp {i}"] + (
        [lab] * 5 + [lab] if lab else []
    )
    for name, lab in (("dev_matched.tsv", "neutral"), ("dev_mismatched.tsv", "contradiction")):
        (tmp_path / name).write_text("\n".join("\t".join(r) for r in [dev_header, row(0, lab), row(1, lab)]) + "\n")
    (tmp_path / "test_matched.tsv").write_text("\n".join("\t".join(r) for r in [header, row(7, None)]) + "\n")
    spec = get_task("mnli")
    assert spec.eval_splits == ("dev_matched", "dev_mismatched")
    m = read_examples(spec, tmp_path, "dev_matched")
    mm = read_examples(spec, tmp_path, "dev_mismatched")
    assert [e.label for e in m] == ["neutral"] * 2 and [e.label for e in mm] == ["contradiction"] * 2
    assert (m[1].text_a, m[1].text_b, m[1].guid) == ("premise 1", "hyp 1", "1")
    test = read_examples(spec, tmp_path, "test_matched")
    assert test[0].label is None and test[0].guid == "7"


def test_qqp_skips_malformed_rows_by_design_and_counts_them(tmp_path, caplog):
    lines = ["id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate", "0\t1\t2\tq a\tq b\t1", "1\t3\t4\tbroken",
             "2\t5\t6\tq c\tq d\t0"]  # fmt: skip
    (tmp_path / "train.tsv").write_text("\n".join(lines) + "\n")
    with caplog.at_level(logging.WARNING):
        ex = read_examples(get_task("qqp"), tmp_path, "train")
    assert [e.label for e in ex] == ["1", "0"]
    assert len(ex.skipped) == 1 and "train.tsv:3" in ex.skipped[0]
    assert "skipped 1 malformed rows" in caplog.text


def test_table14_hparams_match_the_reference_table():
    from litebert.lab.shared_data import shared_data_dir

    ref = shared_data_dir().parent / "reference" / "anchors-mission.md"
    if not ref.exists():
        pytest.skip(f"{ref} not present")
    names = {"CoLA": "cola", "STS-B": "sts-b", "SST-2": "sst-2", "MNLI": "mnli", "QNLI": "qnli", "QQP": "qqp",
             "RTE": "rte", "MRPC": "mrpc", "WNLI": "wnli", "SQuAD v1.1": "squad1.1", "SQuAD v2.0": "squad2.0",
             "RACE": "race"}  # fmt: skip
    text = ref.read_text(encoding="utf-8")
    table = text[text.index("| Task | LR | BSZ |") :].split("\n\n")[0].splitlines()[2:]
    seen = set()
    for line in table:
        task, lr, bsz, albert_dr, cls_dr, steps, warmup, msl = [c.strip() for c in line.strip("|").split("|")]
        hp = get_task(names[task]).hparams
        assert (hp.learning_rate, hp.batch_size, hp.albert_dropout, hp.classifier_dropout) == (
            float(lr), int(bsz), float(albert_dr), float(cls_dr))  # fmt: skip
        assert (hp.train_steps, hp.warmup_steps, hp.max_seq_length) == (int(steps), int(warmup), int(msl))
        seen.add(names[task])
    assert len(seen) == 12


def test_task_table_is_consistent():
    for spec in TASKS.values():
        assert spec.main_metric in spec.metrics and spec.eval_splits[0] in spec.files
    assert get_task("SST2") is get_task("sst-2") and get_task("mnli").num_labels == 3
    assert get_task("sts-b").num_labels == 1 and get_task("sts-b").head == "regression"
    with pytest.raises(ConfigError, match="unknown task"):
        get_task("glue")
    with pytest.raises(ConfigError, match="no split"):
        read_examples(get_task("rte"), "/nonexistent-dir", "validation")


# ---------------------------------------------------------------------------------------------------------
# Custom tasks and errors
# ---------------------------------------------------------------------------------------------------------


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_custom_csv_pair_classification(tmp_path):
    _write(tmp_path / "train.csv", 'a,b,y\n"hello, world",second,pos\nplain,"multi\nline",neg\n')
    _write(tmp_path / "dev.csv", "a,b,y\nx,y,neg\n")
    spec = custom_task(format="csv", text_columns=["a", "b"], label_column="y")
    train = read_examples(spec, tmp_path, "train")
    assert [(e.text_a, e.text_b, e.label) for e in train] == [("hello, world", "second", "pos"),
                                                               ("plain", "multi\nline", "neg")]  # fmt: skip
    labels = label_list_for(spec, train)
    assert labels == ["neg", "pos"]
    dev = read_examples(spec, tmp_path, "dev", label_list=labels)
    assert dev[0].label == "neg"


def test_custom_jsonl_regression_and_multilabel(tmp_path):
    _write(tmp_path / "train.jsonl", '{"a": "x", "y": 0.5}\n\n{"a": "z", "y": "3"}\n')
    spec = custom_task(format="jsonl", text_columns=["a"], label_column="y", head="regression")
    assert [e.label for e in read_examples(spec, tmp_path / "train.jsonl", "train")] == [0.5, 3.0]
    assert spec.metrics == ("pearson", "spearman", "mse") and label_list_for(spec, []) is None

    _write(tmp_path / "ml.jsonl", '{"a": "x", "y": ["sports", "news"]}\n{"a": "z", "y": "news|tech"}\n'
                                  '{"a": "w", "y": []}\n')  # fmt: skip
    spec = custom_task(format="jsonl", text_columns=["a"], label_column="y", head="multilabel", label_delimiter="|")
    ex = read_examples(spec, tmp_path / "ml.jsonl", "train")
    assert [e.label for e in ex] == [("sports", "news"), ("news", "tech"), ()]
    labels = label_list_for(spec, ex)
    assert labels == ["news", "sports", "tech"]

    _write(tmp_path / "ml.tsv", 'a\ty\nx\t["b", "a"]\nz\ta,c\n')
    spec = custom_task(format="tsv", text_columns=["a"], label_column="y", head="multilabel")
    assert [e.label for e in read_examples(spec, tmp_path / "ml.tsv", "train")] == [("b", "a"), ("a", "c")]


def test_missing_column_names_file_and_column(tmp_path):
    path = _write(tmp_path / "train.csv", "a,label\nx,1\n")
    spec = custom_task(format="csv", text_columns=["a"], label_column="y")
    with pytest.raises(DataFormatError, match=r"train\.csv:2: no column 'y'"):
        read_examples(spec, path, "train")
    path = _write(tmp_path / "train.jsonl", '{"a": "x", "y": "1"}\n{"text": "x", "y": "1"}\n')
    spec = custom_task(format="jsonl", text_columns=["a"], label_column="y")
    with pytest.raises(DataFormatError, match=r"train\.jsonl:2: no column 'a'"):
        read_examples(spec, path, "train")
    # A dev split must have its label column; only test splits may lack it.
    path = _write(tmp_path / "dev.tsv", "sentence\nsome text\n")
    with pytest.raises(DataFormatError, match=r"dev\.tsv:2: no column 'label'"):
        read_examples(get_task("sst-2"), path, "dev")


def test_bad_lines_name_file_and_line(tmp_path):
    path = _write(tmp_path / "train.jsonl", '{"a": "x", "y": "1"}\n{"a": "x", "y": \n')
    with pytest.raises(DataFormatError, match=r"train\.jsonl:2: not valid JSON \(Expecting value at column 17\)"):
        read_examples(custom_task(format="jsonl", text_columns=["a"], label_column="y"), path, "train")
    path = _write(tmp_path / "dev.tsv", "sentence\tlabel\ngood\t1\nbad row without a tab\ngood\t0\n")
    with pytest.raises(DataFormatError, match=r"dev\.tsv:3: 1 fields but the header has 2"):
        read_examples(get_task("sst-2"), path, "dev")
    path = _write(tmp_path / "extra.tsv", "sentence\tlabel\ngood\t1\na\ttab\t0\n")
    with pytest.raises(DataFormatError, match=r"extra\.tsv:3: 3 fields"):
        read_examples(get_task("sst-2"), path, "dev")
    path = _write(tmp_path / "reg.tsv", "a\ty\nx\tnot-a-number\n")
    with pytest.raises(DataFormatError, match=r"reg\.tsv:2: label 'not-a-number' is not a number"):
        read_examples(custom_task(format="tsv", text_columns=["a"], label_column="y", head="regression"), path, "train")
    path = tmp_path / "latin1.tsv"
    path.write_bytes("sentence\tlabel\nok\t1\ncaf\xe9\t0\n".encode("latin-1"))
    with pytest.raises(DataFormatError, match=r"latin1\.tsv:3: invalid UTF-8"):
        read_examples(get_task("sst-2"), path, "dev")


def test_unseen_label_at_eval_time(tmp_path):
    spec = custom_task(format="tsv", text_columns=["a"], label_column="y")
    train = read_examples(spec, _write(tmp_path / "train.tsv", "a\ty\nx\tcat\nz\tdog\n"), "train")
    labels = label_list_for(spec, train)
    dev = _write(tmp_path / "dev.tsv", "a\ty\nx\tcat\nq\tbird\n")
    with pytest.raises(DataFormatError, match=r"dev\.tsv:3: label 'bird' is not in the label set \['cat', 'dog'\]"):
        read_examples(spec, dev, "dev", label_list=labels)
    # A fixed-label task checks against its own label set.
    with pytest.raises(DataFormatError, match=r"dev\.tsv:2: label '7'"):
        read_examples(get_task("sst-2"), _write(tmp_path / "dev.tsv", "sentence\tlabel\ntext\t7\n"), "dev")
    # Features check too (examples built in code, not by the reader).
    with pytest.raises(DataFormatError, match="'bird' is not in the training label set"):
        encode_examples([Example("g", "x", None, "bird", source="mem:1")], _FakeTokenizer(), 16, labels)


# ---------------------------------------------------------------------------------------------------------
# Features
# ---------------------------------------------------------------------------------------------------------


class _FakeTokenizer:
    """Only for the error path above (no model, no vocab needed): one id per character."""

    def batch_encode(self, texts, pairs=None, max_length=None, truncation=None):
        ids = [[2] + [ord(c) for c in t] + [3] for t in texts]
        return {"input_ids": ids, "token_type_ids": [[0] * len(i) for i in ids],
                "attention_mask": [[1] * len(i) for i in ids]}  # fmt: skip


@pytest.fixture(scope="module")
def albert_tokenizer(shared_data):
    from litebert.tokenizer import AlbertTokenizer

    return AlbertTokenizer(shared_data / "albert-vocab" / "30k-clean.model")


def test_encode_examples_pairs_and_labels(shared_data, albert_tokenizer):
    tok = albert_tokenizer
    spec = get_task("mrpc")
    examples = read_examples(spec, shared_data / "glue/MRPC", "dev")[:50]
    labels = label_list_for(spec, examples)
    feats = encode_examples(examples, tok, 48, labels)
    for ex, f in zip(examples, feats):
        ref = tok.encode(ex.text_a, ex.text_b, max_length=48, truncation="longest_first")
        assert f["input_ids"] == ref.input_ids and f["token_type_ids"] == ref.token_type_ids
        assert len(f["input_ids"]) <= 48 and f["attention_mask"] == [1] * len(f["input_ids"])
        assert f["input_ids"][0] == tok.cls_id and f["input_ids"][-1] == tok.sep_id
        assert f["input_ids"].count(tok.sep_id) == 2 and f["label"] == labels.index(ex.label)
    # Regression and unlabelled examples.
    stsb = read_examples(get_task("sts-b"), shared_data / "glue/STS-B", "dev")[:3]
    assert [f["label"] for f in encode_examples(stsb, tok, 64, None)] == [ex.label for ex in stsb]
    test = read_examples(get_task("sst-2"), shared_data / "glue/SST-2", "test")[:3]
    feats = encode_examples(test, tok, 64, ["0", "1"])
    assert all("label" not in f and f["input_ids"].count(tok.sep_id) == 1 for f in feats)


def test_pad_features():
    feats = [{"input_ids": [2, 5, 3], "token_type_ids": [0, 0, 0], "attention_mask": [1, 1, 1], "label": 1},
             {"input_ids": [2, 3], "token_type_ids": [0, 0], "attention_mask": [1, 1], "label": 0}]  # fmt: skip
    batch = pad_features(feats, pad_id=0)
    assert batch["input_ids"].tolist() == [[2, 5, 3], [2, 3, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 1, 0]] and batch["label"].tolist() == [1, 0]
    multi = pad_features([{"input_ids": [1], "label": [0.0, 1.0]}, {"input_ids": [1, 2], "label": [1.0, 1.0]}], 9)
    assert multi["label"].dtype.is_floating_point and multi["input_ids"].tolist() == [[1, 9], [1, 2]]
