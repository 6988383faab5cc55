"""Metrics against independent references (sklearn, scipy) and hand-computed official-script cases."""

import math
import warnings

import numpy as np
import pytest
from scipy import stats
from sklearn import metrics as skm

from litebert import metrics as M
from litebert.errors import DataFormatError

# ---------------------------------------------------------------------------------------------------------
# Classification / regression vs sklearn / scipy
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("num_classes", [2, 3])
def test_classification_matches_sklearn(seed, num_classes):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 300))
    y = rng.integers(0, num_classes, n)
    p = np.where(rng.random(n) < 0.7, y, rng.integers(0, num_classes, n))  # correlated with y
    assert M.accuracy(p, y) == pytest.approx(skm.accuracy_score(y, p))
    assert M.matthews_corrcoef(p, y) == pytest.approx(skm.matthews_corrcoef(y, p), abs=1e-12)
    if num_classes == 2:
        assert M.f1(p, y) == pytest.approx(skm.f1_score(y, p, pos_label=1, zero_division=0.0))


@pytest.mark.parametrize(
    "y,p",
    [
        ([0, 0, 0, 0], [0, 0, 0, 0]),  # one class only: MCC undefined -> 0, F1 no positives -> 0
        ([1, 1, 1], [1, 1, 1]),
        ([0, 1, 0, 1], [0, 0, 0, 0]),  # constant prediction
        ([0, 1, 0, 1], [1, 0, 1, 0]),  # perfectly wrong: MCC -1
        ([0, 1, 1, 0, 1], [0, 1, 1, 0, 1]),
        ([1], [0]),
    ],
)
def test_classification_edge_cases(y, p):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sklearn warns on the undefined cases
        assert M.matthews_corrcoef(p, y) == pytest.approx(skm.matthews_corrcoef(y, p), abs=1e-12)
        assert M.f1(p, y) == pytest.approx(skm.f1_score(y, p, pos_label=1, zero_division=0.0))
        assert M.accuracy(p, y) == pytest.approx(skm.accuracy_score(y, p))


@pytest.mark.parametrize("seed", range(5))
def test_correlations_match_scipy(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 200))
    y = rng.normal(size=n)
    p = y + rng.normal(scale=float(rng.uniform(0.1, 3)), size=n)
    assert M.pearson(p, y) == pytest.approx(stats.pearsonr(p, y)[0], abs=1e-12)
    assert M.spearman(p, y) == pytest.approx(stats.spearmanr(p, y)[0], abs=1e-12)
    assert M.mse(p, y) == pytest.approx(skm.mean_squared_error(y, p))
    # Ties, as STS-B gold scores have (0.2 steps): average ranks.
    yt, pt = np.round(y * 2) / 2, np.round(p)
    assert M.spearman(pt, yt) == pytest.approx(stats.spearmanr(pt, yt)[0], abs=1e-12)
    assert M.pearson(pt, yt) == pytest.approx(stats.pearsonr(pt, yt)[0], abs=1e-12)


def test_constant_input_correlation_is_nan_like_scipy():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref_p = stats.pearsonr([1.0, 1.0, 1.0], [1.0, 2.0, 3.0])[0]
        ref_s = stats.spearmanr([1.0, 1.0, 1.0], [1.0, 2.0, 3.0])[0]
    assert math.isnan(ref_p) and math.isnan(M.pearson([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]))
    assert math.isnan(ref_s) and math.isnan(M.spearman([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]))


@pytest.mark.parametrize("seed", range(3))
def test_multilabel_matches_sklearn(seed):
    rng = np.random.default_rng(seed)
    y = (rng.random((50, 4)) < 0.3).astype(int)
    y[:, 3] = 0  # a class that never occurs: its F1 is 0 (zero_division=0)
    p = np.where(rng.random((50, 4)) < 0.8, y, 1 - y)
    out = M.multilabel_f1(p, y)
    assert out["micro_f1"] == pytest.approx(skm.f1_score(y, p, average="micro", zero_division=0.0))
    assert out["macro_f1"] == pytest.approx(skm.f1_score(y, p, average="macro", zero_division=0.0))
    assert out["subset_accuracy"] == pytest.approx(skm.accuracy_score(y, p))


def test_compute_metrics_by_name():
    out = M.compute_metrics(("accuracy", "f1", "mcc"), [1, 0, 1, 1], [1, 0, 0, 1])
    assert out == pytest.approx({"accuracy": 0.75, "f1": 0.8, "mcc": skm.matthews_corrcoef([1, 0, 0, 1], [1, 0, 1, 1])})
    with pytest.raises(ValueError, match="unknown metric"):
        M.compute_metrics(("acc",), [1], [1])


