"""Extractive QA (SQuAD v1.1/v2.0, CMRC2018): reading, sliding-window features, answer decoding.

Features follow the official BERT/ALBERT layout: `[CLS] question [SEP] context-window [SEP]`, segment 0 for
the question part and 1 for the window and its [SEP]; windows of at most `max_seq_length` tokens start every
`doc_stride` context tokens. Token <-> text alignment uses the tokenizer's character offsets into the
ORIGINAL context, so a decoded answer is always a slice of the context as written.

A feature is a dict. Model inputs: input_ids, token_type_ids, attention_mask, p_mask (1 = cannot be part of
an answer: question and [SEP]; 0 for [CLS], the null answer, and context tokens), start_positions,
end_positions (token indices; 0 = [CLS] when the answer is absent or outside the window), is_impossible.
Bookkeeping: example_index, offsets ((start, end) char span per position, None outside the context) and
token_is_max_context (per position: this window gives the token the most context on both sides).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Sequence

import numpy as np

from litebert.data.examples import Examples
from litebert.errors import ConfigError, DataFormatError
from litebert.files import read_json

logger = logging.getLogger(__name__)

@dataclass
class SquadExample:
    qid: str
    question: str
    context: str
    answers: list[str]  # gold answer texts ([] = unanswerable)
    answer_starts: list[int]  # char index of each answer in context (-1 = not found)
    is_impossible: bool = False
    title: str = ""
    source: str = field(default="", compare=False)


def _need(obj: Any, key: str, path: Path, what: str, kind: type | tuple = (str,)):
    if not isinstance(obj, dict) or key not in obj:
        raise DataFormatError(f"{path}: {what} has no field {key!r}")
    if not isinstance(obj[key], kind):
        raise DataFormatError(f"{path}: {what}: field {key!r} should be {kind}, got {type(obj[key]).__name__}")
    return obj[key]


def read_squad(path: str | Path) -> Examples:
    """SQuAD v1.1/v2.0 JSON ({"data": [{"title", "paragraphs": [{"context", "qas": [...]}]}]}).

    stats: articles, paragraphs, questions, answers, impossible, start_mismatch (answers whose answer_start
    does not point at their text; features then use the occurrence nearest to it).
    """
    path = Path(path)
    data = _need(read_json(path, DataFormatError), "data", path, "the top level", list)
    out: list[SquadExample] = []
    stats = dict(articles=len(data), paragraphs=0, questions=0, answers=0, impossible=0, start_mismatch=0)
    for a, article in enumerate(data):
        for p, para in enumerate(_need(article, "paragraphs", path, f"data[{a}]", list)):
            stats["paragraphs"] += 1
            context = _need(para, "context", path, f"data[{a}].paragraphs[{p}]")
            for q, qa in enumerate(_need(para, "qas", path, f"data[{a}].paragraphs[{p}]", list)):
                qid = str(_need(qa, "id", path, f"data[{a}].paragraphs[{p}].qas[{q}]", (str, int)))
                impossible = bool(qa.get("is_impossible", False))
                texts, starts = [], []
                for ans in [] if impossible else _need(qa, "answers", path, f"question {qid}", list):
                    text = _need(ans, "text", path, f"question {qid}: an answer")
                    start = _need(ans, "answer_start", path, f"question {qid}: an answer", int)
                    if context[start : start + len(text)] != text:
                        stats["start_mismatch"] += 1
                        start = _nearest_occurrence(context, text, start)
                    texts.append(text)
                    starts.append(start)
                if not impossible and not texts:
                    raise DataFormatError(f"{path}: question {qid} has no answers and is not marked is_impossible")
                stats["questions"] += 1
                stats["answers"] += len(texts)
                stats["impossible"] += impossible
                question = _need(qa, "question", path, f"question {qid}")
                out.append(SquadExample(qid, question, context, texts, starts, impossible,
                                        article.get("title", ""), f"{path}: question {qid}"))  # fmt: skip
    return Examples(out, path=path, stats=stats)


def _nearest_occurrence(context: str, text: str, start: int) -> int:
    """Index of the occurrence of `text` in `context` closest to `start`; -1 if it does not occur."""
    hits, i = [], context.find(text)
    while i >= 0:
        hits.append(i)
        i = context.find(text, i + 1)
    return min(hits, key=lambda h: abs(h - start)) if hits else -1


def read_cmrc2018(path: str | Path) -> Examples:
    """CMRC2018 in its release format: [{context_id, context_text, qas: [{query_id, query_text, answers}]}].
    Answer positions are found by searching the context (first occurrence). A SQuAD-format CMRC file is
    read by read_squad. stats: contexts, questions, answers, answers_not_found (kept with start -1; such an
    answer gives no training target, but still counts in evaluation)."""
    path = Path(path)
    data = read_json(path, DataFormatError)
    if isinstance(data, dict) and "data" in data:
        return read_squad(path)
    if not isinstance(data, list):
        raise DataFormatError(f"{path}: expected a list of contexts (CMRC2018 format) or a SQuAD-format object")
    out: list[SquadExample] = []
    stats = dict(contexts=len(data), questions=0, answers=0, answers_not_found=0, non_string_answers=0)
    for c, item in enumerate(data):
        context = _need(item, "context_text", path, f"context [{c}]")
        for qa in _need(item, "qas", path, f"context [{c}]", list):
            qid = _need(qa, "query_id", path, f"context [{c}]: a question")
            answers = _need(qa, "answers", path, f"question {qid}", list)
            if not answers or not all(isinstance(t, (str, int, float)) for t in answers):
                raise DataFormatError(f"{path}: question {qid}: answers should be a non-empty list of strings")
            # The release has a few numbers among the answers (e.g. 39764.0); the official evaluator str()s them.
            stats["non_string_answers"] += sum(not isinstance(t, str) for t in answers)
            answers = [str(t) for t in answers]
            starts = [context.find(t) for t in answers]
            stats["questions"] += 1
            stats["answers"] += len(answers)
            stats["answers_not_found"] += sum(s < 0 for s in starts)
            question = _need(qa, "query_text", path, f"question {qid}")
            out.append(SquadExample(qid, question, context, list(answers), starts, False,
                                    item.get("title", ""), f"{path}: question {qid}"))  # fmt: skip
    return Examples(out, path=path, stats=stats)


def squad_references(examples: Sequence[SquadExample]) -> dict[str, list[str]]:
    """qid -> gold answer texts ([] for unanswerable), the form metrics.squad_v1/squad_v2/cmrc2018 take."""
    return {ex.qid: list(ex.answers) for ex in examples}


# ---------------------------------------------------------------------------------------------------------
# Features
# ---------------------------------------------------------------------------------------------------------


def _context_tokens(tokenizer, context: str) -> tuple[list[int], list[tuple[int, int]]]:
    """Context ids and char offsets without the [CLS]/[SEP] that encode() adds."""
    enc = tokenizer.encode(context, return_offsets=True)
    ids, offsets = list(enc.input_ids), list(enc.offsets)
    if ids and ids[0] == tokenizer.cls_id:
        ids, offsets = ids[1:], offsets[1:]
    if ids and ids[-1] == tokenizer.sep_id:
        ids, offsets = ids[:-1], offsets[:-1]
    return ids, [tuple(o) for o in offsets]


def char_span_to_tokens(offsets: Sequence[tuple[int, int]], start: int, end: int) -> tuple[int, int] | None:
    """First and last token covering chars [start, end) of the text; None if no token overlaps."""
    first = next((i for i, (_, e) in enumerate(offsets) if e > start), None)
    last = next((i for i in range(len(offsets) - 1, -1, -1) if offsets[i][0] < end), None)
    if first is None or last is None or last < first:
        return None
    return first, last


def window_starts(n_tokens: int, window: int, stride: int) -> list[tuple[int, int]]:
    """(start, length) of each window over n_tokens, stepping by min(length, stride) (official doc spans)."""
    spans, start = [], 0
    while True:
        length = min(window, n_tokens - start)
        spans.append((start, length))
        if start + length >= n_tokens:
            return spans
        start += min(length, stride)


def max_context_windows(spans: list[tuple[int, int]], n_tokens: int) -> np.ndarray:
    """[n_tokens] index of the window that gives each token the most context: the best
    min(tokens left, tokens right) + 0.01 * window length, the first window on ties (official rule)."""
    best = np.zeros(n_tokens, dtype=np.int64)
    best_score = np.full(n_tokens, -np.inf)
    for i, (start, length) in enumerate(spans):
        pos = np.arange(start, start + length)
        score = np.minimum(pos - start, start + length - 1 - pos) + 0.01 * length
        better = score > best_score[pos]
        best[pos[better]], best_score[pos[better]] = i, score[better]
    return best


def convert_examples_to_features(
    examples: Sequence[SquadExample],
    tokenizer,
    max_seq_length: int = 384,
    doc_stride: int = 128,
    max_query_length: int = 64,
) -> list[dict]:
    """Sliding-window features (see the module docstring). Targets come from the first gold answer that
    occurs in the context; features without it in their window (or of unanswerable questions) point at
    [CLS] with is_impossible = 1."""
    questions = tokenizer.encode_ids_batch([ex.question for ex in examples]) if examples else []
    cache: dict[str, tuple[list[int], list[tuple[int, int]]]] = {}
    feats = []
    no_target = []  # answerable questions whose answer is in no window (or in no token): counted, logged
    for ex_index, ex in enumerate(examples):
        if ex.context not in cache:
            cache = {ex.context: _context_tokens(tokenizer, ex.context)}  # questions of a paragraph are adjacent
        doc_ids, doc_offsets = cache[ex.context]
        q_ids = questions[ex_index][:max_query_length]
        window = max_seq_length - len(q_ids) - 3
        if window <= 0:
            raise ConfigError(
                f"max_seq_length {max_seq_length} leaves no room for context after a {len(q_ids)}-token "
                "question; raise max_seq_length or lower max_query_length"
            )
        target = None  # answer token span in the whole context, from the first answer found in it
        found = [(s, t) for s, t in zip(ex.answer_starts, ex.answers) if s >= 0]
        if not ex.is_impossible and found:
            target = char_span_to_tokens(doc_offsets, found[0][0], found[0][0] + len(found[0][1]))
        spans = window_starts(len(doc_ids), window, doc_stride)
        best_window = max_context_windows(spans, len(doc_ids))
        in_some_window = False
        head = len(q_ids) + 2  # [CLS] question [SEP]
        for span_index, (start, length) in enumerate(spans):
            ids = [tokenizer.cls_id, *q_ids, tokenizer.sep_id, *doc_ids[start : start + length], tokenizer.sep_id]
            max_ctx = [False] * head + (best_window[start : start + length] == span_index).tolist()
            if target is not None and start <= target[0] and target[1] < start + length:
                start_pos, end_pos, impossible = target[0] - start + head, target[1] - start + head, 0
                in_some_window = True
            else:
                start_pos, end_pos, impossible = 0, 0, 1
            feats.append({
                "input_ids": ids,
                "token_type_ids": [0] * head + [1] * (length + 1),
                "attention_mask": [1] * len(ids),
                "p_mask": [0] + [1] * (head - 1) + [0] * length + [1],
                "start_positions": start_pos,
                "end_positions": end_pos,
                "is_impossible": impossible,
                "example_index": ex_index,
                "offsets": [None] * head + doc_offsets[start : start + length] + [None],
                "token_is_max_context": max_ctx + [False],
                # the question past max_query_length is cut (the context is not: windows cover all of it)
                "truncated_tokens": len(questions[ex_index]) - len(q_ids),
            })  # fmt: skip
        if not ex.is_impossible and not in_some_window:
            no_target.append(ex.qid)
    if no_target:
        logger.warning("%d of %d questions have an answer that no window holds (answer not found, or longer than "
                       "a window); their features point at [CLS]. First: %s", len(no_target), len(examples),
                       no_target[0])  # fmt: skip
    return feats


# ---------------------------------------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------------------------------------


def _best_spans(start: np.ndarray, end: np.ndarray, feat: dict, n_best: int, max_answer_length: int):
    """Valid (score, start_char, end_char, start_logit, end_logit) among the top n_best starts x ends, in
    (start rank, end rank) order. Valid: both in the context, end >= start, short enough, and the start
    token is in its max-context window."""
    in_context = np.asarray(feat["p_mask"]) == 0  # [L]
    in_context[0] = False  # [CLS] is the null answer, not a span
    starts = np.argsort(-start, kind="stable")[:n_best]
    ends = np.argsort(-end, kind="stable")[:n_best]
    s, e = np.meshgrid(starts, ends, indexing="ij")  # [k, k]
    max_ctx = np.asarray(feat["token_is_max_context"], dtype=bool)
    ok = in_context[s] & in_context[e] & max_ctx[s] & (e >= s) & (e - s + 1 <= max_answer_length)
    offsets = feat["offsets"]
    return [
        (float(start[i] + end[j]), offsets[i][0], offsets[j][1], float(start[i]), float(end[j]))
        for i, j in zip(s[ok].tolist(), e[ok].tolist())
    ]


@dataclass
class Answer:
    """The decoded answer of one question: text = context[start:end] ("" with start = end = None for no answer)."""

    text: str
    start: int | None
    end: int | None
    score: float  # softmax over the n-best span scores (start + end logits), as the official nbest file
    null_odds: float  # null ([CLS]) score - best span score; > threshold means "no answer" under SQuAD v2.0


def decode_answers(
    examples: Sequence[SquadExample],
    features: Sequence[dict],
    start_logits,
    end_logits,
    n_best: int = 20,
    max_answer_length: int = 30,
    null_score_diff_threshold: float = 0.0,
    version_2: bool = False,
) -> dict[str, Answer]:
    """The best answer per question, with its character span in the original context.

    start_logits/end_logits: per feature, [N][L'] with L' >= the feature's length (padding is ignored).
    n_best: span candidates kept per feature and question; max_answer_length in tokens; with version_2, a
    question whose null odds exceed null_score_diff_threshold gets the empty answer."""
    by_example: dict[int, list[int]] = {}
    for i, feat in enumerate(features):
        by_example.setdefault(feat["example_index"], []).append(i)
    answers = {}
    for ex_index, ex in enumerate(examples):
        candidates, min_null = [], None
        for i in by_example.get(ex_index, []):
            n = len(features[i]["input_ids"])
            s_log = np.asarray(start_logits[i], dtype=np.float64)[:n]
            e_log = np.asarray(end_logits[i], dtype=np.float64)[:n]
            null = float(s_log[0] + e_log[0])  # [CLS] span
            min_null = null if min_null is None else min(min_null, null)
            candidates += _best_spans(s_log, e_log, features[i], n_best, max_answer_length)
        candidates.sort(key=lambda c: c[0], reverse=True)
        top = candidates[:n_best]
        best = next((c for c in top if ex.context[c[1] : c[2]].strip()), None)
        best_score = best[3] + best[4] if best else 0.0
        odds = (min_null if min_null is not None else 0.0) - best_score
        if best is None or (version_2 and odds > null_score_diff_threshold):
            answers[ex.qid] = Answer("", None, None, 0.0 if best is None else _softmax_share(top, best), odds)
            continue
        raw = ex.context[best[1] : best[2]]
        start = best[1] + len(raw) - len(raw.lstrip())  # the stripped text's own span
        text = raw.strip()
        answers[ex.qid] = Answer(text, start, start + len(text), _softmax_share(top, best), odds)
    return answers


def _softmax_share(candidates, best) -> float:
    scores = np.array([c[0] for c in candidates], dtype=np.float64)
    weights = np.exp(scores - scores.max())
    return float(np.exp(best[0] - scores.max()) / weights.sum())


def postprocess_predictions(examples: Sequence[SquadExample], features: Sequence[dict], start_logits, end_logits,
                            **options) -> tuple[dict[str, str], dict[str, float]]:
    """Best answer text per question, sliced from the original context.

    start_logits/end_logits: per feature, [N][L'] with L' >= the feature's length (padding is ignored).
    options: n_best, max_answer_length, null_score_diff_threshold, version_2 (see decode_answers).
    Returns (predictions {qid: text}, null_odds {qid: null score - best span score}). With version_2 a
    question is answered "" when its null odds exceed null_score_diff_threshold; null_odds is the
    `na_probs` that metrics.squad_v2 takes for its best-threshold search.
    """
    answers = decode_answers(examples, features, start_logits, end_logits, **options)
    return {q: a.text for q, a in answers.items()}, {q: a.null_odds for q, a in answers.items()}
