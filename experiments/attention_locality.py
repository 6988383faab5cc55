"""Does a pretrained model read its neighbours, and where does it lose to the bigram table? (issue 43)

Two reports on a model with MLM heads and its token store, on the held-out evaluation's batches (the validation
split, ALBERT's 15% n-gram masking, 64-token pairs, as `pretrain`'s eval lines):

1. attention by offset: for each block application and head, the mean weight a token gives the tokens at offsets
   -2..+2 (uniform attention gives every offset about 1/L) and the mean attention entropy beside ln(L);
2. the [MASK] targets split by whether the token before is masked and by how often it occurs in the training
   split, with the model's and the bigram table's accuracy in each group.

    python experiments/attention_locality.py --model runs/demo/pretrain/final --store runs/demo/store
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from litebert.data.pretraining import PretrainingDataset, collate_pretraining
from litebert.data.store import TokenStore
from litebert.mlm_scores import MASKED, baseline_predictions, piece_table
from litebert.model import AlbertForPreTraining, attention_weights


def held_out_batches(store, length: int, batch_size: int = 32):
    ds = PretrainingDataset(store, split="validation", max_seq_length=length,
                            max_predictions_per_seq=max(1, round(0.15 * length) + 1), masked_lm_prob=0.15,
                            short_seq_prob=0.1, ngram=3, objective="sop", seed=0, single_sentence="split")
    ds.set_epoch(0)
    for start in range(0, len(ds), batch_size):
        yield collate_pretraining(ds.examples(np.arange(start, min(len(ds), start + batch_size)), epoch=0),
                                  pad_to=length, pad_id=store.token_id("pad"))


def attention_probs(model, batch) -> list[torch.Tensor]:
    """Each block application's attention probabilities [B, heads, L, L], recomputed from its input (the model
    itself runs SDPA, which does not return them)."""
    probs = []

    def hook(module, inputs, _output):
        x, mask = inputs[0], inputs[1]
        B, L, H = x.shape
        h = module.norm(x) if module.pre_norm else x
        q, k, _ = module.qkv(h).view(B, L, 3, module.num_heads, H // module.num_heads).permute(2, 0, 3, 1, 4)
        probs.append(attention_weights(q, k, mask))  # mask: the padding, with any distance bias added

    handles = [a.register_forward_hook(hook) for a in model.albert.encoder.attention]
    try:
        with torch.no_grad():
            model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"],
                  masked_positions=batch["masked_positions"])
    finally:
        for h in handles:
            h.remove()
    return probs


def offset_report(model, batch) -> list[str]:
    real = batch["attention_mask"].bool()  # [B, L]
    L = real.shape[1]
    lines = []
    for app, p in enumerate(attention_probs(model, batch)):
        for head in range(p.shape[1]):
            ph = p[:, head]  # [B, L, L]
            cells = []
            for off in (-2, -1, 0, 1, 2):
                i = torch.arange(L)
                ok = (i + off >= 0) & (i + off < L)
                i = i[ok]
                both = real[:, i] & real[:, i + off]
                cells.append(f"{off:+d}: {ph[:, i, i + off][both].mean().item():.3f}")
            entropy = -(ph.clamp_min(1e-9).log() * ph).sum(-1)[real].mean().item()
            lines.append(f"application {app} head {head}: " + "  ".join(cells)
                         + f"  entropy {entropy:.2f} (uniform {np.log(real.sum(1).float().mean().item()):.2f})")
    return lines


def target_report(model, store, length: int) -> list[str]:
    table, mask_id = piece_table(store), store.token_id("mask")
    rows = []  # (model right, bigram right, left masked, left count)
    for b in held_out_batches(store, length):
        with torch.no_grad():
            out = model(b["input_ids"], b["attention_mask"], b["token_type_ids"],
                        masked_positions=b["masked_positions"])
        ids, pos, labels = b["input_ids"].numpy(), b["masked_positions"].numpy(), b["masked_ids"].numpy()
        guess = baseline_predictions(ids, pos, mask_id, table)["bigram"]
        before = np.take_along_axis(ids, np.maximum(pos - 1, 0), 1)
        keep = (b["masked_weights"].numpy() > 0) & (b["masked_kinds"].numpy() == MASKED)
        counts = table.counts[np.clip(before, 0, len(table.counts) - 1)]
        rows.append(np.stack([(out.mlm_logits.argmax(-1).numpy() == labels)[keep], (guess == labels)[keep],
                              (before == mask_id)[keep], counts[keep]], 1))
    r = np.concatenate(rows).astype(np.float64)
    lines = [f"[MASK] targets {len(r)}: model {r[:, 0].mean():.1%}, bigram table {r[:, 1].mean():.1%}"]
    groups = [("left neighbour masked", r[:, 2] == 1)]
    for lo, hi in ((0, 10), (10, 100), (100, 1000), (1000, 10000), (10000, np.inf)):
        groups.append((f"left visible, seen [{lo}, {hi}) times", (r[:, 2] == 0) & (r[:, 3] >= lo) & (r[:, 3] < hi)))
    for name, sel in groups:
        if sel.any():
            lines.append(f"  {name}: n {int(sel.sum())}, model {r[sel, 0].mean():.1%}, bigram {r[sel, 1].mean():.1%}")
    return lines


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="a model directory with MLM heads (final/, checkpoint-N/)")
    p.add_argument("--store", required=True)
    p.add_argument("--length", type=int, default=64)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    model = AlbertForPreTraining.from_pretrained(args.model).eval()
    store = TokenStore.open(args.store)
    print("\n".join(offset_report(model, next(held_out_batches(store, args.length, 64)))))
    print("\n".join(target_report(model, store, args.length)))


if __name__ == "__main__":
    main()
