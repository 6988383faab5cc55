"""One model, one identity (issue 33): a model directory says what it is, and every door honours it.

Each test names the observation of issue 33 it covers. The model is a tiny ALBERT fine-tuned for a few steps on
real SST-2 rows (shared data), so its directory is written by the real fine-tuning code."""

from __future__ import annotations

import json
import shutil

import pytest

import litebert
from litebert.errors import LitebertError
from tiny_models import save_model, tokenizer

LONG_REVIEW = " ".join(["the film is long and the plot wanders but the actors are good"] * 6)  # ~80 tokens


@pytest.fixture(scope="module")
def tok(shared_data):
    return tokenizer(shared_data)


@pytest.fixture(scope="module")
def run(tmp_path_factory, shared_data, tok):
    """RUN_SST2: fine-tuned at max_seq_length 32 (the encoder has 64 positions)."""
    from litebert.finetune import FinetuneConfig, finetune

    root = tmp_path_factory.mktemp("identity")
    base = save_model(root / "base", "AlbertForPreTraining", tok)
    finetune(FinetuneConfig(task="sst-2", model=str(base), data=str(shared_data / "glue" / "SST-2"),
                            out=str(root / "run"), steps=2, batch_size=4, max_seq_length=32, max_train_examples=8,
                            max_eval_examples=8, precision="fp32", lr=1e-4, log_every=1))
    return root / "run"


def cli(argv, capsys):
    from litebert.cli import main

    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_obs6_a_copied_best_dir_answers_exactly_as_the_run_dir(run, tmp_path):
    """Obs. 6: max_seq_length lived only in the run's finetune.json, so a copied best/ fell back to 512."""
    from litebert.records import IDENTITY_RECORD, read_record

    copy = tmp_path / "elsewhere"
    shutil.copytree(run / "best", copy)
    identity = json.loads((copy / IDENTITY_RECORD).read_text())
    assert identity["max_seq_length"] == 32 and identity["finetune_task"] == "sst-2" and identity["input"] == "single"
    _, from_run = read_record(run)
    _, from_copy = read_record(copy)
    assert from_copy.max_seq_length == 32 and from_copy.to_dict() == from_run.to_dict()
    texts = [LONG_REVIEW, "a gripping , funny film"]
    assert (litebert.pipeline(None, copy, "fp32")(texts) == litebert.pipeline(None, run, "fp32")(texts))


def test_obs6_an_old_directory_without_the_record_still_loads(run, tmp_path):
    """A directory saved before the identity record: the run's finetune.json still supplies the length."""
    from litebert.records import IDENTITY_RECORD, read_record

    old = tmp_path / "old"
    shutil.copytree(run, old)
    (old / "best" / IDENTITY_RECORD).unlink()
    _, record = read_record(old)
    assert record.max_seq_length == 32 and record.finetune_task == "sst-2" and record.identity == "run record"


def test_obs8_real_label_names_and_one_output_schema(run, shared_data):
    """Obs. 8: config.json said {"0": "0", "1": "1"}; predict said "1"/"positive", the pipeline "1"."""
    from litebert.scoring import predict

    config = json.loads((run / "best" / "config.json").read_text())
    assert config["id2label"] == {"0": "negative", "1": "positive"}
    assert config["label2id"] == {"negative": 0, "positive": 1}
    piped = litebert.pipeline(None, run, "fp32")("a gripping , funny film")
    row = predict("sst-2", run, texts=["a gripping , funny film"], precision="fp32")[0]
    keys = {"label", "label_id", "score", "scores", "truncated_tokens"}
    assert keys <= set(piped) and keys <= set(row)
    assert row["label"] == piped["label"] == ["negative", "positive"][piped["label_id"]]
    assert set(piped["scores"]) == {"negative", "positive"} and row["label_id"] == piped["label_id"]
    assert row["scores"] == pytest.approx(piped["scores"], abs=1e-5)
    # The data's own spellings ("0", "1") still score: evaluate maps them through the record's label values.
    result = litebert.scoring.evaluate("sst-2", run, shared_data / "glue" / "SST-2", limit=8, precision="fp32")
    assert 0 <= result["accuracy"] <= 1


