"""Smoke runs of finetune -> evaluate -> predict on tiny slices of every task type, with real data files."""

import json

import pytest
import torch

from litebert import AlbertConfig, AlbertForPreTraining
from litebert.errors import LitebertError
from litebert.finetune import FinetuneConfig, finetune
from litebert.finetune_setup import length_grouped_batches
from litebert.scoring import evaluate, predict

TINY = dict(embedding_size=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
            max_position_embeddings=128)


def make_model_dir(path, tokenizer):
    torch.manual_seed(0)
    model = AlbertForPreTraining(AlbertConfig(vocab_size=tokenizer.vocab_size, **TINY))
    model.save_pretrained(path, tokenizer=tokenizer)
    return path


@pytest.fixture(scope="module")
def english_model(tmp_path_factory, shared_data):
    from litebert.tokenizer import AlbertTokenizer

    tok = AlbertTokenizer(shared_data / "albert-vocab" / "30k-clean.model")
    return make_model_dir(tmp_path_factory.mktemp("en-model"), tok)


@pytest.fixture(scope="module")
def chinese_model(tmp_path_factory, shared_data):
    from litebert.tokenizer import WordPieceTokenizer

    tok = WordPieceTokenizer(shared_data / "chinese" / "albert_zh_vocab.txt")
    return make_model_dir(tmp_path_factory.mktemp("zh-model"), tok)


def run_task(tmp_path, model, task, data, *, eval_split=None, predict_input=None, **kw):
    cfg = FinetuneConfig(task=task, model=str(model), data=str(data), out=str(tmp_path / "run"), steps=3,
                         batch_size=4, max_seq_length=64, max_train_examples=16, max_eval_examples=8,
                         precision="fp32", lr=1e-4, log_every=1, **kw)
    result = finetune(cfg)
    assert result["steps"] == 3 and result["best_step"] is not None
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines if "loss" in r] == [1, 2, 3]
    assert all(r["loss"] is not None and r["loss"] > 0 for r in lines if "loss" in r)
    assert (tmp_path / "run" / "best" / "model.safetensors").is_file()
    custom = {k: kw[k] for k in ("format", "text_columns", "label_column", "head") if k in kw}
    scores = evaluate(task, tmp_path / "run", data, split=eval_split, limit=8, max_seq_length=64, **custom)
    if predict_input is not None:
        rows = predict(task, tmp_path / "run", predict_input, max_seq_length=64, **custom)
        assert rows
        return result, scores, rows
    return result, scores, None


def test_sst2_classification(tmp_path, english_model, shared_data):
    _, scores, rows = run_task(tmp_path, english_model, "sst-2", shared_data / "glue" / "SST-2",
                               predict_input=shared_data / "glue" / "SST-2" / "test.tsv")
    assert 0.0 <= scores["accuracy"] <= 1.0 and scores["examples"] == 8
    assert len(rows) == 1821 and rows[0]["label"] == ("negative", "positive")[rows[0]["label_id"]]
    assert abs(sum(rows[0]["scores"].values()) - 1) < 1e-5
    # best/ carries the tokenizer transformers reads as litebert does (tokenizer.json; test_tokenizer_hf.py)
    transformers = pytest.importorskip("transformers")
    from litebert.tokenizer import load_tokenizer

    texts = ["it 's a charming and often affecting journey . ", "a gripping , funny film -- 1,999 ( sort of ) ."]
    best = tmp_path / "run" / "best"
    assert transformers.AutoTokenizer.from_pretrained(best)(texts)["input_ids"] == \
        load_tokenizer(best).batch_encode(texts)["input_ids"]


