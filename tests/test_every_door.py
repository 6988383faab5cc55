"""One prediction path per head family: every door asked the same inputs gives the same results.

Doors: CLI `predict` (a task's input file, or --text) and `fill-mask`, `litebert.pipeline`, `serve` (the app, in
process) and the ONNX backend (the model exported). Per family the CLI row is its example's id and text
(`Family.echo`), then the result, then the precision; the result's fields and values must equal the pipeline's,
and so must serve's and ONNX's (ONNX within float32 rounding of another graph). The schemas are listed in
docs/architecture.md; the results' keys are checked against that list too, so a schema change shows there.

Models are tiny, with seeded random heads, laid out as a fine-tuning run (RUN/best/ + finetune.json) so the CLI
knows their task."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from pathlib import Path

import pytest

import litebert
from litebert.finetune import FinetuneConfig
from tiny_models import TEXTS, same, save_model, tokenizer

ROOT = Path(__file__).resolve().parents[1]

CONTEXT = "tom went to the market to buy apples . it rained all day , so he came back wet ."
QUESTIONS = ["where did tom go ?", "what did tom buy ?"]
OPTIONS = [["the market", "school", "the moon", "home"], ["apples", "pears", "bread", "milk"]]

# family -> (model class, config, finetune.json settings, pipeline inputs, pipeline/serve parameters)
FAMILIES = {
    "classification": ("AlbertForSequenceClassification", dict(num_labels=2, label_names=["neg", "pos"]),
                       dict(task="sst-2"), TEXTS, {}),
    "regression": ("AlbertForSequenceClassification", dict(num_labels=1, problem_type="regression"),
                   dict(task="sts-b"), [("a man plays a guitar .", "a person plays music ."),
                                        ("cats sleep .", "the market fell sharply .")], {}),
    "token": ("AlbertForTokenClassification", dict(num_labels=3, label_names=["B-PER", "I-PER", "O"]),
              dict(task="conll2003"), TEXTS, {}),
    "span": ("AlbertForQuestionAnswering", {}, dict(task="squad1.1", doc_stride=16, max_query_length=16),
             [{"question": q, "context": CONTEXT} for q in QUESTIONS], {}),
    "choice": ("AlbertForMultipleChoice", {}, dict(task="race"),
               [{"context": CONTEXT, "question": q, "options": o} for q, o in zip(QUESTIONS, OPTIONS)], {}),
    "mlm": ("AlbertForMaskedLM", {}, None, ["the capital of [MASK] is paris .", "[MASK] and [MASK] went up ."],
            {"top_k": 3}),
    "embeddings": ("AlbertModel", {}, None, TEXTS, {}),
}


@pytest.fixture(scope="module")
def tok(shared_data):
    return tokenizer(shared_data)


def make_run(root: Path, family: str, tok) -> Path:
    cls, config, settings, _, _ = FAMILIES[family]
    model = save_model(root / "model", cls, tok, **config)
    if settings is None:  # not fine-tuned: the directory as it is (fill-mask, embeddings)
        return model
    run = root / "run"
    shutil.copytree(model, run / "best")
    record = {**dataclasses.asdict(FinetuneConfig()), "max_seq_length": 64, **settings}
    (run / "finetune.json").write_text(json.dumps(record))
    return run


def cli_input(tmp_path: Path, family: str) -> list[str]:
    """The CLI predict arguments that carry the same inputs as the pipeline's (a task file, or --text)."""
    inputs = FAMILIES[family][3]
    if family == "classification":
        return [a for t in inputs for a in ("--text", t)]
    if family == "regression":
        return [a for a, b in inputs for a in ("--text", f"{a}\t{b}")]
    path = tmp_path / "input"
    if family == "token":  # CoNLL: a word per line, a blank line between sentences (placeholder gold tags)
        path.write_text("\n".join("".join(f"{w} O\n" for w in t.split()) for t in inputs))
    elif family == "span":
        qas = [{"id": str(i), "question": item["question"], "answers": [{"text": "tom", "answer_start": 0}]}
               for i, item in enumerate(inputs)]
        path.write_text(json.dumps({"data": [{"title": "t", "paragraphs": [{"context": CONTEXT, "qas": qas}]}]}))
    elif family == "choice":
        path.write_text(json.dumps({"id": "p1", "article": CONTEXT, "questions": QUESTIONS, "options": OPTIONS,
                                    "answers": ["A", "A"]}))
    return ["--input", str(path)]