def test_obs9_one_precision_gives_the_same_numbers_at_every_door(run, shared_data):
    """Obs. 9: at bf16, CLI predict/evaluate ran the model under autocast and the pipeline with bf16 weights, so
    the same model at the same precision answered with other numbers. Both now cast the weights (one rule)."""
    from litebert.scoring import evaluate, predict

    texts = ["a gripping , funny film", "dull and long", "the acting is fine but the plot is thin"]
    piped = litebert.pipeline(None, run, "bf16")(texts)
    rows = predict("sst-2", run, texts=texts, precision="bf16")
    for row, answer in zip(rows, piped):
        assert row["precision"] == "bf16" and row["label"] == answer["label"]
        assert row["scores"] == pytest.approx(answer["scores"], abs=1e-6)
    # evaluate decodes the same outputs: its accuracy is the pipeline's on the same rows
    result = evaluate("sst-2", run, shared_data / "glue" / "SST-2", limit=16, precision="bf16")
    from litebert.data.tasks import get_task, read_examples

    dev = read_examples(get_task("sst-2"), shared_data / "glue" / "SST-2", "dev")[:16]
    answers = litebert.pipeline(None, run, "bf16")([ex.text_a for ex in dev])
    names = json.loads((run / "best" / "config.json").read_text())["id2label"]
    gold = [names[str(ex.label)] for ex in dev]
    assert result["accuracy"] == pytest.approx(sum(a["label"] == g for a, g in zip(answers, gold)) / 16)


def test_obs1_fill_mask_on_a_classifier_is_refused_naming_the_model(run, capsys):
    """Obs. 1: fill-mask made a fresh random MLM head on every call and answered with it."""
    code, out, err = cli(["fill-mask", "--model", run, "a gripping [MASK] film"], capsys)
    assert code == 2 and not out
    assert "text-classification" in err and "fill-mask" in err, err


def test_obs2_evaluate_for_another_task_is_refused_or_flagged(run, shared_data, capsys):
    """Obs. 2: `evaluate cola` on an SST-2 model printed an mcc with no word of the mismatch."""
    code, out, err = cli(["evaluate", "cola", "--model", run, "--data", shared_data / "glue" / "CoLA",
                          "--limit", 8, "--precision", "fp32"], capsys)
    assert code == 2 and "fine-tuned for sst-2" in err and "--allow-task-mismatch" in err, err
    code, out, err = cli(["evaluate", "cola", "--model", run, "--data", shared_data / "glue" / "CoLA",
                          "--limit", 8, "--precision", "fp32", "--allow-task-mismatch"], capsys)
    assert code == 0 and "fine-tuned for sst-2" in json.loads(out)["task_mismatch"] and "WARNING" in err


def test_obs3_predict_for_another_task_is_refused(run, capsys):
    """Obs. 3: `predict rte` on an SST-2 model answered label "0", which is not an RTE label."""
    code, out, err = cli(["predict", "rte", "--model", run, "--text", "A man sleeps.\tSomeone is awake."], capsys)
    assert code == 2 and not out and "fine-tuned for sst-2" in err and "not for rte" in err, err


def test_obs4_a_pair_to_a_single_input_model_is_refused_by_the_pipeline(run):
    """Obs. 4: the pipeline and serve answered a sentence pair sent to a single-sentence SST-2 model."""
    clf = litebert.pipeline(None, run, "fp32")
    with pytest.raises(LitebertError, match="a text pair, but .* fine-tuned for sst-2 on single inputs"):
        clf(("A man sleeps.", "Someone is awake."))
    with pytest.raises(LitebertError, match="a text pair"):
        clf({"text": "a", "text_pair": "b"})


def test_obs5_truncation_is_counted_everywhere_or_refused(run, tok, capsys):
    """Obs. 5: a long review was cut to the trained length with no notice."""
    from litebert.scoring import predict

    full = len(tok.encode(LONG_REVIEW).input_ids)
    assert full > 32
    clf = litebert.pipeline(None, run, "fp32")
    got = clf([LONG_REVIEW, "dull ."])
    assert [g["truncated_tokens"] for g in got] == [full - 32, 0]
    rows = predict("sst-2", run, texts=[LONG_REVIEW, "dull ."], precision="fp32")
    assert [r["truncated_tokens"] for r in rows] == [full - 32, 0]
    code, out, err = cli(["predict", "sst-2", "--model", run, "--text", LONG_REVIEW, "--text", "dull ."], capsys)
    assert code == 0 and "1 truncated inputs" in err, err
    strict = litebert.pipeline(None, run, "fp32", truncation="error")
    assert strict("dull .")["truncated_tokens"] == 0
    with pytest.raises(LitebertError, match=f"input 0: {full - 32} tokens over the model's max_seq_length 32"):
        strict(LONG_REVIEW)
    # embeddings: a result is a bare vector, so a cut is announced with a warning (and refused on request)
    emb = litebert.pipeline("embeddings", run, "fp32")
    with pytest.warns(UserWarning, match=f"1 of 2 input\\(s\\) cut to the model's max_seq_length 32 "
                                         f"\\({full - 32} tokens dropped"):
        vectors = emb([LONG_REVIEW, "dull ."])
    assert len(vectors) == 2 and len(vectors[0]) == len(vectors[1])
    with pytest.raises(LitebertError, match="tokens over the model's max_seq_length 32"):
        litebert.pipeline("embeddings", run, "fp32", truncation="error")(LONG_REVIEW)


