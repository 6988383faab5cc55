"""SQuAD / CMRC2018 reading, sliding-window features with the official 30k-clean.model, and decoding."""

import json

import numpy as np
import pytest

from litebert.data.squad import (
    SquadExample,
    convert_examples_to_features,
    max_context_windows,
    postprocess_predictions,
    read_cmrc2018,
    read_squad,
    squad_references,
    window_starts,
)
from litebert.data.tasks import get_task, pad_features, read_examples
from litebert.errors import DataFormatError
from litebert.metrics import normalize_answer, squad_v1


@pytest.fixture(scope="module")
def tok(shared_data):
    from litebert.tokenizer import AlbertTokenizer

    return AlbertTokenizer(shared_data / "albert-vocab" / "30k-clean.model")


@pytest.fixture(scope="module")
def dev(shared_data, tok):
    examples = read_examples(get_task("squad1.1"), shared_data / "squad", "dev")
    return examples, convert_examples_to_features(examples, tok)  # defaults: 384 / 128 / 64


def test_readers_match_readme_counts(shared_data, dev):
    examples, _ = dev
    assert examples.stats == {"articles": 48, "paragraphs": 2067, "questions": 10570, "answers": 34726,
                              "impossible": 0, "start_mismatch": 0}  # fmt: skip
    cmrc = read_cmrc2018(shared_data / "chinese" / "cmrc2018" / "cmrc2018_dev.json")
    assert (cmrc.stats["contexts"], cmrc.stats["questions"]) == (848, 3219)
    trial = read_examples(get_task("cmrc2018"), shared_data / "chinese" / "cmrc2018", "trial")
    assert (trial.stats["contexts"], trial.stats["questions"], trial.stats["answers_not_found"]) == (256, 1002, 0)
    for ex in cmrc:  # found answers really sit at their start
        for text, start in zip(ex.answers, ex.answer_starts):
            assert start < 0 or ex.context[start : start + len(text)] == text


def test_gold_span_round_trip(dev):
    """The gold token span, read back through the offsets, gives the gold answer for (nearly) all questions;
    the rest are answers that end or start inside a sub-word token (e.g. gold '4' in the token '49')."""
    examples, feats = dev
    ok, fails, seen = 0, [], set()
    for f in feats:
        ex = examples[f["example_index"]]
        if f["is_impossible"] or ex.qid in seen:
            continue
        seen.add(ex.qid)
        a, b = f["offsets"][f["start_positions"]][0], f["offsets"][f["end_positions"]][1]
        gold_a, gold_b = ex.answer_starts[0], ex.answer_starts[0] + len(ex.answers[0])
        assert a <= gold_a and b >= gold_b  # the token span always covers the gold characters
        if normalize_answer(ex.context[a:b]) == normalize_answer(ex.answers[0]):
            ok += 1
        else:
            fails.append((ex.answers[0], ex.context[a:b]))
            assert ex.answers[0] in ex.context[a:b]
    rate = ok / len(seen)
    print(f"\nSQuAD v1.1 dev gold span round trip: {ok}/{len(seen)} = {rate:.4%}; e.g. {fails[:5]}")
    assert len(seen) == len(examples) and rate >= 0.99  # every answer fits one window at 384/128


def test_window_layout(dev, tok):
    examples, feats = dev
    by_example = {}
    for f in feats:
        by_example.setdefault(f["example_index"], []).append(f)
        n = len(f["input_ids"])
        assert n <= 384 and len(f["token_type_ids"]) == len(f["p_mask"]) == len(f["offsets"]) == n
        q = f["token_type_ids"].index(1) - 2  # question length
        assert f["input_ids"][0] == tok.cls_id and f["input_ids"][q + 1] == tok.sep_id == f["input_ids"][-1]
        assert f["p_mask"] == [0] + [1] * (q + 1) + [0] * (n - q - 3) + [1]
        assert all((o is None) == (p == 1 or i == 0) for i, (o, p) in enumerate(zip(f["offsets"], f["p_mask"])))
        assert 0 < f["start_positions"] <= f["end_positions"] or f["start_positions"] == f["end_positions"] == 0
    batch = pad_features(feats[:3], pad_id=tok.pad_id)
    width = max(len(f["input_ids"]) for f in feats[:3])
    assert batch["input_ids"].shape == batch["p_mask"].shape == (3, width)
    assert batch["p_mask"][:, -1].tolist() == [1, 1, 1] and batch["start_positions"].shape == (3,)
    assert batch["offsets"] == [f["offsets"] for f in feats[:3]]  # bookkeeping stays as lists
    multi = [fs for fs in by_example.values() if len(fs) > 1]
    assert multi  # some contexts need several windows
    for fs in multi:  # each context token is 'max context' in exactly one window
        counts = {}
        for f in fs:
            for o, m in zip(f["offsets"], f["token_is_max_context"]):
                if o is not None:
                    counts[o] = counts.get(o, 0) + m
        assert set(counts.values()) == {1}


def test_window_starts_and_max_context_official_rule():
    assert window_starts(10, 4, 3) == [(0, 4), (3, 4), (6, 4)]
    assert window_starts(10, 4, 8) == [(0, 4), (4, 4), (8, 2)]  # step min(length, stride)
    assert window_starts(3, 4, 2) == [(0, 3)]
    spans = [(0, 4), (3, 4), (6, 4)]
    # token 3: min(3,0)+.04 in window 0, min(0,3)+.04 in window 1 -> tie, first wins; token 4: window 1.
    assert max_context_windows(spans, 10).tolist() == [0, 0, 0, 0, 1, 1, 1, 2, 2, 2]


