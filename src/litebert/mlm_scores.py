"""Held-out MLM figures you can read: accuracy by kind of target, and model-free baselines on the same targets.

ALBERT's masking (data/pretraining.py) turns 80% of the chosen positions into [MASK], leaves 10% unchanged in the
input and replaces 10% by a random piece. The official `masked_lm_accuracy` (our `eval_mlm_acc`, kept for
comparability) counts all of them, and at the kept ones the model only has to copy its input: on a small model
that copying is most of the figure. So every held-out evaluation also reports

- accuracy at each KIND of target: [MASK] positions (the fill-in task itself), kept, random-replaced;
- baselines that need no model, scored on exactly the same targets:
    commonest       always the training split's commonest piece
    copy            the input token at the position (right at every kept target, wrong at every [MASK])
    copy_commonest  copy, but the commonest piece where the input is [MASK]
    bigram          the piece that most often follows the input's previous token in the training split
                    (the commonest piece where that token is [MASK], special or unseen)
    copy_bigram     copy, but the bigram guess where the input is [MASK]
  At [MASK] targets copying is always wrong, so there the baselines are `commonest` and `bigram`.

The kind of each target comes from the masking code (the batch's `masked_kinds`), not from comparing tokens: a
random replacement that happens to draw the original piece is still a random-replaced target.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import torch

from litebert.model import predicted_ids

MASKED, KEPT, RANDOM = 0, 1, 2  # masked_kinds values: what the 80/10/10 rule did at each target
KINDS = {"mask": MASKED, "kept": KEPT, "random": RANDOM}
BASELINES = ("commonest", "copy", "copy_commonest", "bigram", "copy_bigram")
MASK_BASELINES = ("commonest", "bigram")  # the others equal these at [MASK] targets (copying is always wrong)
# Bigram counts are read from at most this many training tokens (in store order): enough for a stable table,
# and a multi-GB store is not read whole at every evaluation's first use.
BIGRAM_TOKENS = 20_000_000


@dataclass(frozen=True)
class PieceTable:
    """What the model-free baselines know of the training split."""

    commonest: int  # the commonest piece
    next_after: np.ndarray  # [V] the commonest piece after each piece (`commonest` where a piece is never followed)
    tokens: int  # training tokens counted
    counts: np.ndarray | None = None  # [V] how often each piece occurs in the counted tokens

    def log_prior(self) -> np.ndarray:
        """[V] log of each piece's frequency, add-0.5 smoothed (never -inf): the MLM bias that guesses them."""
        counts = self.counts.astype(np.float64) + 0.5
        return np.log(counts / counts.sum())


def piece_table_from_tokens(streams, vocab_size: int) -> PieceTable:
    """The table from token id arrays (each one running text: pairs are counted inside each array, not across)."""
    unigram = np.zeros(vocab_size, np.int64)
    pairs, counted = [], 0
    for ids in streams:
        ids = np.asarray(ids, np.int64)
        unigram += np.bincount(ids, minlength=vocab_size)
        pairs.append(ids[:-1] * vocab_size + ids[1:])  # [n - 1] (previous, next) as one code
        counted += len(ids)
    commonest = int(unigram.argmax())  # ties: the smallest id
    next_after = np.full(vocab_size, commonest, np.int64)
    codes, counts = np.unique(np.concatenate(pairs) if pairs else np.zeros(0, np.int64), return_counts=True)
    if len(codes):
        prev, nxt = np.divmod(codes, vocab_size)
        order = np.lexsort((nxt, -counts, prev))  # by previous piece, then most frequent first, ties: smallest id
        first = order[np.r_[True, prev[order][1:] != prev[order][:-1]]]
        next_after[prev[first]] = nxt[first]
    return PieceTable(commonest, next_after, counted, unigram)


@functools.lru_cache(maxsize=4)
def _cached_table(path: str, fingerprint: str, max_tokens: int) -> PieceTable:
    from litebert.data.store import TokenStore

    store = TokenStore.open(path)
    split = store.split("train")

    def shards():
        left = max_tokens
        for k in range(len(split.shards)):
            lo, hi = int(split.sentence_base[k]), int(split.sentence_base[k + 1])
            if hi > lo and left > 0:
                ids = split.tokens(lo, hi)[:left]
                left -= len(ids)
                yield ids

    return piece_table_from_tokens(shards(), store.vocab_size)


def piece_table(store, max_tokens: int = BIGRAM_TOKENS) -> PieceTable:
    """The training split's table (its first `max_tokens` tokens), computed once per store content."""
    return _cached_table(str(store.path), store.content_fingerprint, max_tokens)


