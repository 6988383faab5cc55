"""Held-out MLM of several checkpoints on several stores' validation splits, all with one protocol (the demo's:
ALBERT's 15% masking, pairs of 64 tokens, 20 batches of 32, epoch-0 masks), as a markdown table. Says what
continued pretraining taught a model about the new text, and what it kept of the old.

Each cell is read the honest way (litebert.mlm_scores, issue 34): accuracy at the [MASK] positions beside the
commonest-piece and bigram baselines on the same targets, then the official headline (every target, including
the ones left unchanged in the input, which copying gets right) and the loss.

    python experiments/heldout_mlm.py --stores runs/23t/store-books runs/23t/store-sst2 \
        --checkpoints runs/23t/pre-books/checkpoint-3000 runs/23t/pre-tapt/checkpoint-1500
"""

from __future__ import annotations

import argparse

import torch

from litebert import AlbertForPreTraining
from litebert.demo import DEMO_RECIPE
from litebert.pretrain import PretrainConfig
from litebert.pretrain_eval import eval_protocol, evaluate_checkpoint


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stores", nargs="+", required=True)
    ap.add_argument("--checkpoints", nargs="+", required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    # the demo's scoring: its recipe's length and cap, held-out MLM at ALBERT's 15% (pretrain_eval.eval_protocol)
    protocol = eval_protocol(PretrainConfig(**DEMO_RECIPE))
    print(f"Protocol: {protocol.max_seq_length}-token pairs, {protocol.masked_lm_prob:.0%} masking, at most "
          f"{protocol.max_predictions_per_seq} targets per pair, 20 batches of 32, epoch-0 masks.\n")
    print("| checkpoint | " + " | ".join(f"{s}: at [MASK] (commonest / bigram) / headline / loss"
                                         for s in args.stores) + " |")
    print("|---|" + "---|" * len(args.stores))
    for ckpt in args.checkpoints:
        model = AlbertForPreTraining.from_pretrained(ckpt)
        cells = []
        for store in args.stores:
            r = evaluate_checkpoint(model, store, "none", protocol.max_seq_length, batches=20, batch_size=32,
                                    cfg=protocol)
            cells.append(f"{r['eval_mlm_acc_mask']:.1%} ({r['eval_base_mask_commonest']:.1%} / "
                         f"{r['eval_base_mask_bigram']:.1%}) / {r['eval_mlm_acc']:.1%} / {r['eval_mlm_loss']:.2f}")
        print(f"| {ckpt} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