# ---------------------------------------------------------------------------------------------------------
# SQuAD v1.1 (hand-computed with the rules of evaluate-v1.1.py)
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,expected",
    [
        ("Hello, World!", "hello world"),  # case + punctuation
        ("The Denver Broncos", "denver broncos"),  # leading article
        ("an apple a day", "apple day"),  # articles as whole words only
        ("theatre banana", "theatre banana"),  # ... never inside words
        ("the-end", "theend"),  # punctuation goes BEFORE articles: 'the-end' -> 'theend', not an article
        ("a.m.", "am"),
        ("  multiple\t\nspaces  here ", "multiple spaces here"),  # whitespace collapsed
        ("“curly” quotes", "“curly” quotes"),  # string.punctuation is ASCII only
        ("the", ""),
    ],
)
def test_normalize_answer(text, expected):
    assert M.normalize_answer(text) == expected


def test_squad_v1_f1_and_em():
    # pred tokens [cat, sat], gold [cat, sat, on, mat]: P = 1, R = 1/2, F1 = 2/3
    assert M.squad_v1_f1("The cat sat.", "cat sat on the mat") == pytest.approx(2 / 3)
    # bag overlap counts repeats: [x, y, y] vs [y, y, y] -> 2 common, P = R = 2/3
    assert M.squad_v1_f1("x y y", "y y y") == pytest.approx(2 / 3)
    assert M.squad_v1_f1("dog", "cat") == 0.0
    # v1.1 quirk: two answers that normalise to nothing match exactly but have F1 0
    assert M.squad_v1_exact("the", "a") and M.squad_v1_f1("the", "a") == 0.0


def test_squad_v1_totals_max_over_gold_and_missing():
    refs = {"q1": ["Denver Broncos", "Broncos"], "q2": ["cat sat on the mat"], "q3": ["x"]}
    preds = {"q1": "broncos!", "q2": "the cat sat"}  # q3 missing -> scores 0 but counts in the total
    out = M.squad_v1(refs, preds)
    assert out["exact_match"] == pytest.approx(100 * 1 / 3)
    assert out["f1"] == pytest.approx(100 * (1 + 2 / 3) / 3)
    assert out["total"] == 3 and out["missing"] == 1


# ---------------------------------------------------------------------------------------------------------
# SQuAD v2.0 (hand-computed with the rules of evaluate-v2.0.py)
# ---------------------------------------------------------------------------------------------------------


def test_squad_v2_no_answer_rules():
    assert M.squad_v2_f1("", "") == 1.0  # both empty
    assert M.squad_v2_f1("", "paris") == 0.0  # gold no-answer, predicted an answer
    assert M.squad_v2_f1("paris", "") == 0.0  # predicted no-answer on an answerable question
    assert M.squad_v2_f1("the", "") == 1.0  # normalises to nothing == no answer
    refs = {"q1": ["Paris"], "q2": [], "q3": ["the"]}  # q3: has an answer, but it normalises to nothing
    out = M.squad_v2(refs, {"q1": "paris", "q2": "", "q3": ""})
    assert out["exact"] == 100.0 and out["f1"] == 100.0 and out["total"] == 3
    assert out["HasAns_total"] == 2 and out["NoAns_total"] == 1  # HasAns from the raw answer list
    assert out["HasAns_exact"] == 100.0 and out["NoAns_exact"] == 100.0
    out = M.squad_v2(refs, {"q1": "", "q2": "london", "q3": "x"})
    assert out["exact"] == 0.0 and out["f1"] == 0.0
    assert "best_f1" not in out  # only with na_probs


def test_squad_v2_na_prob_threshold_and_best_thresh():
    refs = {"a": ["Paris"], "b": ["Rome"], "c": [], "d": []}
    preds = {"a": "Paris", "b": "Milan", "c": "x", "d": ""}
    na = {"a": 0.1, "b": 0.6, "c": 0.8, "d": 0.3}
    out = M.squad_v2(refs, preds, na_probs=na)  # default threshold 1.0: nothing is switched to no-answer
    assert out["exact"] == 50.0 and out["HasAns_exact"] == 50.0 and out["NoAns_exact"] == 50.0
    # Sweep by rising na_prob, starting from 'answer nothing' = 2 correct (c, d):
    # a (+1) -> 3 at 0.1; d (0: empty pred) -> 3; b (+0) -> 3; c (-1: non-empty pred) -> 2. Best 3/4 at 0.1.
    assert out["best_exact"] == 75.0 and out["best_exact_thresh"] == 0.1
    assert out["best_f1"] == 75.0 and out["best_f1_thresh"] == 0.1
    # With threshold 0.5, b and c count as 'no answer': b wrong (has answer) stays 0, c becomes right.
    out = M.squad_v2(refs, preds, na_probs=na, na_prob_thresh=0.5)
    assert out["exact"] == 75.0 and out["NoAns_exact"] == 100.0 and out["HasAns_exact"] == 50.0