def test_obs5_question_answering_and_multiple_choice_count_what_they_cut(tmp_path, tok):
    """QA cuts a question past max_query_length (the context is covered by windows); multiple choice cuts the
    passage past max_seq_length: each answer says how many tokens that dropped, and truncation='error' refuses."""
    question = LONG_REVIEW + " ?"
    q_tokens = len(tok.encode(question).input_ids) - 2  # without [CLS] and [SEP]
    qa_dir = save_model(tmp_path / "qa", "AlbertForQuestionAnswering", tok, max_position_embeddings=256)
    qa = litebert.pipeline(None, qa_dir, "fp32")
    got = qa([{"question": question, "context": "the actors are good"},
              {"question": "who is good ?", "context": "the actors are good"}])
    assert [g["truncated_tokens"] for g in got] == [q_tokens - 64, 0]
    with pytest.raises(LitebertError, match="tokens over the model's max_seq_length"):
        litebert.pipeline(None, qa_dir, "fp32", truncation="error")({"question": question, "context": "a b"})

    mc_dir = save_model(tmp_path / "mc", "AlbertForMultipleChoice", tok, max_position_embeddings=256)
    passage = " ".join([LONG_REVIEW] * 4)
    mc = litebert.pipeline(None, mc_dir, "fp32")
    long, short = mc([{"context": passage, "question": "is it long ?", "options": ["yes", "no"]},
                      {"context": "it is long", "question": "is it long ?", "options": ["yes", "no"]}])
    assert long["truncated_tokens"] > 0 == short["truncated_tokens"]
    p_tokens = len(tok.encode(passage).input_ids) - 2
    qa_tokens = len(tok.encode("is it long ? yes").input_ids) - 2
    assert long["truncated_tokens"] == p_tokens - (256 - 3 - qa_tokens)


def test_obs4_obs5_obs9_serve_checks_pairs_counts_truncation_and_says_its_precision(run, monkeypatch):
    """Serve: a pair to a single-input model is a 422 naming the model (obs. 4); truncated inputs are counted
    in each answer and in /info (obs. 5); the precision that answered is in each answer and /info (obs. 9)."""
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    import litebert.device
    from litebert.serving import ServeConfig, create_app

    monkeypatch.setattr(litebert.device, "cpu_has_fast_bf16", lambda: True)  # the probe's answer: bf16
    with TestClient(create_app(ServeConfig(model=str(run)).check())) as client:
        r = client.post("/predict", json={"inputs": [{"text": "a", "text_pair": "b"}]})
        assert r.status_code == 422 and r.json()["fields"][0]["field"] == "inputs"
        assert "a text pair" in r.json()["error"] and "sst-2" in r.json()["error"]
        r = client.post("/predict", json={"inputs": [{"text": LONG_REVIEW}, {"text": "dull ."}]})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["precision"] == "bf16" and body["truncated_inputs"] == 1
        assert body["outputs"][0]["truncated_tokens"] > 0 == body["outputs"][1]["truncated_tokens"]
        info = client.get("/info").json()
        assert info["precision"] == "bf16" and info["truncated_inputs"] == 1 and info["inputs"] == 2


@pytest.mark.parametrize("fast_bf16, want", [(True, "bf16"), (False, "fp32")])
def test_obs9_precision_auto_is_the_probe_in_every_door(run, tmp_path, tok, shared_data, monkeypatch, capsys,
                                                         fast_bf16, want):
    """Obs. 9 / issue 37: CLI predict ran `auto` (bf16 here), the pipeline fp32, and nothing said which."""
    import litebert.device
    from litebert.scoring import evaluate, predict

    monkeypatch.setattr(litebert.device, "cpu_has_fast_bf16", lambda: fast_bf16)
    assert litebert.pipeline(None, run).precision == want
    assert {r["precision"] for r in predict("sst-2", run, texts=["dull ."])} == {want}
    assert evaluate("sst-2", run, shared_data / "glue" / "SST-2", limit=4)["precision"] == want
    code, _, err = cli(["predict", "sst-2", "--model", run, "--text", "dull ."], capsys)
    assert code == 0 and f"precision {want}" in err
    mlm = save_model(tmp_path / "mlm", "AlbertForMaskedLM", tok)
    code, out, err = cli(["fill-mask", "--model", mlm, "a [MASK] film"], capsys)
    assert code == 0 and f"at precision {want}" in err and "[MASK] #1" in out