def test_gradient_checkpointing_is_a_finetune_option(tmp_path, english_model, shared_data, monkeypatch):
    """--gradient-checkpointing recomputes the encoder's layers in the backward pass (counted at the call into
    torch's checkpoint) and trains to the same losses."""
    import litebert.model

    calls, real = [], litebert.model.checkpoint
    monkeypatch.setattr(litebert.model, "checkpoint", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    losses = []
    for flag in (False, True):
        run_task(tmp_path / str(flag), english_model, "sst-2", shared_data / "glue" / "SST-2",
                 gradient_checkpointing=flag)
        assert bool(calls) == flag
        lines = (tmp_path / str(flag) / "run" / "metrics.jsonl").read_text().splitlines()
        losses.append([r["loss"] for r in map(json.loads, lines) if "loss" in r])
    assert losses[0] == pytest.approx(losses[1], rel=1e-5)


def test_stsb_regression(tmp_path, english_model, shared_data):
    _, scores, _ = run_task(tmp_path, english_model, "sts-b", shared_data / "glue" / "STS-B")
    assert {"pearson", "spearman", "mse"} <= set(scores)


def test_cola_headerless_mcc(tmp_path, english_model, shared_data):
    _, scores, _ = run_task(tmp_path, english_model, "cola", shared_data / "glue" / "CoLA")
    assert "mcc" in scores


def test_custom_multilabel_csv(tmp_path, english_model):
    rows = ["text,tags"] + [f'"sentence number {i} about things",{"a|b" if i % 2 else "b"}' for i in range(12)]
    for split in ("train", "dev"):
        (tmp_path / f"{split}.csv").write_text("\n".join(rows) + "\n")
    _, scores, _ = run_task(tmp_path, english_model, "custom", tmp_path, format="csv", text_columns="text",
                            label_column="tags", head="multilabel")
    assert {"micro_f1", "macro_f1", "subset_accuracy"} <= set(scores)


def test_custom_missing_column_is_clear(tmp_path, english_model):
    (tmp_path / "train.csv").write_text("text,label\nhello,1\n")
    (tmp_path / "dev.csv").write_text("text,label\nhello,1\n")
    with pytest.raises(LitebertError, match="sentiment"):
        run_task(tmp_path, english_model, "custom", tmp_path, format="csv", text_columns="text",
                 label_column="sentiment")


def test_conll_ner(tmp_path, english_model, shared_data):
    _, scores, rows = run_task(tmp_path, english_model, "conll2003", shared_data / "conll2003",
                               predict_input=shared_data / "conll2003" / "eng.testb")
    assert {"precision", "recall", "f1"} <= set(scores)
    from litebert.data.ner import read_conll

    first = read_conll(shared_data / "conll2003" / "eng.testb")[0].words
    # every word of the sentence is tagged, or counted as cut by max_seq_length (the token family's schema)
    assert [w["word"] for w in rows[0]["words"]] == first[:len(first) - rows[0]["truncated_words"]]


def test_squad_span(tmp_path, english_model, shared_data):
    dev = shared_data / "squad" / "dev-v1.1.json"
    _, scores, _ = run_task(tmp_path, english_model, "squad1.1", dev, dev=str(dev), doc_stride=32,
                            max_query_length=16)
    assert {"exact_match", "f1"} <= set(scores)


def test_squad_v2_answerability(tmp_path, english_model):
    context = "The quick brown fox jumps over the lazy dog near the river bank in the morning."
    qas = [{"id": f"q{i}", "question": q, "answers": a, "is_impossible": not a} for i, (q, a) in enumerate([
        ("What jumps?", [{"text": "The quick brown fox", "answer_start": 0}]),
        ("Who is lazy?", [{"text": "dog", "answer_start": 40}]),
        ("What is the capital of Peru?", []),
        ("When does it jump?", [{"text": "in the morning", "answer_start": 64}]),
    ])]
    data = {"version": "v2.0", "data": [{"title": "t", "paragraphs": [{"context": context, "qas": qas}]}]}
    path = tmp_path / "v2.json"
    path.write_text(json.dumps(data))
    _, scores, _ = run_task(tmp_path, english_model, "squad2.0", path, dev=str(path))
    assert {"exact", "f1", "HasAns_f1", "NoAns_f1", "best_f1", "best_f1_thresh"} <= set(scores)


def test_a_span_run_that_answers_nothing_says_so(tmp_path, english_model, capsys):
    # Trained only on unanswerable questions at a high rate, the span head learns to put [CLS] first everywhere:
    # every dev answer is empty, and the run and evaluate must say so rather than report v2's NoAns score alone.
    context = "The quick brown fox jumps over the lazy dog near the river bank in the morning."
    qas = [{"id": f"q{i}", "question": f"What is the capital of country number {i}?", "answers": [],
            "is_impossible": True} for i in range(8)]
    data = {"version": "v2.0", "data": [{"title": "t", "paragraphs": [{"context": context, "qas": qas}]}]}
    path = tmp_path / "v2.json"
    path.write_text(json.dumps(data))
    result = finetune(FinetuneConfig(task="squad2.0", model=str(english_model), data=str(path), dev=str(path),
                                     out=str(tmp_path / "run"), steps=12, batch_size=4, max_seq_length=64,
                                     precision="fp32", lr=1e-3, log_every=4))
    assert any("every dev answer" in w and "is empty (8 questions)" in w for w in result["warnings"]), result
    assert "WARNING: every dev answer" in capsys.readouterr().err
    scores = evaluate("squad2.0", tmp_path / "run", path, max_seq_length=64)
    assert scores["collapse"] == "no answer" and scores["empty_answers"] == 8


def test_race_multiple_choice(tmp_path, english_model, shared_data):
    _, scores, _ = run_task(tmp_path, english_model, "race", shared_data / "race" / "dev", dev=str(shared_data /
                                                                                                   "race" / "dev"))
    assert 0.0 <= scores["accuracy"] <= 1.0


def test_lcqmc_chinese(tmp_path, chinese_model, shared_data):
    lcqmc = shared_data / "chinese" / "lcqmc"
    _, scores, _ = run_task(tmp_path, chinese_model, "lcqmc", lcqmc / "dev.txt", dev=str(lcqmc / "dev.txt"))
    assert "accuracy" in scores


def test_cmrc2018_chinese_span(tmp_path, chinese_model, shared_data):
    dev = shared_data / "chinese" / "cmrc2018" / "cmrc2018_trial.json"
    _, scores, _ = run_task(tmp_path, chinese_model, "cmrc2018", dev, dev=str(dev))
    assert {"em", "f1"} <= set(scores)


def test_vocab_mismatch_is_clear(tmp_path, english_model):
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(english_model, bad)
    cfg = json.loads((bad / "config.json").read_text())
    cfg["vocab_size"] = 1000
    (bad / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(LitebertError):
        run_task(tmp_path, bad, "sst-2", english_model)


def test_length_grouped_batches_cover_once_and_group_lengths():
    lengths = [((i * 37) % 100) + 1 for i in range(1000)]
    batches = length_grouped_batches(lengths, 10, seed=0, epoch=0)
    flat = sorted(i for b in batches for i in b)
    assert flat == list(range(1000))
    spread = sum(max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in batches) / len(batches)
    assert spread < 10  # random batches would spread ~80
    assert batches != length_grouped_batches(lengths, 10, seed=0, epoch=1)


# --------------------------------------------------------------------------------------------- no silent wrong numbers


def tiny_cfg(tmp_path, model, task, data, **kw):
    opts = dict(task=task, model=str(model), data=str(data), out=str(tmp_path / "run"), batch_size=4,
                max_seq_length=32, precision="fp32", lr=1e-4, log_every=1, max_eval_examples=8)
    return FinetuneConfig(**{**opts, **kw})


def test_a_training_file_without_dev_is_refused(tmp_path, english_model, shared_data):
    from litebert.errors import ConfigError

    with pytest.raises(ConfigError, match="--dev"):
        finetune(tiny_cfg(tmp_path, english_model, "sst-2", shared_data / "glue" / "SST-2" / "train.tsv", steps=1,
                          max_train_examples=8))
    assert not (tmp_path / "run" / "best").exists()


def test_evaluate_and_predict_refuse_a_head_that_was_never_trained(tmp_path, english_model, shared_data):
    sst2 = shared_data / "glue" / "SST-2"
    refused = r"is a mlm model \(AlbertForPreTraining\); task sst-2 needs a classification model"
    with pytest.raises(LitebertError, match=refused):
        evaluate("sst-2", english_model, sst2, limit=8, max_seq_length=32)
    with pytest.raises(LitebertError, match=refused):
        predict("sst-2", english_model, sst2 / "test.tsv", max_seq_length=32)


def test_a_training_subset_gets_an_epoch_schedule_and_a_start_line(tmp_path, english_model, shared_data, capsys):
    # The paper's 20,935 SST-2 steps are sized for 67k rows; on 16 rows they would be ~5,000 epochs.
    result = finetune(tiny_cfg(tmp_path, english_model, "sst-2", shared_data / "glue" / "SST-2",
                               max_train_examples=16, max_eval_examples=2))
    assert result["steps"] == 12  # 3 epochs x 16 examples / batch 4
    err = capsys.readouterr().err.splitlines()
    start = err[0]
    assert start.startswith("litebert finetune: sst-2") and "16 train examples (of 67349)" in start
    assert "12 steps = 3.00 epochs" in start and "batch 4" in start and "lr 0.0001" in start and "fp32" in start
    # not a terminal: a loss line every --log-every steps, and the dev scores, with elapsed time and ETA
    import re

    steps = [x for x in err if re.fullmatch(r"step \d+/12 loss=\d+\.\d{4} lr=\S+ elapsed=\d+:\d\d eta=\d+:\d\d", x)]
    assert len(steps) == 12, err
    assert sum(bool(re.fullmatch(r"step \d+: dev accuracy=\d\.\d{4} elapsed=\d+:\d\d", x)) for x in err) == 3, err


def test_a_run_that_predicts_one_class_says_so(tmp_path, english_model, capsys):
    # Every dev row is the same text, so every dev prediction is necessarily the same class.
    (tmp_path / "train.csv").write_text("text,label\n" + "".join(f"row {i} here,{'ab'[i % 2]}\n" for i in range(8)))
    (tmp_path / "dev.csv").write_text("text,label\n" + "".join(f"same text,{'ab'[i % 2]}\n" for i in range(6)))
    custom = dict(format="csv", text_columns="text", label_column="label")
    result = finetune(tiny_cfg(tmp_path, english_model, "custom", tmp_path, steps=2, **custom))
    assert "collapsed to one class" in result["warnings"][0]
    assert "WARNING: every dev prediction" in capsys.readouterr().err
    evals = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines() if "split" in x]
    assert evals and all(r["single_class_prediction"] in ("a", "b") for r in evals)
    scores = evaluate("custom", tmp_path / "run", tmp_path, max_seq_length=32, **custom)
    assert scores["single_class_prediction"] in ("a", "b") and scores["accuracy"] == 0.5


def test_a_run_that_picks_one_option_says_so(tmp_path, english_model, capsys):
    # The four options of every question are the same text, so the model scores them equally and every pick is
    # the first option: the choice family's collapse ("one option") is what the run and evaluate must report.
    obj = {"article": "The cat sat on the mat and looked at the door for a long time.", "id": "x.txt",
           "questions": [f"What did the cat do {i}?" for i in range(6)],
           "options": [["it sat on the mat"] * 4 for _ in range(6)], "answers": list("ABCDAB")}
    for split in ("train", "dev"):
        (tmp_path / split).mkdir()
        (tmp_path / split / "x.txt").write_text(json.dumps(obj))
    result = finetune(FinetuneConfig(task="race", model=str(english_model), data=str(tmp_path),
                                     out=str(tmp_path / "run"), steps=2, batch_size=2, max_seq_length=64,
                                     precision="fp32", lr=1e-4, log_every=1))
    assert "every dev prediction" in result["warnings"][0] and "option A" in result["warnings"][0]
    assert "WARNING: every dev prediction" in capsys.readouterr().err
    scores = evaluate("race", tmp_path / "run", tmp_path / "dev", max_seq_length=64)  # a folder of RACE files
    assert scores["collapse"] == "one option" and scores["single_option"] == "A"
    assert scores["accuracy"] == 2 / 6  # answers A, A of six


def test_a_rerun_into_a_finished_run_is_refused_unless_overwrite(tmp_path, english_model, capsys):
    # Before: the second run appended its records to the first run's metrics.jsonl and kept the old best/ until
    # the new run beat its score, so a plot or `evaluate` mixed two runs without a word.
    from litebert.errors import ConfigError

    (tmp_path / "train.csv").write_text("text,label\n" + "".join(f"row {i} here,{'ab'[i % 2]}\n" for i in range(8)))
    (tmp_path / "dev.csv").write_text("text,label\n" + "".join(f"dev {i} row,{'ab'[i % 2]}\n" for i in range(4)))
    custom = dict(format="csv", text_columns="text", label_column="label")
    finetune(tiny_cfg(tmp_path, english_model, "custom", tmp_path, steps=2, **custom))
    with pytest.raises(ConfigError, match="already holds a fine-tuning run .*--overwrite"):
        finetune(tiny_cfg(tmp_path, english_model, "custom", tmp_path, steps=3, **custom))
    # fine-tuning the run's own best/ into the same --out would delete the model being loaded
    with pytest.raises(ConfigError, match="lies inside --out"):
        finetune(tiny_cfg(tmp_path, tmp_path / "run" / "best", "custom", tmp_path, steps=3, overwrite=True,
                          **custom))
    assert (tmp_path / "run" / "best" / "model.safetensors").is_file()
    result = finetune(tiny_cfg(tmp_path, english_model, "custom", tmp_path, steps=3, overwrite=True, **custom))
    records = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if "loss" in r] == [1, 2, 3]  # only the new run's records
    assert result["steps"] == 3 and json.loads((tmp_path / "run" / "result.json").read_text())["steps"] == 3


