"""Held-out MLM accuracy of pretrained checkpoints on single-segment and on pair-formatted text.

The ablation scores every model on held-out pairs ([CLS] A [SEP] B [SEP], segment ids 0/1). A model trained with
objective "none" never saw that format, so its MLM accuracy there is lower for reasons that are not language
modelling. This scores each checkpoint on both formats, with the same masks for every model.

    python experiments/mlm_by_input_format.py --store runs/ablate-long/_data/store CHECKPOINT [CHECKPOINT ...]
"""

from __future__ import annotations

import argparse

import torch

from litebert.model import AlbertForPreTraining
from litebert.pretrain_eval import evaluate_checkpoint


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoints", nargs="+")
    ap.add_argument("--store", required=True, help="token store whose validation split is scored")
    ap.add_argument("--max-seq-length", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print("| checkpoint | MLM acc, single segments | MLM acc, sentence pairs |\n|---|---|---|")
    for path in args.checkpoints:
        model = AlbertForPreTraining.from_pretrained(path)
        accs = [evaluate_checkpoint(model, args.store, fmt, args.max_seq_length, batches=40,
                                    precision="auto")["eval_mlm_acc"] for fmt in ("none", "sop")]
        print(f"| {path} | {100 * accs[0]:.2f} | {100 * accs[1]:.2f} |")


if __name__ == "__main__":
    main()