def test_squad_v2_missing_prediction_is_an_error():
    with pytest.raises(DataFormatError, match="no prediction"):
        M.squad_v2({"a": ["x"], "b": []}, {"a": "x"})


def test_gold_answers_score_100_on_squad_dev(shared_data):
    from litebert.data.squad import read_squad, squad_references

    refs = squad_references(read_squad(shared_data / "squad" / "dev-v1.1.json"))
    assert len(refs) == 10570
    out = M.squad_v1(refs, {q: golds[0] for q, golds in refs.items()})
    assert out["exact_match"] == 100.0 and out["f1"] == 100.0 and out["missing"] == 0
    # Last gold answers: one of them is "." (question 57340d124776f419006617bf), which normalises to nothing:
    # v1.1 gives it EM 1 but F1 0 (no other gold of that question normalises to nothing).
    out = M.squad_v1(refs, {q: golds[-1] for q, golds in refs.items()})
    assert refs["57340d124776f419006617bf"][-1] == "."
    assert out["exact_match"] == 100.0 and out["f1"] == pytest.approx(100.0 * (10570 - 1) / 10570)
    out = M.squad_v2(refs, {q: golds[0] for q, golds in refs.items()})
    assert out["exact"] == 100.0 and out["f1"] == 100.0 and out["HasAns_total"] == 10570


# ---------------------------------------------------------------------------------------------------------
# CMRC2018 (hand-computed with the rules of cmrc2018_evaluate.py)
# ---------------------------------------------------------------------------------------------------------


def test_cmrc_segmentation():
    assert M.cmrc_segment("光荣和ω-force") == ["光", "荣", "和", "ωforce"]  # '-' is on the list: removed, run continues
    assert M.cmrc_segment("1987年，Harry Potter。") == ["1987", "年", "harry", "potter"]
    assert M.cmrc_segment("《战国》", remove_punct=False) == ["《", "战", "国", "》"]


def test_cmrc_f1_uses_longest_common_contiguous_run():
    # gold 10 segments, pred 3, common run 3: P = 1, R = 0.3
    assert M.cmrc_f1("村雨城", ["任天堂游戏谜之村雨城"]) == pytest.approx(2 * 0.3 / 1.3)
    # "北大" vs "北京大学": the common subsequence has 2 chars but the longest common RUN has 1 -> P 1/2, R 1/4
    assert M.cmrc_f1("北大", ["北京大学"]) == pytest.approx(1 / 3)
    assert M.cmrc_f1("北大", ["北京大学", "北大"]) == 1.0  # max over answers
    assert M.cmrc_f1("上海", ["北京"]) == 0.0


def test_cmrc_em_removes_only_its_punctuation_list():
    assert M.cmrc_em("「战史演武」&「争霸演武」", ["战史演武&争霸演武"]) == 1
    assert M.cmrc_em("北京。", ["北京"]) == 1
    assert M.cmrc_em("a,b", ["ab"]) == 0  # ASCII ',' is not on the official list
    assert M.cmrc_em("ABC", ["abc"]) == 1  # lower-cased


def test_cmrc_totals():
    out = M.cmrc2018({"q1": ["北京大学"], "q2": ["上海"], "q3": ["广州"]}, {"q1": "北大", "q2": "上海"})
    assert out["total"] == 3 and out["skip"] == 1
    assert out["em"] == pytest.approx(100 / 3)
    assert out["f1"] == pytest.approx(100 * (1 / 3 + 1) / 3)
    assert out["average"] == pytest.approx((out["em"] + out["f1"]) / 2)


def test_cmrc_gold_answers_score_100_on_dev(shared_data):
    from litebert.data.squad import read_cmrc2018, squad_references

    refs = squad_references(read_cmrc2018(shared_data / "chinese" / "cmrc2018" / "cmrc2018_dev.json"))
    out = M.cmrc2018(refs, {q: golds[0] for q, golds in refs.items()})
    assert out["total"] == 3219 and out["em"] == 100.0 and out["f1"] == 100.0


# ---------------------------------------------------------------------------------------------------------
# conlleval
# ---------------------------------------------------------------------------------------------------------


