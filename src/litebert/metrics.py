"""Evaluation metrics, written to reproduce the reference tools users check us against.

- Classification / regression: accuracy, binary F1 (positive label 1), Matthews correlation (multi-class
  form, as sklearn), Pearson, Spearman (average ranks for ties, as scipy), MSE, multi-label micro/macro F1.
  These return fractions in [0, 1] (correlations in [-1, 1]).
- SQuAD v1.1 and v2.0: the semantics of the official `evaluate-v1.1.py` / `evaluate-v2.0.py` scripts,
  including their percent scale (x100), `HasAns_`/`NoAns_` breakdown and the best no-answer threshold search.
- CMRC2018: the semantics of the official `cmrc2018_evaluate.py` (Chinese characters are single segments,
  its punctuation list removed, F1 from the longest common contiguous run of segments), percent scale.
- Entity-level precision/recall/F1 with the chunk rules of `conlleval` for IOB1/IOB2 tags (E-/S- tags follow
  seqeval's conlleval-mode extension).

Only numpy is used; scipy/sklearn serve as references in the tests.
"""

from __future__ import annotations

import collections
import math
import re
import string
from collections.abc import Mapping, Sequence

import numpy as np

from litebert.errors import DataFormatError

# ---------------------------------------------------------------------------------------------------------
# Classification and regression
# ---------------------------------------------------------------------------------------------------------


def _pair(preds, labels) -> tuple[np.ndarray, np.ndarray]:
    p, y = np.asarray(preds), np.asarray(labels)
    if p.shape[0] != y.shape[0]:
        raise ValueError(f"{p.shape[0]} predictions but {y.shape[0]} labels")
    return p, y


def accuracy(preds, labels) -> float:
    p, y = _pair(preds, labels)
    return float((p == y).mean()) if len(y) else float("nan")


def f1(preds, labels, positive=1) -> float:
    """Binary F1 of the class `positive`; 0.0 when there is neither a true nor a predicted positive (as sklearn)."""
    p, y = _pair(preds, labels)
    tp = int(np.sum((p == positive) & (y == positive)))
    fp = int(np.sum((p == positive) & (y != positive)))
    fn = int(np.sum((p != positive) & (y == positive)))
    denom = 2 * tp + fp + fn
    return 2 * tp / denom if denom else 0.0


def matthews_corrcoef(preds, labels) -> float:
    """Multi-class MCC (Gorodkin's R_K, = the binary phi coefficient for 2 classes); 0.0 when undefined."""
    p, y = _pair(preds, labels)
    classes, both = np.unique(np.concatenate([y, p]), return_inverse=True)
    yi, pi = both[: len(y)], both[len(y) :]
    cm = np.zeros((len(classes), len(classes)), dtype=np.float64)  # [true, pred]
    np.add.at(cm, (yi, pi), 1)
    t, q = cm.sum(axis=1), cm.sum(axis=0)  # true / predicted counts per class
    n, c = cm.sum(), np.trace(cm)
    cov_yp = c * n - t @ q
    cov_pp = n * n - q @ q
    cov_yy = n * n - t @ t
    denom = math.sqrt(cov_yy * cov_pp)
    return float(cov_yp / denom) if denom else 0.0


def pearson(preds, labels) -> float:
    """Pearson r; NaN when either side is constant (scipy returns NaN with a warning there too)."""
    p, y = _pair(preds, labels)
    p, y = p.astype(np.float64) - p.mean(), y.astype(np.float64) - y.mean()
    denom = math.sqrt(float(p @ p) * float(y @ y))
    if denom == 0.0:
        return float("nan")
    return float(np.clip((p @ y) / denom, -1.0, 1.0))


