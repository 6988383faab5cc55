"""Is it the pooler? Fine-tune a pretraining checkpoint on SST-2 with its pooler re-initialised, with the
ablation suite's downstream settings (batch 32, seq 64, 10% warmup, best dev accuracy).

The pooler ([CLS] -> dense -> tanh) is what the SOP or NSP head reads in pretraining and what the classifier reads
in fine-tuning. A model pretrained with MLM only never trains it. If a pair-trained model fine-tunes worse than an
MLM-only one because its pooler is set for the pair task, drawing the pooler afresh (as the MLM-only model's is)
should close the gap.

    python experiments/reinit_pooler_sst2.py runs/ablate-thorough/_runs/<run>/pretrain/checkpoint-6000 \
        --out runs/reinit/<run> --train-examples 2000 --steps 300 --lr 2e-4 --seeds 3
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import torch

from litebert.lab.ablate import finetune_sst2
from litebert.model import AlbertForPreTraining
from litebert.lab.shared_data import shared_data_dir
from litebert.tokenizer import load_tokenizer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--train-examples", type=int, default=2000)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--lr", type=float, default=2e-4)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model = AlbertForPreTraining.from_pretrained(args.checkpoint)
    torch.manual_seed(0)
    model.albert.pooler.apply(model._init_module)  # the model's own initialisation, as an untrained pooler has
    model.save_pretrained(args.out / "model", tokenizer=load_tokenizer(args.checkpoint))
    scores = finetune_sst2(args.out / "model", args.out / "sst2", shared_data_dir() / "glue", seeds=args.seeds,
                           lr=args.lr, steps=args.steps, train_examples=args.train_examples,
                           eval_every=args.steps)
    print(f"{args.checkpoint}: SST-2 dev accuracy with a fresh pooler {', '.join(f'{s:.3f}' for s in scores)}; "
          f"mean {statistics.mean(scores):.3f} ± {statistics.pstdev(scores):.3f}")


if __name__ == "__main__":
    main()
