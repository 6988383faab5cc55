"""Does the early plateau come from ALBERT itself? Train a tiny ALBERT on a copy task with our model or
transformers' and print the masked-token loss and accuracy every 100 steps.

Each sequence is [CLS] x [SEP] x [SEP] with x 20 random tokens; 3 tokens of the second copy are masked. Solving it
takes attention from each masked position to the same offset in the first copy, and nothing else; a model that
has not found that sits at the uniform loss, ln(vocab). Dropout is off in both models; the optimizer, schedule and
batches are the same.

    python experiments/copy_task_plateau.py --impl ours --lr 1e-3
    python experiments/copy_task_plateau.py --impl hf --lr 1e-3
"""

from __future__ import annotations

import argparse

import torch

from litebert.config import AlbertConfig
from litebert.optim import build_optimizer, make_scheduler

CLS, SEP, MASK = 2, 3, 4


def copy_batch(batch: int, length: int, vocab: int, masked: int):
    """[B, 2N+3] ids with `masked` positions of the second copy replaced by [MASK]; those positions [B, masked]
    and their true ids [B, masked]; segment ids 0 for [CLS] x [SEP], 1 for the rest."""
    x = torch.randint(5, vocab, (batch, length))
    ids = torch.cat([torch.full((batch, 1), CLS), x, torch.full((batch, 1), SEP), x, torch.full((batch, 1), SEP)], 1)
    positions = torch.stack([torch.randperm(length)[:masked] for _ in range(batch)]) + length + 2
    targets = ids.gather(1, positions)
    types = torch.cat([torch.zeros(batch, length + 2), torch.ones(batch, length + 1)], 1).long()
    return ids.scatter(1, positions, MASK), positions, targets, types


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--impl", choices=["ours", "hf"], required=True)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--optimizer", default="adamw")
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    vocab, length, batch = 500, 20, 32
    config = AlbertConfig(vocab_size=vocab, embedding_size=64, hidden_size=128, num_hidden_layers=2,
                          num_attention_heads=2, intermediate_size=512, max_position_embeddings=64)
    if args.impl == "ours":
        from litebert.model import AlbertForPreTraining
        model = AlbertForPreTraining(config)
    else:
        import transformers
        model = transformers.AlbertForMaskedLM(transformers.AlbertConfig(**config.to_hf_dict()))
    opt = build_optimizer(model, args.optimizer, lr=args.lr)
    sched = make_scheduler(opt, args.steps // 10, args.steps)
    for step in range(1, args.steps + 1):
        ids, positions, targets, types = copy_batch(batch, length, vocab, masked=3)
        if args.impl == "ours":
            logits = model(ids, torch.ones_like(ids), types, masked_positions=positions).mlm_logits  # [B, 3, V]
        else:
            logits = model(input_ids=ids, attention_mask=torch.ones_like(ids), token_type_ids=types).logits
            logits = logits.gather(1, positions[..., None].expand(-1, -1, vocab))  # [B, L, V] -> [B, 3, V]
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1))
        loss.backward()
        opt.step()
        sched.step()
        opt.zero_grad()
        if step % 100 == 0:
            accuracy = (logits.argmax(-1) == targets).float().mean().item()
            print(f"step {step}: loss {loss.item():.3f}, accuracy {accuracy:.3f}", flush=True)


if __name__ == "__main__":
    main()