def _one_hot_logits(feats):
    start, end = [], []
    for f in feats:
        s, e = np.zeros(len(f["input_ids"]) + 3), np.zeros(len(f["input_ids"]) + 3)  # + padding
        s[f["start_positions"]] = e[f["end_positions"]] = 10.0
        start.append(s)
        end.append(e)
    return start, end


def test_postprocess_recovers_gold_answers(dev):
    examples, feats = dev
    examples, feats = examples[:3000], [f for f in feats if f["example_index"] < 3000]  # enough, and quicker
    preds, null_odds = postprocess_predictions(examples, feats, *_one_hot_logits(feats))
    out = squad_v1(squad_references(examples), preds)
    print(f"\ndecoded one-hot gold logits: EM {out['exact_match']:.2f} F1 {out['f1']:.2f}")
    assert out["exact_match"] >= 99.0 and set(null_odds) == set(preds)


def test_v2_null_answer_and_threshold(tok):
    context = "The Eiffel Tower is in Paris. It was finished in 1889."
    ex = [SquadExample("q1", "When was it finished?", context, ["1889"], [context.index("1889")]),
          SquadExample("q2", "Who painted it?", context, [], [], is_impossible=True)]  # fmt: skip
    feats = convert_examples_to_features(ex, tok, max_seq_length=64)
    assert [f["is_impossible"] for f in feats] == [0, 1] and feats[1]["start_positions"] == 0
    start, end = _one_hot_logits(feats)
    start[1][:] = end[1][:] = 0.0
    start[1][0] = end[1][0] = 3.0  # q2: null score 6
    a = next(i for i, o in enumerate(feats[1]["offsets"]) if o and context[o[0] : o[1]] == "Paris")
    start[1][a] = end[1][a] = 2.0  # best span 'Paris' scores 4: null odds 6 - 4 = 2
    preds, odds = postprocess_predictions(ex, feats, start, end, version_2=True)
    assert preds == {"q1": "1889", "q2": ""} and odds["q2"] == pytest.approx(2.0)
    assert odds["q1"] == pytest.approx(0.0 - 20.0)  # null 0 + 0, best span 10 + 10
    preds, _ = postprocess_predictions(ex, feats, start, end, version_2=True, null_score_diff_threshold=2.5)
    assert preds["q2"] == "Paris"
    assert postprocess_predictions(ex, feats, start, end)[0]["q2"] == "Paris"  # v1 never answers ""


def test_cmrc_wordpiece_round_trip(shared_data):
    from litebert.tokenizer import WordPieceTokenizer

    wp = WordPieceTokenizer(shared_data / "chinese" / "albert_zh_vocab.txt")
    examples = read_cmrc2018(shared_data / "chinese" / "cmrc2018" / "cmrc2018_dev.json")[:300]
    feats = convert_examples_to_features(examples, wp, max_seq_length=512)
    ok = total = 0
    seen = set()
    for f in feats:
        ex = examples[f["example_index"]]
        if f["is_impossible"] or ex.qid in seen:
            continue
        seen.add(ex.qid)
        text, start = next((t, s) for t, s in zip(ex.answers, ex.answer_starts) if s >= 0)
        total += 1
        ok += ex.context[f["offsets"][f["start_positions"]][0] : f["offsets"][f["end_positions"]][1]] == text
    print(f"\nCMRC2018 dev[:300] WordPiece round trip: {ok}/{total}")
    assert total >= 290 and ok / total >= 0.99


def test_read_v2_json_and_score(tmp_path):
    from litebert.metrics import squad_v2

    qas = [{"id": "a", "question": "Where?", "answers": [{"text": "Paris", "answer_start": 11}],
            "is_impossible": False},
           {"id": "b", "question": "Who?", "answers": [], "is_impossible": True,
            "plausible_answers": [{"text": "Tower", "answer_start": 4}]}]  # fmt: skip
    path = tmp_path / "dev-v2.0.json"
    path.write_text(json.dumps({"version": "v2.0", "data": [{"title": "t", "paragraphs": [
        {"context": "The tower: Paris.", "qas": qas}]}]}))  # fmt: skip
    examples = read_examples(get_task("squad2.0"), path, "dev")
    assert examples.stats["impossible"] == 1 and examples[1].answers == [] and examples[1].is_impossible
    refs = squad_references(examples)
    assert refs == {"a": ["Paris"], "b": []}
    assert squad_v2(refs, {"a": "Paris", "b": ""})["exact"] == 100.0


def test_squad_format_errors(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"data": [\n{"title": "x",\n "paragraphs": [}\n]}')
    with pytest.raises(DataFormatError, match=r"bad\.json:3: not valid JSON"):
        read_squad(path)
    path.write_text(json.dumps({"data": [{"paragraphs": [{"qas": []}]}]}))
    with pytest.raises(DataFormatError, match=r"data\[0\]\.paragraphs\[0\] has no field 'context'"):
        read_squad(path)
    path.write_text(json.dumps({"data": [{"paragraphs": [{"context": "c", "qas": [
        {"id": "q9", "question": "?", "answers": []}]}]}]}))  # fmt: skip
    with pytest.raises(DataFormatError, match="q9 has no answers and is not marked is_impossible"):
        read_squad(path)