def test_an_empty_class_label_is_refused_with_its_line(tmp_path):
    from litebert.data.tasks import custom_task, read_examples
    from litebert.errors import DataFormatError

    (tmp_path / "train.csv").write_text("text,label\nhello world,pos\nbad film,\ngood one,neg\n")
    spec = custom_task(format="csv", text_columns=["text"], label_column="label")
    with pytest.raises(DataFormatError, match=r"train\.csv:3: empty label"):
        read_examples(spec, tmp_path / "train.csv", "train")
    (tmp_path / "test.csv").write_text("text,label\nhello world,\n")  # a test file may leave labels empty
    assert read_examples(spec, tmp_path / "test.csv", "test")[0].label is None


def test_a_sequence_longer_than_the_position_table_is_refused_at_start(tmp_path, shared_data):
    from litebert.errors import ConfigError
    from litebert.tokenizer import AlbertTokenizer

    tok = AlbertTokenizer(shared_data / "albert-vocab" / "30k-clean.model")
    torch.manual_seed(0)
    short = tmp_path / "short"
    AlbertForPreTraining(AlbertConfig(vocab_size=tok.vocab_size, **{**TINY, "max_position_embeddings": 64})
                         ).save_pretrained(short, tokenizer=tok)
    rte = shared_data / "glue" / "RTE"  # its default max_seq_length is 512
    with pytest.raises(ConfigError, match="--max-seq-length 512.*max_position_embeddings 64"):
        finetune(tiny_cfg(tmp_path, short, "rte", rte, steps=1, max_seq_length=None, max_train_examples=4))
    finetune(tiny_cfg(tmp_path, short, "rte", rte, steps=1, max_seq_length=64, max_train_examples=4))
    with pytest.raises(ConfigError, match="max_position_embeddings 64"):
        evaluate("rte", tmp_path / "run", rte, limit=4, max_seq_length=512)
    with pytest.raises(ConfigError, match="max_position_embeddings 64"):
        predict("rte", tmp_path / "run", rte / "test.tsv", max_seq_length=512)
    assert evaluate("rte", tmp_path / "run", rte, limit=4)["examples"] == 4  # the run's own 64, from its record


