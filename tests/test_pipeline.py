"""`litebert.pipeline`: every task from strings, checked against a direct forward of the same model (or against
the fine-tuning code's own `predict`), batched == one at a time, and fp32 / bf16 / ONNX agreeing."""

import dataclasses
import functools
import json
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch

import litebert
from litebert.errors import LitebertError
from litebert.finetune import FinetuneConfig
from litebert.scoring import predict
from litebert.families.token import WORD_RE, entities
from tiny_models import TEXTS, _numbers, same, save_model, tokenizer



@pytest.fixture(scope="module")
def tok(shared_data):
    return tokenizer(shared_data)


@pytest.fixture(scope="module")
def dirs(tmp_path_factory, tok):
    """One saved directory per head (seeded random weights)."""
    root = tmp_path_factory.mktemp("heads")
    return {
        "pretraining": save_model(root / "pt", "AlbertForPreTraining", tok),
        "classification": save_model(root / "clf", "AlbertForSequenceClassification", tok, num_labels=3,
                                     label_names=["neg", "neu", "pos"]),
        "regression": save_model(root / "reg", "AlbertForSequenceClassification", tok, num_labels=1,
                                 problem_type="regression"),
        "multilabel": save_model(root / "ml", "AlbertForSequenceClassification", tok, num_labels=3,
                                 problem_type="multi_label_classification", label_names=["a", "b", "c"]),
        "choice": save_model(root / "mc", "AlbertForMultipleChoice", tok),
        "token": save_model(root / "tok", "AlbertForTokenClassification", tok, num_labels=3,
                            label_names=["B-PER", "I-PER", "O"]),
        "qa": save_model(root / "qa", "AlbertForQuestionAnswering", tok),
    }


@functools.cache
def _model(cls_name, model_dir):
    return getattr(litebert, cls_name).from_pretrained(model_dir).eval()


def forward(cls_name, model_dir, **inputs):
    model = _model(cls_name, model_dir)
    with torch.no_grad():
        return model(**{k: torch.tensor(v) for k, v in inputs.items()})


def encoded(tok, text, pair=None, max_length=64):
    enc = tok.encode(text, pair, max_length=max_length)
    return dict(input_ids=[enc.input_ids], token_type_ids=[enc.token_type_ids], attention_mask=[enc.attention_mask])


def test_classification_labels_by_name_match_a_direct_forward(dirs, tok):
    clf = litebert.pipeline(None, dirs["classification"], "fp32")  # the task comes from the directory
    got = clf(TEXTS)
    for text, result in zip(TEXTS, got):
        probs = forward("AlbertForSequenceClassification", dirs["classification"], **encoded(tok, text)).logits
        probs = probs.softmax(-1)[0].tolist()
        assert result["label"] == ["neg", "neu", "pos"][int(np.argmax(probs))]
        np.testing.assert_allclose([result["scores"][k] for k in ("neg", "neu", "pos")], probs, atol=1e-5)
        assert result["score"] == max(result["scores"].values())
    same([clf(t) for t in TEXTS], got)  # batched (length-grouped) == one at a time, in input order


def test_regression_pairs_and_multilabel(dirs, tok):
    reg = litebert.pipeline("text-classification", dirs["regression"], "fp32")
    pairs = [("a man plays a guitar .", "a person plays music ."), ("cats sleep .", "the market fell sharply .")]
    got = reg(pairs + [{"text": "cats sleep .", "text_pair": "the market fell sharply ."}, "one text alone"])
    for (a, b), result in zip(pairs, got):
        want = forward("AlbertForSequenceClassification", dirs["regression"], **encoded(tok, a, b)).logits[0, 0]
        assert result == {"score": pytest.approx(float(want), abs=1e-5), "truncated_tokens": 0}
    assert got[2] == got[1]  # the dict form of a pair is the same input
    ml = litebert.pipeline(None, dirs["multilabel"], "fp32")
    for text, result in zip(TEXTS, ml(TEXTS)):
        sig = forward("AlbertForSequenceClassification", dirs["multilabel"], **encoded(tok, text)).logits[0].sigmoid()
        np.testing.assert_allclose([result["scores"][k] for k in "abc"], sig.tolist(), atol=1e-5)
        assert result["labels"] == [k for k, p in zip("abc", sig.tolist()) if p > 0.5]


