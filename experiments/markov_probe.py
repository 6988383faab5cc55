"""Can a recipe teach attention to read the neighbouring token? (issue 43)

After 2M tokens of the demo recipe every attention head of albert-tiny is still near uniform (the weight on the
token before is the average weight, 1/L): the model is a bag of words, which is why it stays under a bigram table
at [MASK]. This probe isolates that one skill. Sequences come from a random Markov chain (each token has three
successors, with probabilities 0.6 / 0.25 / 0.15), 15% of the tokens are replaced by [MASK], and the only way to
beat the unigram guess is to look at the neighbours: the best guess from the left neighbour alone is right ~60% of
the time. Each run prints one line (and appends a JSON record with --out): held-out accuracy at [MASK] every
steps/6 updates.

    python experiments/markov_probe.py --impl litebert --optimizer adamw --lr 1e-3 --seed 1
    python experiments/markov_probe.py --impl hf-albert ...   # transformers' AlbertForMaskedLM, same config
    python experiments/markov_probe.py --impl hf-bert ...     # transformers' BertForMaskedLM (no E -> H projection)

--embedding-size H (= hidden) drops ALBERT's E -> H projection; --embedding-projection 1 keeps it at E = H.
--project-in-scale multiplies the projection's initial weights (--project-in-init orthogonal: an isometry); --bias-correction gives LAMB and the official
AdamW Adam's bias correction; --optimizer torch-adamw is torch.optim.AdamW over every parameter (run_mlm's).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

from litebert.config import AlbertConfig
from litebert.model import AlbertForMaskedLM, gather_positions
from litebert.optim import build_optimizer, make_scheduler

MASK = 4  # token ids 0-4 are reserved; the chain uses 5..V-1


def markov_chain(vocab: int, seed: int = 123):
    """(successors [V, 3], their probabilities [3]): a fixed random chain, the same for every run."""
    rng = np.random.default_rng(seed)
    return rng.integers(5, vocab, (vocab, 3)), np.array([0.6, 0.25, 0.15])


def sample(rng, succ, probs, batch: int, length: int) -> np.ndarray:
    x = np.zeros((batch, length), np.int64)
    x[:, 0] = rng.integers(5, len(succ), batch)
    edges = np.cumsum(probs)[:-1]
    for t in range(1, length):
        choice = (rng.random(batch)[:, None] > edges[None, :]).sum(1)  # [B] which successor
        x[:, t] = succ[x[:, t - 1], choice]
    return x


def masked_batch(rng, succ, probs, batch: int, length: int):
    """input [B, L] with 15% of positions 1..L-2 set to [MASK], their positions [B, P] and labels [B, P]."""
    x = sample(rng, succ, probs, batch, length)
    n = max(1, round(0.15 * length))
    pos = np.stack([rng.choice(np.arange(1, length - 1), n, replace=False) for _ in range(batch)])
    labels = np.take_along_axis(x, pos, 1)
    inputs = x.copy()
    np.put_along_axis(inputs, pos, MASK, 1)
    return torch.from_numpy(inputs), torch.from_numpy(pos), torch.from_numpy(labels), x


class HfMaskedLM(torch.nn.Module):
    """transformers' model behind our call: logits at the masked positions [B, P, V]."""

    def __init__(self, impl: str, config: AlbertConfig):
        super().__init__()
        import transformers

        if impl == "hf-bert":  # BERT of the same width and depth: E = H, no projection, no sharing
            hf = transformers.BertConfig(vocab_size=config.vocab_size, hidden_size=config.hidden_size,
                                         num_hidden_layers=config.num_hidden_layers,
                                         num_attention_heads=config.num_attention_heads,
                                         intermediate_size=config.intermediate_size, hidden_dropout_prob=0.0,
                                         attention_probs_dropout_prob=0.0)
            self.model = transformers.BertForMaskedLM(hf)
        else:
            self.model = transformers.AlbertForMaskedLM(
                transformers.AlbertConfig(**config.to_hf_dict("AlbertForMaskedLM")))

    def forward(self, input_ids, masked_positions):
        return gather_positions(self.model(input_ids=input_ids).logits, masked_positions)