# --------------------------------------------------------------------------------------------- the command line


def cli(argv, capsys):
    from litebert.cli import main

    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_preset_where_weights_are_needed_says_how_to_get_weights(tmp_path, shared_data, capsys):
    code, _, err = cli(["finetune", "sst-2", "--model", "albert-base-v2", "--data", shared_data / "glue" / "SST-2",
                        "--out", tmp_path / "run"], capsys)
    assert code == 2 and "is a preset: an architecture with no weights" in err and "litebert convert" in err


def test_predict_text_from_the_command_line_with_label_names_and_the_record(tmp_path, english_model, shared_data,
                                                                             capsys):
    sst2 = shared_data / "glue" / "SST-2"
    run = tmp_path / "run"
    code, out, err = cli(["finetune", "sst-2", "--model", english_model, "--data", sst2, "--out", run, "--steps", 2,
                          "--batch-size", 4, "--max-seq-length", 32, "--max-train-examples", 8,
                          "--max-eval-examples", 4, "--precision", "fp32"], capsys)
    assert code == 0, err
    code, out, err = cli(["predict", "sst-2", "--model", run, "--text", "a gripping film", "--text", "dull"], capsys)
    assert code == 0, err
    rows = [json.loads(x) for x in out.splitlines()]
    assert [r["text"] for r in rows] == ["a gripping film", "dull"]
    assert all(r["label"] == ("negative", "positive")[r["label_id"]] for r in rows)
    assert f"--model {run}: using {run / 'best'}" in err
    # the run's curves: training loss and the dev metric, legends clear of the curves
    pytest.importorskip("matplotlib")
    from litebert.plot import build_figure, read_metrics

    fig = build_figure(read_metrics(run), "run")
    labels = [{line.get_label() for line in ax.lines} for ax in fig.axes]
    assert {"loss"} in labels and {"dev accuracy"} in labels
    fig.canvas.draw()
    assert not any(ax.get_legend().get_window_extent().overlaps(other.get_window_extent())
                   for ax in fig.axes for other in fig.axes)
    # --config with the run record repeats the run; flags on the line win
    code, out, err = cli(["finetune", "--config", run / "finetune.json", "--out", tmp_path / "again"], capsys)
    assert code == 0, err
    first, again = (json.loads((d / "finetune.json").read_text()) for d in (run, tmp_path / "again"))
    assert {k: v for k, v in first.items() if k != "out"} == {k: v for k, v in again.items() if k != "out"}