def test_multiple_choice_with_any_number_of_options(dirs, tok):
    mc = litebert.pipeline(None, dirs["choice"], "fp32")
    items = [{"context": "tom went to the market to buy apples .", "question": "where did tom go ?",
              "options": ["the market", "school", "the moon"]},
             {"context": "it rained all day .", "question": "how was the weather ?",
              "options": ["sunny", "rainy", "windy", "snowy"]}]
    got = mc(items)
    for item, result in zip(items, got):
        from litebert.data.race import qa_text

        # Each (context, option) pair is scored on its own: one forward per option, unpadded.
        rows = [{k: [v] for k, v in encoded(tok, item["context"], qa_text(item["question"], o)).items()}
                for o in item["options"]]
        want = torch.cat([forward("AlbertForMultipleChoice", dirs["choice"], **r).logits[0] for r in rows]).softmax(-1)
        np.testing.assert_allclose(result["scores"], want.tolist(), atol=1e-5)
        assert result["option"] == item["options"][result["answer"]] and result["answer"] == int(want.argmax())
    same([mc(i) for i in items], got)


def test_fill_mask_matches_the_masked_lm_model(dirs, tok):
    """The pipeline's top tokens are the MLM head's own softmax at each [MASK] (special tokens never proposed)."""
    import torch

    from litebert.model import AlbertForMaskedLM

    fm = litebert.pipeline(None, dirs["pretraining"], "fp32")
    texts = ["the capital of [MASK] is paris .", "[MASK] and [MASK] went up the hill ."]
    got = fm(texts, top_k=3)
    model = AlbertForMaskedLM.from_pretrained(dirs["pretraining"]).eval()
    assert [len(g) for g in got] == [1, 2]
    for text, g_text in zip(texts, got):
        ids = [tok.cls_id]
        for i, part in enumerate(text.split("[MASK]")):
            ids += tok.encode_ids(part) if part.strip() else []
            ids += [tok.mask_id] if i < text.count("[MASK]") else [tok.sep_id]
        with torch.no_grad():
            logits = model(torch.tensor([ids])).mlm_logits[0]  # [L, V]
        logits[:, sorted(tok.special_ids)] = -float("inf")
        probs = logits.softmax(-1)[torch.tensor(ids) == tok.mask_id]  # [P, V]
        for g, p in zip(g_text, probs):
            top = p.topk(3)
            assert [x["token_id"] for x in g] == top.indices.tolist()
            np.testing.assert_allclose([x["score"] for x in g], top.values.tolist(), atol=1e-5)


def test_embeddings_mean_and_cls_pooling(dirs, tok):
    emb = litebert.pipeline("embeddings", dirs["classification"], "fp32")  # any directory has an encoder
    mean, cls, unit = emb(TEXTS), emb(TEXTS, pooling="cls"), emb(TEXTS, normalize=True)
    for i, text in enumerate(TEXTS):
        hidden = forward("AlbertModel", dirs["classification"], **encoded(tok, text)).sequence_output[0]  # [L, H]
        np.testing.assert_allclose(mean[i], hidden.mean(0).tolist(), atol=1e-5)
        np.testing.assert_allclose(cls[i], hidden[0].tolist(), atol=1e-5)
        np.testing.assert_allclose(unit[i], (hidden.mean(0) / hidden.mean(0).norm()).tolist(), atol=1e-5)
    same(emb(TEXTS[2]), mean[2])
    shared = litebert.pipeline(None, dirs["classification"], "fp32").embeddings()  # the task model's own encoder
    same(shared(TEXTS, pooling="cls"), cls)


def test_entities_group_word_tags_with_offsets():
    text = "Ada Lovelace met Charles Babbage in London ."
    words = [(m.group(), m.start(), m.end()) for m in WORD_RE.finditer(text)]
    tags = ["B-PER", "I-PER", "O", "B-PER", "I-PER", "O", "I-LOC", "O"]  # IOB1: I- after O opens an entity
    tagged = [{"word": w, "start": s, "end": e, "tag": t, "score": 0.5 + i / 20}
              for i, ((w, s, e), t) in enumerate(zip(words, tags))]
    got = entities(text, tagged)
    assert [(e["entity"], e["text"], e["start"], e["end"]) for e in got] == [
        ("PER", "Ada Lovelace", 0, 12), ("PER", "Charles Babbage", 17, 32), ("LOC", "London", 36, 42)]
    assert got[0]["score"] == pytest.approx((0.5 + 0.55) / 2)