def test_conlleval_iob1_hand_case():
    # IOB1: I- starts a chunk after O; B- only separates two adjacent chunks of one type.
    gold = [["I-PER", "I-PER", "O", "I-LOC", "B-LOC", "O"]]  # PER[0,1], LOC[3], LOC[4]
    pred = [["I-PER", "I-PER", "O", "I-LOC", "I-LOC", "O"]]  # PER[0,1], LOC[3,4]
    out = M.conlleval(gold, pred)
    assert (out["correct"], out["found_gold"], out["found_pred"]) == (1, 3, 2)
    assert out["precision"] == 0.5 and out["recall"] == pytest.approx(1 / 3) and out["f1"] == pytest.approx(0.4)
    assert out["accuracy"] == pytest.approx(5 / 6)
    assert out["per_type"]["PER"]["f1"] == 1.0 and out["per_type"]["LOC"]["correct"] == 0


def test_conlleval_type_change_and_boundaries():
    # A type change starts a new chunk even inside I- runs: gold PER[0], ORG[1]; pred PER[0,1].
    out = M.conlleval([["I-PER", "I-ORG"]], [["I-PER", "I-PER"]])
    assert (out["correct"], out["found_gold"], out["found_pred"]) == (0, 2, 1)
    # B-X I-Y: two chunks.
    assert M.conlleval([["B-PER", "I-LOC"]], [["B-PER", "I-LOC"]])["found_gold"] == 2
    # IOB2 prediction with an I- after O still starts a chunk (conlleval is lenient), so this is correct.
    out = M.conlleval([["O", "B-MISC", "I-MISC"]], [["O", "I-MISC", "I-MISC"]])
    assert (out["correct"], out["precision"], out["recall"]) == (1, 1.0, 1.0)
    # A sentence boundary ends a chunk: the I-PER opening sentence 2 is a new chunk.
    out = M.conlleval([["B-PER"], ["I-PER"]], [["B-PER"], ["I-PER"]])
    assert (out["correct"], out["found_gold"]) == (2, 2)
    # The end must match too.
    out = M.conlleval([["B-PER", "I-PER", "O"]], [["B-PER", "O", "O"]])
    assert (out["correct"], out["found_gold"], out["found_pred"]) == (0, 1, 1)
    assert M.conlleval([["O", "O"]], [["O", "O"]])["f1"] == 0.0  # no chunks at all: 0, as conlleval prints


def _independent_chunks(sentences):
    """Chunks as (sentence, start, end, type) from a direct reading of the IOB rules (no state machine)."""
    chunks = set()
    for s, tags in enumerate(sentences):
        start, ctype = None, None
        for i, tag in enumerate([*tags, "O"]):
            prefix, typ = (tag.split("-", 1) + [""])[:2] if tag != "O" else ("O", "")
            begins = prefix == "B" or (prefix == "I" and (start is None or typ != ctype))
            if start is not None and (prefix == "O" or begins):
                chunks.add((s, start, i - 1, ctype))
                start = None
            if begins:
                start, ctype = i, typ
    return chunks


@pytest.mark.parametrize("seed", range(20))
def test_conlleval_agrees_with_independent_chunk_counter(seed):
    rng = np.random.default_rng(seed)
    tags = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "I-ORG"]

    def sentences():
        return [[tags[k] for k in rng.integers(0, len(tags), int(rng.integers(1, 12)))] for _ in range(8)]

    gold, pred = sentences(), sentences()
    for sent_g, sent_p in zip(gold, pred):  # make prediction lengths match
        sent_p[:] = (sent_p + ["O"] * len(sent_g))[: len(sent_g)]
    g, p = _independent_chunks(gold), _independent_chunks(pred)
    out = M.conlleval(gold, pred)
    assert (out["found_gold"], out["found_pred"], out["correct"]) == (len(g), len(p), len(g & p))


def test_conlleval_iob1_gold_vs_iob2_same_entities(shared_data):
    """eng.testa (IOB1) and iob2/valid.txt (IOB2) tag the same entities: chunk F1 1, token accuracy below 1."""
    from litebert.data.ner import read_conll

    iob1 = read_conll(shared_data / "conll2003" / "eng.testa")
    iob2 = read_conll(shared_data / "conll2003" / "iob2" / "valid.txt")
    out = M.conlleval([e.labels for e in iob1], [e.labels for e in iob2])
    assert out["f1"] == 1.0 and out["found_gold"] == out["correct"] == 5942  # CoNLL-2003 dev has 5,942 entities
    assert out["accuracy"] < 1.0