def test_a_custom_run_is_predicted_with_the_format_it_was_trained_on(tmp_path, english_model, capsys):
    for split in ("train", "dev"):
        (tmp_path / f"{split}.tsv").write_text("review\tstars\n" + "".join(
            f"review number {i}\t{'good' if i % 2 else 'bad'}\n" for i in range(8)))
    (tmp_path / "new.tsv").write_text("review\nnever seen before\n")
    run = tmp_path / "run"
    code, _, err = cli(["finetune", "custom", "--format", "tsv", "--text-columns", "review", "--label-column",
                        "stars", "--model", english_model, "--data", tmp_path, "--out", run, "--steps", 1,
                        "--batch-size", 4, "--max-seq-length", 32, "--precision", "fp32"], capsys)
    assert code == 0, err
    code, out, err = cli(["predict", "custom", "--model", run, "--input", tmp_path / "new.tsv"], capsys)
    assert code == 0, err
    row = json.loads(out)
    assert row["text"] == "never seen before" and row["label"] in ("bad", "good")


def test_grad_accum_keeps_its_old_meaning(tmp_path, english_model, shared_data, capsys):
    # old: --batch-size 2 --grad-accum 2 = micro batches of 2, 4 examples per step
    result = finetune(tiny_cfg(tmp_path, english_model, "sst-2", shared_data / "glue" / "SST-2", steps=1,
                               batch_size=2, grad_accum=2, max_train_examples=8, max_eval_examples=2))
    assert result["steps"] == 1
    saved = json.loads((tmp_path / "run" / "finetune.json").read_text())
    assert (saved["batch_size"], saved["micro_batch_size"], saved["grad_accum"]) == (4, 2, None)
    assert "batch 4 (2 x 2 accumulation)" in capsys.readouterr().err


