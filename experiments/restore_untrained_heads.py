"""Give an MLM-only checkpoint made before the fix of `pretrain --objective none` (the optimizer's weight decay
erased the untrained pooler and SOP head to 0) back the values those tensors started from: the same config and
seed's initial weights (say, sst2_transfer.py's random-init dir, made with seed 0 like the pretraining run). The
result is what the fixed code writes: its pooler and SOP head are never updated, and nothing else depends on them.

    python experiments/restore_untrained_heads.py runs/23t/pre-tapt/checkpoint-1500 runs/23t/ft/random-init \
        runs/23t/fixed/books+tapt
"""

from __future__ import annotations

import argparse

import torch

from litebert import AlbertForPreTraining
from litebert.tokenizer import load_tokenizer

UNTRAINED = ("albert.pooler.", "sop.")  # what MLM-only pretraining does not train (pretrain_setup.py's `untrained`)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("initial", help="a model dir with the run's initial weights (same config and seed)")
    ap.add_argument("out")
    args = ap.parse_args()
    model = AlbertForPreTraining.from_pretrained(args.checkpoint)
    initial = AlbertForPreTraining.from_pretrained(args.initial).state_dict()
    restored = {k: v for k, v in initial.items() if k.startswith(UNTRAINED)}
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            if name in restored:
                print(f"{name}: norm {tensor.norm():.3g} -> {restored[name].norm():.3g}")
                tensor.copy_(restored[name])
    model.save_pretrained(args.out, tokenizer=load_tokenizer(args.checkpoint))


if __name__ == "__main__":
    main()
