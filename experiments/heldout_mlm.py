"""Held-out MLM accuracy of several checkpoints on several stores' validation splits, all with one protocol (the
demo's: ALBERT's 15% masking, pairs of 64 tokens, 20 batches of 32, epoch-0 masks), as a markdown table. Says
what continued pretraining taught a model about the new text, and what it kept of the old.

    python experiments/heldout_mlm.py --stores runs/23t/store-books runs/23t/store-sst2 \
        --checkpoints runs/23t/pre-books/checkpoint-3000 runs/23t/pre-tapt/checkpoint-1500
"""

from __future__ import annotations

import argparse

import torch

from litebert import AlbertForPreTraining
from litebert.demo import EVAL_PROTOCOL
from litebert.pretrain import PretrainConfig, evaluate_checkpoint


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--stores", nargs="+", required=True)
    ap.add_argument("--checkpoints", nargs="+", required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    protocol = PretrainConfig(**EVAL_PROTOCOL)
    print("| checkpoint | " + " | ".join(f"{s}: MLM acc / loss" for s in args.stores) + " |")
    print("|---|" + "---|" * len(args.stores))
    for ckpt in args.checkpoints:
        model = AlbertForPreTraining.from_pretrained(ckpt)
        cells = []
        for store in args.stores:
            r = evaluate_checkpoint(model, store, "none", protocol.max_seq_length, batches=20, batch_size=32,
                                    cfg=protocol)
            cells.append(f"{r['eval_mlm_acc']:.1%} / {r['eval_mlm_loss']:.2f}")
        print(f"| {ckpt} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