def _average_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n, ties get the mean of the ranks they span (scipy.stats.rankdata 'average')."""
    order = np.argsort(x, kind="mergesort")
    xs = x[order]
    # Start index of each run of equal values in sorted order.
    new_run = np.concatenate([[True], xs[1:] != xs[:-1]])
    run_id = np.cumsum(new_run) - 1
    starts = np.flatnonzero(new_run)
    ends = np.concatenate([starts[1:], [len(x)]])
    run_rank = (starts + ends + 1) / 2.0  # mean of ranks starts+1 .. ends
    ranks = np.empty(len(x), dtype=np.float64)
    ranks[order] = run_rank[run_id]
    return ranks


def spearman(preds, labels) -> float:
    p, y = _pair(preds, labels)
    return pearson(_average_ranks(np.asarray(p, np.float64)), _average_ranks(np.asarray(y, np.float64)))


def mse(preds, labels) -> float:
    p, y = _pair(preds, labels)
    return float(np.mean((p.astype(np.float64) - y.astype(np.float64)) ** 2))


def multilabel_f1(preds, labels) -> dict[str, float]:
    """preds, labels: [N, C] 0/1 matrices. Micro F1 (pooled counts), macro F1 (mean over classes), subset accuracy."""
    p, y = (np.asarray(a).astype(bool) for a in _pair(preds, labels))
    tp, fp, fn = (p & y).sum(0), (p & ~y).sum(0), (~p & y).sum(0)  # [C]
    micro_denom = 2 * tp.sum() + fp.sum() + fn.sum()
    per_class_denom = 2 * tp + fp + fn
    per_class = np.where(per_class_denom > 0, 2 * tp / np.maximum(per_class_denom, 1), 0.0)
    return {
        "micro_f1": float(2 * tp.sum() / micro_denom) if micro_denom else 0.0,
        "macro_f1": float(per_class.mean()) if len(per_class) else 0.0,
        "subset_accuracy": float((p == y).all(axis=1).mean()) if len(y) else float("nan"),
    }


_SIMPLE = {
    "accuracy": accuracy,
    "f1": f1,
    "mcc": matthews_corrcoef,
    "pearson": pearson,
    "spearman": spearman,
    "mse": mse,
}
MULTILABEL_METRICS = ("micro_f1", "macro_f1", "subset_accuracy")


def compute_metrics(names: Sequence[str], preds, labels) -> dict[str, float]:
    """The named metrics (`TaskSpec.metrics`) for classification, regression or multi-label predictions.

    preds/labels: class ids [N], floats [N] (regression) or 0/1 matrices [N, C] (multi-label).
    """
    out: dict[str, float] = {}
    multi = None
    for name in names:
        if name in _SIMPLE:
            out[name] = _SIMPLE[name](preds, labels)
        elif name in MULTILABEL_METRICS:
            multi = multi or multilabel_f1(preds, labels)
            out[name] = multi[name]
        else:
            known = sorted(_SIMPLE) + list(MULTILABEL_METRICS)
            raise ValueError(f"unknown metric {name!r}; known: {known}")
    return out


# ---------------------------------------------------------------------------------------------------------
# SQuAD v1.1 / v2.0 (official evaluator semantics)
# ---------------------------------------------------------------------------------------------------------

_PUNCT = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(s: str) -> str:
    """Lower case, drop string.punctuation, drop the whole words a/an/the, collapse whitespace (in that order)."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def _overlap_f1(pred_toks: list, gold_toks: list) -> float:
    num_same = sum((collections.Counter(pred_toks) & collections.Counter(gold_toks)).values())
    if num_same == 0:
        return 0.0
    precision, recall = num_same / len(pred_toks), num_same / len(gold_toks)
    return 2 * precision * recall / (precision + recall)


def squad_v1_exact(prediction: str, gold: str) -> bool:
    return normalize_answer(prediction) == normalize_answer(gold)


def squad_v1_f1(prediction: str, gold: str) -> float:
    """v1.1 token F1: two answers that both normalise to nothing score 0 (v1.1 has no empty-answer rule)."""
    return _overlap_f1(normalize_answer(prediction).split(), normalize_answer(gold).split())