def test_obs10_evaluate_on_a_split_without_labels_is_a_clean_refusal(run, shared_data, capsys):
    """Obs. 10: `evaluate sst-2 --split test` ended in a KeyError traceback."""
    code, out, err = cli(["evaluate", "sst-2", "--model", run, "--data", shared_data / "glue" / "SST-2",
                          "--split", "test", "--limit", 4], capsys)
    assert code == 2 and "no gold label" in err and "litebert predict sst-2" in err and "Traceback" not in err


def _constant_head(path, **kw):
    """A saved head whose weights are zero: every input gets the same output (its bias)."""
    import torch

    from litebert.model import MODEL_CLASSES
    from litebert.records import saved_architecture

    model = MODEL_CLASSES[saved_architecture(path)].from_pretrained(path)
    with torch.no_grad():
        model.classifier.weight.zero_()
        for i, v in kw.get("bias", {}).items():
            model.classifier.bias[i] = v
    model.save_pretrained(path)
    return path


def test_obs12_a_constant_regression_is_flagged_and_its_nan_explained(tmp_path, tok, shared_data, capsys):
    """Obs. 12: STS-B showed pearson=nan with no explanation."""
    from litebert.scoring import evaluate, predict
    from litebert.cli.finetune import predict_summary

    reg = _constant_head(save_model(tmp_path / "reg", "AlbertForSequenceClassification", tok, num_labels=1,
                                    problem_type="regression"))
    result = evaluate("sts-b", reg, shared_data / "glue" / "STS-B", limit=8, precision="fp32", max_seq_length=64)
    assert result["collapse"] == "constant" and result["pearson"] != result["pearson"]  # NaN
    err = capsys.readouterr().err
    assert "collapsed to a constant" in err and "NaN" in err
    rows = predict("sts-b", reg, shared_data / "glue" / "STS-B" / "test.tsv", precision="fp32", max_seq_length=64)
    assert "collapsed model" in predict_summary(rows[:20], "-")


def test_obs12_a_tagger_predicting_only_O_is_flagged(tmp_path, tok, shared_data, capsys):
    """Obs. 12: NER showed f1 0.0 / accuracy 0.78 with no warning."""
    from litebert.data.tasks import get_task
    from litebert.scoring import evaluate

    labels = list(get_task("conll2003").labels)
    tagger = _constant_head(save_model(tmp_path / "ner", "AlbertForTokenClassification", tok,
                                       num_labels=len(labels), label_names=labels),
                            bias={labels.index("O"): 5.0})
    result = evaluate("conll2003", tagger, shared_data / "conll2003", limit=8, precision="fp32", max_seq_length=64)
    assert result["collapse"] == "one tag" and result["single_class_prediction"] == "O" and result["f1"] == 0
    assert "every dev word is tagged 'O'" in capsys.readouterr().err


def test_obs12_ablate_marks_an_all_collapsed_row_instead_of_averaging_it():
    from litebert.lab.ablate import format_table

    rows = [{"variant": "a", "sst2_acc": [0.491] * 2, "sst2_acc_mean": 0.491, "sst2_acc_std": 0.0,
             "sst2_collapsed": 2},
            {"variant": "b", "sst2_acc": [0.6, 0.7], "sst2_acc_mean": 0.65, "sst2_acc_std": 0.05,
             "sst2_collapsed": 1}]
    table = format_table(rows).splitlines()
    assert "COLLAPSED" in table[2] and "0.491 ±" not in table[2]
    assert "0.650 ± 0.050 (n=2), 1 of 2 seeds collapsed" in table[3]


def test_a_small_task_folder_gets_an_epoch_schedule(tmp_path, tok, shared_data):
    """A task folder holding few rows (not a --max-train-examples subset) got the paper's 20,935 SST-2 steps."""
    from litebert.finetune import FinetuneConfig, finetune

    sst = shared_data / "glue" / "SST-2"
    folder = tmp_path / "SST-2-small"
    folder.mkdir()
    lines = (sst / "train.tsv").read_text().splitlines()
    (folder / "train.tsv").write_text("\n".join(lines[:41]) + "\n")  # header + 40 rows
    (folder / "dev.tsv").write_text("\n".join((sst / "dev.tsv").read_text().splitlines()[:5]) + "\n")
    base = save_model(tmp_path / "base", "AlbertForPreTraining", tok)
    result = finetune(FinetuneConfig(task="sst-2", model=str(base), data=str(folder), out=str(tmp_path / "run"),
                                     max_seq_length=16, precision="fp32", log_every=100))
    assert result["steps"] == 4  # 3 epochs x 40 rows / batch 32, not the paper's 20,935
