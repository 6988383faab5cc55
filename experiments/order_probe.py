"""Does a pretrained model use word order? Held-out MLM accuracy with the study's evaluation protocol (ALBERT's
15% whole-word n-gram masking, the validation split's first examples of epoch 0) on the inputs as they are, and
with the visible words of each segment shuffled among their own positions ([MASK]s, [CLS] and [SEP] stay put).
A model that predicts from what a passage is about (a bag of words) scores the same on both; one that reads
syntax loses accuracy on the shuffled inputs. The bigram row is a count model with no training beyond counting:
it predicts each masked piece from its visible left and right neighbours (naive Bayes over the training split's
bigram counts), which says how much the neighbours alone can tell.

    python experiments/order_probe.py --store runs/study/demo/store --models runs/models/NAME ... --seq-len 64
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import torch


def examples(store, seq_len: int, n: int) -> list[dict]:
    from litebert.data.pretraining import PretrainingDataset

    ds = PretrainingDataset(store, split="validation", max_seq_length=seq_len,
                            max_predictions_per_seq=round(seq_len * 0.15) + 1, masked_lm_prob=0.15,
                            short_seq_prob=0.1, ngram=3, objective="sop", seed=0, single_sentence="split")
    ds.set_epoch(0)
    return [ds[i] for i in range(min(len(ds), n))]


def shuffled(ex: dict, special: set[int], rng: np.random.Generator) -> np.ndarray:
    """input_ids [L] with each segment's visible pieces permuted among their own positions."""
    ids = np.array(ex["input_ids"])
    for seg in np.unique(ex["token_type_ids"]):
        pos = np.flatnonzero((ex["token_type_ids"] == seg) & (ex["attention_mask"] > 0)
                             & ~np.isin(ids, list(special)))
        ids[pos] = ids[rng.permutation(pos)]
    return ids


@torch.no_grad()
def accuracy(model, exs: list[dict], inputs: list[np.ndarray], seq_len: int, pad_id: int) -> float:
    from litebert.data.pretraining import collate_pretraining

    hit = total = 0.0
    for start in range(0, len(exs), 32):
        batch = [{**e, "input_ids": x} for e, x in zip(exs[start:start + 32], inputs[start:start + 32])]
        b = collate_pretraining(batch, pad_to=seq_len, pad_id=pad_id)
        out = model(b["input_ids"], b["attention_mask"], b["token_type_ids"], masked_positions=b["masked_positions"])
        w = b["masked_weights"]
        hit += float(((out.mlm_logits.argmax(-1) == b["masked_ids"]) * w).sum())
        total += float(w.sum())
    return hit / total


def bigram_accuracy(store, exs: list[dict], special: set[int]) -> float:
    """Each masked piece predicted from its visible neighbours by the training split's bigram counts."""
    from scipy import sparse

    split = store.split("train")
    toks = np.concatenate([split.tokens(int(split.sentence_base[k]), int(split.sentence_base[k + 1]))
                           for k in range(len(split.shards))]).astype(np.int64)
    V = store.vocab_size
    uni = np.bincount(toks, minlength=V).astype(float)
    prior = (uni + 1) / (uni + 1).sum()
    after = sparse.coo_matrix((np.ones(len(toks) - 1), (toks[:-1], toks[1:])), shape=(V, V)).tocsr()  # [left, w]
    before = after.T.tocsr()  # [right, w]
    hit = total = 0
    for ex in exs:
        ids = ex["input_ids"]
        for p, gold, w in zip(ex["masked_positions"], ex["masked_ids"], ex["masked_weights"]):
            if w == 0:
                continue
            score = np.log(prior)
            for table, q in ((after, p - 1), (before, p + 1)):
                if 0 <= q < len(ids) and ids[q] not in special:
                    row = np.asarray(table[ids[q]].todense()).ravel()
                    score += np.log((row + 0.1 * prior * V) / (row.sum() + 0.1 * V)) - np.log(prior)
            score[list(special)] = -np.inf
            hit, total = hit + int(score.argmax() == gold), total + 1
    return hit / total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", required=True)
    ap.add_argument("--models", nargs="*", default=[])
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--examples", type=int, default=640)
    args = ap.parse_args()
    torch.set_num_threads(1)
    from litebert.data.store import TokenStore
    from litebert.model import AlbertForPreTraining

    store = TokenStore.open(args.store)
    special = {store.token_id(n) for n in ("pad", "cls", "sep", "mask")}
    exs = examples(store, args.seq_len, args.examples)
    rng = np.random.default_rng(0)
    as_is = [np.asarray(e["input_ids"]) for e in exs]
    mixed = [shuffled(e, special, rng) for e in exs]
    rows = {"bigram counts (neighbours only)": {"as_is": bigram_accuracy(store, exs, special)}}
    for path in args.models:
        model = AlbertForPreTraining.from_pretrained(path).eval()
        pad = store.token_id("pad")
        rows[path] = {"as_is": accuracy(model, exs, as_is, args.seq_len, pad),
                      "shuffled": accuracy(model, exs, mixed, args.seq_len, pad)}
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