def squad_v1(references: Mapping[str, Sequence[str]], predictions: Mapping[str, str]) -> dict:
    """evaluate-v1.1: max over gold answers, 100 * mean over ALL questions (a missing prediction scores 0).

    references: qid -> gold answer texts (every question of the dataset); predictions: qid -> text.
    Returns exact_match, f1 (percent), total, missing (questions without a prediction).
    """
    em = f1_sum = 0.0
    missing = 0
    for qid, golds in references.items():
        if qid not in predictions:
            missing += 1
            continue
        pred = predictions[qid]
        em += max(float(squad_v1_exact(pred, g)) for g in golds)
        f1_sum += max(squad_v1_f1(pred, g) for g in golds)
    total = len(references)
    return {"exact_match": 100.0 * em / total, "f1": 100.0 * f1_sum / total, "total": total, "missing": missing}


def squad_v2_exact(gold: str, prediction: str) -> int:
    return int(normalize_answer(gold) == normalize_answer(prediction))


def _v2_tokens(s: str) -> list[str]:
    return normalize_answer(s).split() if s else []


def squad_v2_f1(gold: str, prediction: str) -> float:
    """v2.0 token F1: when either side is empty (no answer) the score is 1 if both are empty, else 0."""
    gold_toks, pred_toks = _v2_tokens(gold), _v2_tokens(prediction)
    if not gold_toks or not pred_toks:
        return float(gold_toks == pred_toks)
    return _overlap_f1(pred_toks, gold_toks)


def _best_thresh(preds, scores, na_probs, has_ans) -> tuple[float, float]:
    """evaluate-v2.0 find_best_thresh: start from 'answer nothing', sweep qids by rising na_prob."""
    cur = best = sum(1 for q in has_ans if not has_ans[q])
    best_thresh = 0.0
    for qid in sorted(na_probs, key=lambda k: na_probs[k]):
        if qid not in scores:
            continue
        if has_ans[qid]:
            diff = scores[qid]
        else:
            diff = -1 if preds[qid] else 0
        cur += diff
        if cur > best:
            best, best_thresh = cur, na_probs[qid]
    return 100.0 * best / len(scores), best_thresh


def squad_v2(
    references: Mapping[str, Sequence[str]],
    predictions: Mapping[str, str],
    na_probs: Mapping[str, float] | None = None,
    na_prob_thresh: float = 1.0,
) -> dict:
    """evaluate-v2.0. references: qid -> gold texts ([] for an unanswerable question); predictions: qid -> text
    ("" = no answer); na_probs: qid -> no-answer score (e.g. our null odds). With na_probs the result also has
    best_exact/best_exact_thresh/best_f1/best_f1_thresh. Scores are percent.
    """
    missing = [q for q in references if q not in predictions]
    if missing:
        # The official script crashes on its HasAns/NoAns breakdown here; say so plainly instead.
        raise DataFormatError(
            f"{len(missing)} of {len(references)} questions have no prediction (first: {missing[0]!r}); "
            "SQuAD v2.0 scoring needs one per question (\"\" means no answer)"
        )
    has_ans = {qid: bool(golds) for qid, golds in references.items()}
    exact_raw, f1_raw = {}, {}
    for qid, golds in references.items():
        golds = [g for g in golds if normalize_answer(g)] or [""]
        pred = predictions[qid]
        exact_raw[qid] = max(squad_v2_exact(g, pred) for g in golds)
        f1_raw[qid] = max(squad_v2_f1(g, pred) for g in golds)

    probs = dict(na_probs) if na_probs is not None else {q: 0.0 for q in predictions}
    for qid in references:
        if qid not in probs:
            raise DataFormatError(f"na_probs has no entry for question {qid!r}")

    def thresholded(raw):  # a question whose na_prob exceeds the threshold counts as answered "no answer"
        return {q: (float(not has_ans[q]) if probs[q] > na_prob_thresh else s) for q, s in raw.items()}

    exact_t, f1_t = thresholded(exact_raw), thresholded(f1_raw)

    def summary(qids, prefix=""):
        n = len(qids)
        return {
            f"{prefix}exact": 100.0 * sum(exact_t[q] for q in qids) / n,
            f"{prefix}f1": 100.0 * sum(f1_t[q] for q in qids) / n,
            f"{prefix}total": n,
        }

    out = summary(list(references))
    has, no = [q for q in references if has_ans[q]], [q for q in references if not has_ans[q]]
    if has:
        out.update(summary(has, "HasAns_"))
    if no:
        out.update(summary(no, "NoAns_"))
    if na_probs is not None:
        out["best_exact"], out["best_exact_thresh"] = _best_thresh(predictions, exact_raw, probs, has_ans)
        out["best_f1"], out["best_f1_thresh"] = _best_thresh(predictions, f1_raw, probs, has_ans)
    return out