def test_fill_mask_prints_readable_tokens_and_the_filled_sentence(english_model, capsys):
    code, out, _ = cli(["fill-mask", "--model", english_model, "the capital of france is [MASK]."], capsys)
    assert code == 0
    lines = out.splitlines()
    filled = lines[1].removeprefix("  -> ")
    assert filled.startswith("the capital of france is ") and filled.endswith(".") and "[MASK]" not in filled
    assert "\u2581" not in out  # no SentencePiece word-start marks


def test_fill_mask_shows_a_bare_word_start_piece_legibly(shared_data, tmp_path, capsys):
    """SentencePiece's bare "▁" (a word starts here, spelled by the next pieces) reads as an empty string; the
    listing shows it as "<word start>" instead of a blank before its score."""
    from litebert.families.mlm import WORD_START
    from litebert.tokenizer import AlbertTokenizer

    tok = AlbertTokenizer(shared_data / "albert-vocab" / "30k-clean.model")
    bare = tok.convert_tokens_to_ids(["\u2581"])[0]
    model_dir = make_model_dir(tmp_path / "model", tok)
    model = AlbertForPreTraining.from_pretrained(model_dir)
    with torch.no_grad():
        model.mlm.bias[bare] = 30.0  # the MLM now proposes the bare piece first for every [MASK]
    model.save_pretrained(model_dir, tokenizer=tok)
    code, out, _ = cli(["fill-mask", "--model", model_dir, "--top-k", 2, "one [MASK] two"], capsys)
    assert code == 0
    listing = out.splitlines()[2]
    assert listing.startswith(f"  [MASK] #1: {WORD_START} (1)  "), listing
    assert "\u2581" not in out