def run_dir(tmp_path, model_dir, **settings):
    """A fine-tuning run's layout around a saved head: RUN/best/ and RUN/finetune.json with the settings the run
    used (what `finetune` writes; tests/test_readme.py reads a run that `finetune` itself wrote)."""
    run = tmp_path / "run"
    shutil.copytree(model_dir, run / "best")
    (run / "finetune.json").write_text(json.dumps({**dataclasses.asdict(FinetuneConfig()), **settings}))
    return run


def test_token_classification_of_a_run_matches_predict(tmp_path, dirs):
    run = run_dir(tmp_path, dirs["token"], task="conll2003", max_seq_length=64)
    ner = litebert.pipeline(None, run, "fp32")  # a run dir: its best/ checkpoint, its labels
    text = "EU rejects German call to boycott British lamb , says Peter Blackburn in Brussels ."
    result = ner(text)
    words = result["words"]
    assert [text[w["start"]:w["end"]] for w in words] == text.split()
    conll = tmp_path / "in.txt"
    conll.write_text("".join(f"{w} O\n" for w in text.split()))
    want = predict("conll2003", run, conll, max_seq_length=64, precision="fp32")[0]
    same({k: want[k] for k in result}, result)  # the CoNLL file's words are the text's: the same result
    assert result["truncated_words"] == 0
    for e in result["entities"]:
        assert text[e["start"]:e["end"]] == e["text"] and 0 < e["score"] <= 1


def test_qa_of_a_run_matches_predict_across_doc_stride_windows(tmp_path, dirs, shared_data):
    dev = shared_data / "squad" / "dev-v1.1.json"
    run = run_dir(tmp_path, dirs["qa"], task="squad1.1", max_seq_length=64, doc_stride=16, max_query_length=16)
    qa = litebert.pipeline(None, run, "fp32")
    assert (qa.record.max_seq_length, qa.record.doc_stride, qa.record.max_query_length) == (64, 16, 16)
    article = json.loads(dev.read_text())["data"][0]
    para = article["paragraphs"][0]
    items = [{"question": q["question"], "context": para["context"]} for q in para["qas"][:4]]
    assert len(qa.tokenizer.encode_ids(para["context"])) > 100  # several windows per question
    got = qa(items)
    sub = {"data": [{"title": "t", "paragraphs": [{"context": para["context"], "qas": para["qas"][:4]}]}]}
    (tmp_path / "q.json").write_text(json.dumps(sub))
    want = predict("squad1.1", run, tmp_path / "q.json", max_seq_length=64, doc_stride=16, max_query_length=16,
                   precision="fp32")
    assert [g["answer"] for g in got] == [w["answer"] for w in want]
    for g, w in zip(got, want):
        assert para["context"][g["start"]:g["end"]] == g["answer"] and g["null_odds"] == pytest.approx(w["null_odds"])
    same([qa(i) for i in items], got)
    from litebert.export import export_onnx

    export_onnx(run, tmp_path / "onnx")  # a run dir: its best checkpoint, its doc stride in inference.json
    same(litebert.pipeline(None, tmp_path / "onnx", "onnx")(items), got, atol=1e-4)


def test_qa_v2_answers_nothing_above_the_threshold(dirs):
    qa = litebert.pipeline(None, dirs["qa"], "fp32")
    qa.record.version_2 = True
    item = {"question": "who ?", "context": "ada wrote the first program ."}
    answered = qa(item, null_threshold=1e9)
    assert answered["answer"] and answered["start"] is not None
    empty = qa(item, null_threshold=-1e9)
    assert (empty["answer"], empty["start"], empty["end"]) == ("", None, None)


