"""Why does a TAPT model not transfer? Fine-tune one checkpoint on SST-2 with the head's input or the trainable
set changed, by the comparison protocol of experiments/sst2_transfer.py (`finetune_sst2`: first N training
sentences, batch 32, seq 64, best of the dev evaluations every 100 steps), and append the scores to OUT.jsonl.

    --variant mean    the pooler reads the mean of the last layer over real tokens instead of [CLS]
                      (MLM-only pretraining never trains the [CLS] position's output)
    --variant freeze  the word embeddings stay as pretrained (fine-tuning on 1,000 sentences moves the words it
                      sees away from the ones it does not)
    --variant mean+freeze  both

The change is made by patching litebert in this process only (a diagnostic, not a library option):

    python experiments/sst2_finetune_variants.py runs/tapt/pre-demo-db2/final --variant mean \
        --out runs/tapt/ftv/tapt-mean --record runs/tapt/ft_variants.jsonl
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import torch

import litebert.finetune as finetune_module
import litebert.model as model_module
from litebert.lab.ablate import finetune_sst2
from litebert.lab.shared_data import shared_data_dir


def mean_pooled_forward(self, input_ids, attention_mask=None, token_type_ids=None):
    """AlbertModel.forward with the pooler's dense + tanh applied to the masked mean of the last layer."""
    if token_type_ids is None:
        token_type_ids = torch.zeros_like(input_ids)
    x = self.embeddings(input_ids, token_type_ids)  # [B, L, E]
    x = self.encoder(x, model_module.attention_mask_for_sdpa(attention_mask))  # [B, L, H]
    real = (attention_mask if attention_mask is not None else torch.ones_like(input_ids)).to(x.dtype)[..., None]
    mean = (x * real).sum(1) / real.sum(1)  # [B, H]
    return model_module.AlbertOutput(sequence_output=x, pooled_output=torch.tanh(self.pooler.dense(mean)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("--variant", default="cls", help="cls (unchanged), mean, freeze, or mean+freeze")
    ap.add_argument("--out", required=True, help="run-dir prefix (one dir per seed)")
    ap.add_argument("--record", required=True, help="JSONL file the scores are appended to")
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--train-examples", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    variant = set(args.variant.split("+"))
    if unknown := variant - {"cls", "mean", "freeze"}:
        raise SystemExit(f"--variant: unknown {', '.join(sorted(unknown))} (cls, mean, freeze)")
    torch.set_num_threads(args.threads)
    if "mean" in variant:
        model_module.AlbertModel.forward = mean_pooled_forward
    if "freeze" in variant:
        build = finetune_module.build_optimizer

        def build_without_word_embeddings(model, *a, **kw):
            for name, p in model.named_parameters():
                if "word_embeddings" in name:  # the optimizer's groups take only parameters that need grad
                    p.requires_grad_(False)
            return build(model, *a, **kw)

        finetune_module.build_optimizer = build_without_word_embeddings
    scores = finetune_sst2(Path(args.checkpoint), Path(args.out), shared_data_dir() / "glue", seeds=args.seeds,
                           lr=args.lr, steps=args.steps, train_examples=args.train_examples, eval_every=100,
                           threads=args.threads)
    result = dict(checkpoint=args.checkpoint, variant=args.variant, lr=args.lr, scores=scores,
                  mean=statistics.mean(scores), std=statistics.pstdev(scores))
    print(json.dumps(result))
    with open(args.record, "a", encoding="utf-8") as f:
        f.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