def baseline_predictions(input_ids: np.ndarray, positions: np.ndarray, mask_id: int,
                         table: PieceTable) -> dict[str, np.ndarray]:
    """Each baseline's guess at each target. input_ids [B, L] (what the model sees), positions [B, P] -> [B, P]."""
    shown = np.take_along_axis(input_ids, positions, axis=1)  # [B, P] the input token at each target
    before = np.take_along_axis(input_ids, np.maximum(positions - 1, 0), axis=1)  # [B, P]
    # The table has no row for [MASK] and the specials (they never occur in the training split's text):
    # next_after gives the commonest piece for them.
    bigram = table.next_after[np.clip(before, 0, len(table.next_after) - 1)]
    commonest = np.full_like(shown, table.commonest)
    is_mask = shown == mask_id
    return {"commonest": commonest, "copy": shown, "copy_commonest": np.where(is_mask, commonest, shown),
            "bigram": bigram, "copy_bigram": np.where(is_mask, bigram, shown)}


class MlmTally:
    """Counts over held-out batches: the model's hits, each baseline's hits, per kind of target."""

    def __init__(self, table: PieceTable, mask_id: int):
        self.table, self.mask_id = table, mask_id
        self.targets = np.zeros(3, np.int64)  # [kind]
        self.model = np.zeros(3, np.int64)  # [kind] correct
        self.loss = np.zeros(3, np.float64)  # [kind] summed cross-entropy
        self.baselines = {name: np.zeros(3, np.int64) for name in BASELINES}

    def add(self, batch: dict[str, torch.Tensor], logits: torch.Tensor | None = None,
            loss: torch.Tensor | None = None) -> None:
        """One batch (collate_pretraining's tensors, with masked_kinds); logits [B, P, V] or None (baselines only);
        loss [B, P] per-target cross-entropy or None."""
        weights = batch["masked_weights"].cpu().numpy() > 0  # [B, P]
        kinds = batch["masked_kinds"].cpu().numpy().astype(np.int64)[weights]  # [N]
        labels = batch["masked_ids"].cpu().numpy()  # [B, P]
        self.targets += np.bincount(kinds, minlength=3)
        if logits is not None:
            hit = (predicted_ids(logits).cpu().numpy() == labels)[weights]
            self.model += np.bincount(kinds, weights=hit.astype(np.float64), minlength=3).astype(np.int64)
        if loss is not None:
            self.loss += np.bincount(kinds, weights=loss.detach().float().cpu().numpy()[weights], minlength=3)
        guesses = baseline_predictions(batch["input_ids"].cpu().numpy(), batch["masked_positions"].cpu().numpy(),
                                       self.mask_id, self.table)
        for name, guess in guesses.items():
            self.baselines[name] += np.bincount(kinds, weights=(guess == labels)[weights].astype(np.float64),
                                                   minlength=3).astype(np.int64)

    def result(self, prefix: str = "eval_") -> dict[str, float]:
        """{prefix}mlm_acc_{kind}, {prefix}mlm_loss_mask, {prefix}targets_{kind}, {prefix}base_{name} (all targets)
        and {prefix}base_mask_{name} ([MASK] targets). An accuracy over no targets is NaN."""
        def share(hits, n):
            return float(hits / n) if n else float("nan")

        total = int(self.targets.sum())
        out: dict[str, float] = {}
        for kind, k in KINDS.items():
            out[f"{prefix}mlm_acc_{kind}"] = share(self.model[k], self.targets[k])
        out[f"{prefix}mlm_loss_mask"] = share(self.loss[MASKED], self.targets[MASKED])
        for kind, k in KINDS.items():
            out[f"{prefix}targets_{kind}"] = int(self.targets[k])
        for name in BASELINES:
            out[f"{prefix}base_{name}"] = share(self.baselines[name].sum(), total)
        for name in MASK_BASELINES:
            out[f"{prefix}base_mask_{name}"] = share(self.baselines[name][MASKED], self.targets[MASKED])
        return out


def summary_line(r: dict, prefix: str = "eval_") -> str:
    """One line for a log: the [MASK]-position figure first, its baselines, then the headline and the rest."""
    def pct(key):
        v = r.get(prefix + key)
        return "-" if v is None or v != v else f"{v:.1%}"

    return (f"mlm at [MASK] {pct('mlm_acc_mask')} (baselines: commonest {pct('base_mask_commonest')}, bigram "
            f"{pct('base_mask_bigram')}); kept {pct('mlm_acc_kept')}, random {pct('mlm_acc_random')}; headline "
            f"{pct('mlm_acc')} (copy-else-commonest {pct('base_copy_commonest')}, copy-else-bigram "
            f"{pct('base_copy_bigram')})")