# ---------------------------------------------------------------------------------------------------------
# CMRC2018 (official cmrc2018_evaluate.py semantics)
# ---------------------------------------------------------------------------------------------------------

# The official punctuation list. "……" is two characters and so never matches a single character there either.
CMRC_PUNCT = frozenset(
    ["-", ":", "_", "*", "^", "/", "\\", "~", "`", "+", "=", "，", "。", "：", "？", "！", "“", "”", "；", "’",
     "《", "》", "……", "·", "、", "「", "」", "（", "）", "－", "～", "『", "』"]
)  # fmt: skip
_CJK = re.compile(r"[\u4e00-\u9fa5]")
# Stand-in for nltk.word_tokenize on the non-Chinese runs (numbers, Latin words): numbers keep their inner
# dots/commas, words keep inner apostrophes, other symbols stand alone. Exact for the usual runs
# ("1987", "ω-force", "harry potter"); rare English contractions may split differently than nltk.
_LATIN_TOKEN = re.compile(r"\d+(?:[.,]\d+)*|[^\W\d_]+(?:'[^\W\d_]+)*|\w+|[^\w\s]", re.UNICODE)


def cmrc_segment(text: str, remove_punct: bool = True) -> list[str]:
    """Mixed segmentation: each Chinese character (and each listed punctuation mark) is a segment."""
    segs: list[str] = []
    run: list[str] = []

    def flush():
        if run:
            segs.extend(_LATIN_TOKEN.findall("".join(run)))
            run.clear()

    for ch in str(text).lower().strip():
        if remove_punct and ch in CMRC_PUNCT:
            continue
        if _CJK.match(ch) or ch in CMRC_PUNCT:
            flush()
            segs.append(ch)
        else:
            run.append(ch)
    flush()
    return segs


def _cmrc_strip_punct(text: str) -> str:
    return "".join(ch for ch in str(text).lower().strip() if ch not in CMRC_PUNCT)


def _longest_common_run(a: list[str], b: list[str]) -> int:
    """Length of the longest common contiguous run of segments (the official 'find_lcs')."""
    best = 0
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0] * (len(b) + 1)
        for j, y in enumerate(b):
            if x == y:
                cur[j + 1] = prev[j] + 1
                best = max(best, cur[j + 1])
        prev = cur
    return best


def cmrc_f1(prediction: str, golds: Sequence[str]) -> float:
    pred = cmrc_segment(prediction)
    scores = [0.0]
    for gold in golds:
        g = cmrc_segment(gold)
        common = _longest_common_run(g, pred)
        if common:
            precision, recall = common / len(pred), common / len(g)
            scores.append(2 * precision * recall / (precision + recall))
    return max(scores)


def cmrc_em(prediction: str, golds: Sequence[str]) -> int:
    pred = _cmrc_strip_punct(prediction)
    return int(any(_cmrc_strip_punct(g) == pred for g in golds))


def cmrc2018(references: Mapping[str, Sequence[str]], predictions: Mapping[str, str]) -> dict:
    """Percent EM/F1 over all questions (missing predictions score 0 and are counted in `skip`), average of both."""
    em = f1_sum = 0.0
    skip = 0
    for qid, golds in references.items():
        if qid not in predictions:
            skip += 1
            continue
        em += cmrc_em(predictions[qid], golds)
        f1_sum += cmrc_f1(predictions[qid], golds)
    total = len(references)
    em, f1_sum = 100.0 * em / total, 100.0 * f1_sum / total
    return {"em": em, "f1": f1_sum, "average": (em + f1_sum) / 2, "total": total, "skip": skip}


# ---------------------------------------------------------------------------------------------------------
# Entity-level precision / recall / F1 (conlleval chunk rules)
# ---------------------------------------------------------------------------------------------------------