@pytest.mark.parametrize("head", ["classification", "token", "qa", "choice", "pretraining"])
def test_bf16_and_onnx_backends_agree_with_fp32(tmp_path, dirs, head):
    pytest.importorskip("onnxruntime")
    from litebert import heads
    from litebert.export import export_onnx

    inputs = {"classification": TEXTS, "token": TEXTS, "pretraining": ["a [MASK] film ."],
              "qa": [{"question": "what was fun ?", "context": TEXTS[0]}],
              "choice": [{"context": TEXTS[2], "question": "how was it ?", "options": ["dull", "a joy"]}]}[head]
    fp32 = litebert.pipeline(None, dirs[head], "fp32")
    export_onnx(dirs[head], tmp_path / "m.onnx", heads.for_pipeline(fp32.task).export_task)
    results = {b: litebert.pipeline(None, dirs[head], b, onnx_file=tmp_path / "m.onnx")(inputs)
               for b in ("bf16", "onnx")}
    want = fp32(inputs)
    assert _numbers(results["onnx"]) == pytest.approx(_numbers(want), abs=1e-4)
    # bf16 keeps ~3 significant digits: probabilities stay close, while a near-tied decision (an option index,
    # a span offset: the integers) may flip, so only the floats are compared.
    assert _numbers(results["bf16"], ints=False) == pytest.approx(_numbers(want, ints=False), abs=0.05)


def test_onnx_backend_does_not_import_torch(tmp_path, dirs):
    pytest.importorskip("onnxruntime")
    from litebert.export import export_onnx

    export_onnx(dirs["classification"], tmp_path / "m.onnx", "classification")
    want = litebert.pipeline(None, dirs["classification"], "fp32")(TEXTS[0])
    code = ("import sys, json; sys.modules['torch'] = None\n"  # any `import torch` now raises ImportError
            "import litebert\n"
            f"p = litebert.pipeline(None, {str(dirs['classification'])!r}, 'onnx', onnx_file={str(tmp_path / 'm.onnx')!r})\n"
            f"print(json.dumps(p({TEXTS[0]!r})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["label"] == want["label"] and got["score"] == pytest.approx(want["score"], abs=1e-4)


def test_bad_inputs_are_clear_errors(dirs):
    clf = litebert.pipeline(None, dirs["classification"], "fp32")
    cases = [([], "empty list"), ([3], "'text' should be a string"), ({"txt": "a"}, "unknown field 'txt'"),
             (("a", "b", "c"), "pair"), ({"text": "a", "text_pair": 5}, "'text_pair' should be a string"),
             ("   ", "'text' is empty")]
    for value, message in cases:
        with pytest.raises(LitebertError, match=message):
            clf(value)
    with pytest.raises(LitebertError, match="unknown option 'top_k'"):
        clf("a", top_k=3)
    with pytest.raises(LitebertError, match="serves 'text-classification'"):
        litebert.pipeline("question-answering", dirs["classification"], "fp32")
    with pytest.raises(LitebertError, match="serves .fill-mask."):
        litebert.pipeline("text-classification", dirs["pretraining"], "fp32")
    with pytest.raises(LitebertError, match="missing field 'context'"):
        litebert.pipeline(None, dirs["qa"], "fp32")({"question": "who ?"})
    with pytest.raises(LitebertError, match="no ONNX file"):
        litebert.pipeline(None, dirs["classification"], "onnx")


def test_similarity_is_the_cosine_of_the_embeddings_and_ranks_sentences(dirs):
    emb = litebert.pipeline("embeddings", dirs["classification"])
    mean, unit = np.array(emb(TEXTS)), np.array(emb(TEXTS, normalize=True))  # [N, H]
    cosine = (mean @ mean.T) / np.outer(np.linalg.norm(mean, axis=1), np.linalg.norm(mean, axis=1))
    np.testing.assert_allclose(unit @ unit.T, cosine, atol=1e-6)  # normalize=True: the dot product is the cosine
    np.testing.assert_allclose(emb.similarity(TEXTS, TEXTS), cosine, atol=1e-6)
    np.testing.assert_allclose(emb.similarity(TEXTS[0], TEXTS), cosine[0], atol=1e-6)
    np.testing.assert_allclose(emb.similarity(TEXTS, TEXTS[1]), cosine[:, 1], atol=1e-6)
    one = emb.similarity(TEXTS[0], TEXTS[1])
    assert isinstance(one, float) and one == pytest.approx(cosine[0, 1], abs=1e-6)
    cls = np.array(emb(TEXTS, pooling="cls", normalize=True))
    np.testing.assert_allclose(emb.similarity(TEXTS, TEXTS, pooling="cls"), cls @ cls.T, atol=1e-6)
    # ranking sentences against a query, as the README shows
    query, candidates = TEXTS[0], TEXTS[1:]
    scores = emb.similarity(query, candidates)
    ranked = sorted(zip(scores, candidates), reverse=True)
    assert [c for _, c in ranked] == [candidates[i] for i in np.argsort(-cosine[0, 1:], kind="stable")]
