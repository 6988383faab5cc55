"""`litebert data inspect`: what pretraining examples drawn from a store look like, measured on real examples.

Pair labels (the share of label 1, of B from another document, of short targets) come from the epoch's chunk
index (`PretrainingDataset.label_balance`) and are checked against the labels of the examples built. Masking is
read back from the examples: each run of adjacent masked positions is a span, and it covers whole words when it
starts at a word start and the token after it starts a word (or is [SEP]), by the store's word boundaries
(tokenizer vocab rule, or the segmenter's words in a store built with --word-segmenter). A segment's first token
counts as a word start: truncation may have cut the word it belonged to, and the rest is not in the example.
"""

from __future__ import annotations

import numpy as np

from litebert.data.pretraining import PretrainingDataset


def masked_runs(positions: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) of each run of consecutive positions (positions sorted, [M])."""
    if len(positions) == 0:
        return []
    breaks = np.flatnonzero(np.diff(positions) != 1) + 1
    return [(int(r[0]), int(r[-1]) + 1) for r in np.split(positions, breaks)]


def inspect_examples(dataset: PretrainingDataset, count: int = 1000) -> dict:
    """Label balance and masking statistics over `count` examples spread evenly over epoch 0."""
    dataset.set_epoch(0)
    balance = dataset.label_balance(0)
    n = min(count, len(dataset))
    picks = np.unique(np.linspace(0, len(dataset) - 1, n).astype(np.int64)) if n else np.zeros(0, np.int64)
    labels, spans, whole, words_per_span = [], 0, 0, []
    for index in picks.tolist():
        ex = dataset.example(index)
        labels.append(ex["sop_label"])
        flags, weights = ex["word_starts"].copy(), ex["masked_weights"]  # [L], [P]
        special = np.isin(ex["input_ids"], (dataset.cls_id, dataset.sep_id))  # never masked, so never replaced
        flags[1:] |= special[:-1]  # a segment starts a word even when truncation cut into one
        for start, end in masked_runs(ex["masked_positions"][weights > 0]):
            spans += 1
            complete = bool(flags[start]) and bool(flags[end])  # flags[end]: next word, or [SEP] (always set)
            whole += complete
            if complete:
                words_per_span.append(int(flags[start:end].sum()))
    labels = np.asarray(labels)
    counts = np.bincount(words_per_span, minlength=len(dataset.pvals) + 2)[1:] if words_per_span else np.zeros(0)
    return {**balance, "inspected": int(len(picks)),
            "measured_label1": float((labels == 1).mean()) if len(labels) and labels[0] >= 0 else float("nan"),
            "masked_spans": spans, "whole_word_spans": whole / max(spans, 1),
            "words_per_whole_span": (counts / max(counts.sum(), 1)).tolist()}


def format_inspection(result: dict) -> list[str]:
    shares = "  ".join(f"{k + 1}: {v:.1%}" for k, v in enumerate(result["words_per_whole_span"]) if v)
    return [
        f"examples   {result['examples']:,} in epoch 0; {result['inspected']:,} inspected",
        f"pairs      {result['single_sentence_chunks']:.1%} single-sentence chunks, {result['random_b']:.1%} with "
        f"B from another document, {result['short_targets']:.1%} short targets",
        f"labels     label 1 (swapped / random B): {result['label1']:.1%} expected, "
        f"{result['measured_label1']:.1%} in the inspected examples",
        f"masking    {result['masked_spans']:,} masked runs, {result['whole_word_spans']:.1%} cover whole words",
        f"n-grams    words per whole-word run: {shares or '-'}",
    ]