def _split_tag(tag: str) -> tuple[str, str]:
    """'B-PER' -> ('B', 'PER'); 'O' -> ('O', ''). Same split as conlleval's /^([^-]*)-(.*)$/."""
    head, sep, rest = tag.partition("-")
    return (head, rest) if sep else (tag, "")


def chunk_end(prev_tag: str, tag: str, prev_type: str, type_: str) -> bool:
    """True when a chunk ended at the previous token (conlleval endOfChunk; E/S follow seqeval's extension)."""
    if prev_tag in ("E", "S"):
        return True
    if prev_tag in ("B", "I") and tag in ("B", "S", "O"):
        return True
    return prev_tag not in ("O", ".") and prev_type != type_


def chunk_start(prev_tag: str, tag: str, prev_type: str, type_: str) -> bool:
    """True when a chunk starts at this token (conlleval startOfChunk). An I- after O starts one (IOB1)."""
    if tag in ("B", "S"):
        return True
    if tag in ("I", "E") and prev_tag in ("O", "E", "S"):
        return True
    return tag not in ("O", ".") and prev_type != type_


def _prf(correct: int, found_pred: int, found_gold: int) -> dict[str, float]:
    precision = correct / found_pred if found_pred else 0.0
    recall = correct / found_gold if found_gold else 0.0
    f = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f}


def conlleval(gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]]) -> dict:
    """Entity-level scores over sentences of tags, exactly as conlleval counts them (fractions, not percent).

    A chunk is correct when gold and prediction start it at the same token, with the same type, and end it
    at the same token. Sentence boundaries end every chunk. Returns precision, recall, f1, accuracy (token),
    found_gold, found_pred, correct and per_type {type: {precision, recall, f1, found_gold, found_pred, correct}}.
    """
    if len(gold) != len(pred):
        raise ValueError(f"{len(gold)} gold sentences but {len(pred)} predicted")
    correct = found_gold = found_pred = correct_tags = tokens = 0
    by_type: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for i, (g_sent, p_sent) in enumerate(zip(gold, pred)):
        if len(g_sent) != len(p_sent):
            raise ValueError(f"sentence {i}: {len(g_sent)} gold tags but {len(p_sent)} predicted")
        in_correct = False
        last_g, last_gt, last_p, last_pt = "O", "", "O", ""
        # A trailing ("O","O") plays the role of conlleval's sentence boundary line: it closes open chunks.
        for j, (g_tag, p_tag) in enumerate([*zip(g_sent, p_sent), ("O", "O")]):
            g, gt = _split_tag(g_tag)
            p, pt = _split_tag(p_tag)
            g_end, p_end = chunk_end(last_g, g, last_gt, gt), chunk_end(last_p, p, last_pt, pt)
            if in_correct:
                if g_end and p_end and last_gt == last_pt:
                    in_correct = False
                    correct += 1
                    by_type[last_gt]["correct"] += 1
                elif g_end != p_end or gt != pt:
                    in_correct = False
            g_start, p_start = chunk_start(last_g, g, last_gt, gt), chunk_start(last_p, p, last_pt, pt)
            if g_start and p_start and gt == pt:
                in_correct = True
            if g_start:
                found_gold += 1
                by_type[gt]["found_gold"] += 1
            if p_start:
                found_pred += 1
                by_type[pt]["found_pred"] += 1
            if j < len(g_sent):
                correct_tags += int(g == p and gt == pt)
                tokens += 1
            last_g, last_gt, last_p, last_pt = g, gt, p, pt
    out: dict = _prf(correct, found_pred, found_gold)
    out.update(
        accuracy=correct_tags / tokens if tokens else float("nan"),
        found_gold=found_gold,
        found_pred=found_pred,
        correct=correct,
        per_type={
            t: {**_prf(c["correct"], c["found_pred"], c["found_gold"]),
                **{k: c[k] for k in ("found_gold", "found_pred", "correct")}}
            for t, c in sorted(by_type.items())
        },  # fmt: skip
    )
    return out