def cli_door(tmp_path, family, run, capsys) -> list:
    from litebert.cli import main

    if family == "mlm":  # fill-mask prints text: its rows are what the CLI decodes them from (fill_mask)
        from litebert.families.mlm import fill_mask

        texts, params = FAMILIES[family][3], FAMILIES[family][4]
        assert main(["fill-mask", "--model", str(run), "--precision", "fp32", "--top-k", "3", *texts]) == 0
        printed = capsys.readouterr().out
        results = fill_mask(run, texts, top_k=params["top_k"], precision="fp32")
        for masks in results:
            for i, preds in enumerate(masks):  # the printed candidates are these, in this order
                assert re.search(rf"\[MASK\] #{i + 1}: " + re.escape(f"{preds[0].shown} ({preds[0].score:.3g})"),
                                 printed)
        return [[[dataclasses.asdict(p) for p in row] for row in masks] for masks in results]
    task = FAMILIES[family][2]["task"]
    out = tmp_path / "rows.jsonl"
    argv = ["predict", task, "--model", str(run), "--precision", "fp32", "--output", str(out),
            *cli_input(tmp_path, family)]
    assert main(argv) == 0
    capsys.readouterr()
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    pipe = litebert.pipeline(None, run, "fp32")
    results = []
    for row in rows:  # the example's id and text (echo), the result, the precision
        echo = [k for k in row if k in ("guid", "text", "text_b", "id", "question")]
        assert list(row)[:len(echo)] == echo and row.pop("precision") == "fp32"
        results.append({k: v for k, v in row.items() if k not in echo})
    assert pipe.precision == "fp32"
    return results


def serve_door(run, inputs, params) -> list:
    from fastapi.testclient import TestClient

    from litebert.serving import ServeConfig, create_app

    def item(x):
        if isinstance(x, tuple):
            return {"text": x[0], "text_pair": x[1]}
        return x if isinstance(x, dict) else {"text": x}

    with TestClient(create_app(ServeConfig(model=str(run), backend="fp32").check())) as client:
        r = client.post("/predict", json={"inputs": [item(x) for x in inputs], "parameters": params})
        assert r.status_code == 200, r.text
        return r.json()["outputs"]


def documented_schema(family: str) -> list[str]:
    """The result keys docs/architecture.md lists for a family (its schema table: `| family | keys |`)."""
    for line in (ROOT / "docs" / "architecture.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0] == f"`{family}`":
            return re.findall(r'"(\w+)"', cells[2].split(";")[0])
    raise AssertionError(f"docs/architecture.md lists no schema for {family}")


@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_door_gives_the_family_one_result(tmp_path, tok, family, capsys):
    pytest.importorskip("fastapi")
    pytest.importorskip("onnxruntime")
    from litebert import heads
    from litebert.export import export_onnx

    run = make_run(tmp_path, family, tok)
    _, _, settings, inputs, params = FAMILIES[family]
    pipe = litebert.pipeline(None, run, "fp32")
    assert heads.family(pipe.record.head).code.startswith(type(pipe).__module__)  # the family's own class
    want = pipe(list(inputs), **params)

    doors = {"serve": serve_door(run, inputs, params)}
    if settings is not None or family == "mlm":
        doors["cli"] = cli_door(tmp_path, family, run, capsys)
    export_onnx(run, tmp_path / "onnx")
    doors["onnx"] = litebert.pipeline(None, tmp_path / "onnx", "onnx")(list(inputs), **params)
    for door, got in doors.items():
        same(got, want, atol=1e-4 if door == "onnx" else 1e-5)

    first = want[0]
    keys = list(first) if isinstance(first, dict) else list(first[0][0]) if family == "mlm" else []
    assert keys == documented_schema(family)