def build(args) -> tuple[torch.nn.Module, AlbertConfig]:
    torch.manual_seed(args.seed)
    config = AlbertConfig(vocab_size=args.vocab, embedding_size=args.embedding_size, hidden_size=128,
                          num_hidden_layers=args.layers, num_attention_heads=2, intermediate_size=512,
                          max_position_embeddings=max(64, args.length), initializer_range=args.init,
                          layer_norm_position=args.layer_norm_position,
                          embedding_projection=None if args.embedding_projection < 0 else bool(args.embedding_projection))
    if args.impl != "litebert":
        return HfMaskedLM(args.impl, config), config
    model = AlbertForMaskedLM(config)
    with torch.no_grad():
        project_in = model.albert.encoder.project_in
        if project_in is not None:
            if args.project_in_init == "orthogonal":
                torch.nn.init.orthogonal_(project_in.weight)
            project_in.weight.mul_(args.project_in_scale)
    return model, config


def logits_of(model, inputs, positions):
    if isinstance(model, HfMaskedLM):
        return model(inputs, positions)
    return model(inputs, masked_positions=positions).mlm_logits


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--impl", default="litebert", choices=("litebert", "hf-albert", "hf-bert"))
    p.add_argument("--optimizer", default="lamb", choices=("lamb", "adamw", "adamw_official", "torch-adamw"))
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--bias-correction", action="store_true")
    p.add_argument("--no-decay-lr-scale", type=float, default=1.0)
    p.add_argument("--warmup", type=float, default=0.05, help="warm-up, a fraction of --steps")
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--length", type=int, default=16)
    p.add_argument("--vocab", type=int, default=100)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--embedding-size", type=int, default=64)
    p.add_argument("--embedding-projection", type=int, default=-1, help="1 keeps the projection at E = H")
    p.add_argument("--project-in-scale", type=float, default=1.0)
    p.add_argument("--project-in-init", default="normal", choices=("normal", "orthogonal"),
                   help="orthogonal: the projection starts as an isometry (unit gain) instead of 0.02-std draws")
    p.add_argument("--project-in-lr", type=float, default=1.0,
                   help="with torch-adamw: the projection's lr as a multiple of --lr (0 freezes it)")
    p.add_argument("--layer-norm-position", default="post", choices=("post", "pre"))
    p.add_argument("--init", type=float, default=0.02, help="initializer_range")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="append the JSON record to this file")
    args = p.parse_args(argv)
    torch.set_num_threads(1)

    model, _ = build(args)
    if args.optimizer == "torch-adamw":
        proj = [p_ for n, p_ in model.named_parameters() if "project_in" in n]
        rest = [p_ for n, p_ in model.named_parameters() if "project_in" not in n]
        opt = torch.optim.AdamW([{"params": rest}, {"params": proj, "lr": args.lr * args.project_in_lr}],
                                lr=args.lr, betas=(0.9, 0.98), eps=1e-6, weight_decay=0.01)
    else:
        opt = build_optimizer(model, args.optimizer, lr=args.lr, no_decay_lr_scale=args.no_decay_lr_scale,
                              bias_correction=args.bias_correction)
    sched = make_scheduler(opt, int(args.steps * args.warmup), args.steps)
    succ, probs = markov_chain(args.vocab)
    rng = np.random.default_rng(args.seed)
    ev_inputs, ev_pos, ev_labels, ev_x = masked_batch(np.random.default_rng(10**6), succ, probs, 256, args.length)
    left = np.take_along_axis(ev_x, ev_pos.numpy() - 1, 1)
    left_best = float((succ[left, 0] == ev_labels.numpy()).mean())  # the left neighbour's likeliest successor
    curve, t0 = [], time.time()
    for step in range(1, args.steps + 1):
        inputs, pos, labels, _ = masked_batch(rng, succ, probs, args.batch, args.length)
        loss = F.cross_entropy(logits_of(model, inputs, pos).flatten(0, 1).float(), labels.flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sched.step()
        if step % max(1, args.steps // 6) == 0:
            model.eval()
            with torch.no_grad():
                acc = (logits_of(model, ev_inputs, ev_pos).argmax(-1) == ev_labels).float().mean().item()
            model.train()
            curve.append((step, round(acc, 4)))
    record = {"args": vars(args), "left_neighbour_best": round(left_best, 4), "curve": curve,
              "seconds": round(time.time() - t0, 1),
              "command": "python experiments/markov_probe.py " + " ".join(sys.argv[1:] if argv is None else argv)}
    print(f"{record['command']} | left-neighbour best {left_best:.2f} | "
          + " ".join(f"{s}:{a:.2f}" for s, a in curve), flush=True)
    if args.out:
        with open(args.out, "a") as f:
            f.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
