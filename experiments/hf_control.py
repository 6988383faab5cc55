"""Does litebert's pretraining learn where transformers' AlbertForPreTraining learns? (issue 43)

The control: litebert's model and transformers' `AlbertForPreTraining` trained side by side, in one process, on
the SAME batches (litebert's PretrainingDataset: SOP pairs, n-gram masks, 80/10/10), with the same optimizer
(litebert's LAMB or AdamW, its parameter groups) and the same schedule; each scored at every evaluation on the same
held-out batches by the same tally (`litebert.mlm_scores`: accuracy at [MASK], kept, random, and the no-model
baselines). If transformers learns where litebert does not, litebert's model has a defect; if both stall together,
it is the recipe (or the data).

    python experiments/hf_control.py --store STORE --steps 600 --batch 16 --seq 64 --lr 1e-2 \
        --model-set num_hidden_layers=2 --out experiments/recipe_records/control/NAME.json

`--impls` picks the sides (litebert, hf; `hf-same-init` starts transformers from litebert's initial weights, so
the two runs differ only by the model code; `hf-bert` is transformers' BertForPreTraining of the same width and
depth: what ALBERT's factorised embedding and sharing cost at this budget). `--torch-adamw` uses torch.optim.AdamW with bias correction for both.
The record (JSON) holds the exact command, every evaluation, and each side's training loss curve; with
`--health-every N`, each side's `health_spread` every N updates (the collapse, as it happens).

    python experiments/hf_control.py plot OUT.png RECORD.json [RECORD.json ...]

draws every side's health_spread of the records against the update (log scale), one line per record and side.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from litebert.config import AlbertConfig
from litebert.convert.hf_map import ours_to_hf
from litebert.data.pretraining import PretrainingDataset, collate_pretraining
from litebert.data.store import TokenStore
from litebert.health import COLLAPSE_SPREAD, DEEP_COLLAPSE_SPREAD, sentence_spread, store_health_batch
from litebert.mlm_scores import MlmTally, piece_table
from litebert.model import AlbertForPreTraining, gather_positions, masked_lm_loss
from litebert.optim import build_optimizer, make_scheduler, param_groups
from litebert.pretrain import PretrainConfig
from litebert.pretrain_eval import eval_protocol


def parse_sets(items: list[str]) -> dict:
    out = {}
    for item in items:
        key, value = item.split("=", 1)
        out[key] = json.loads(value) if value[:1].isdigit() or value in ("true", "false") else value
    return out


def hf_model(config: AlbertConfig, init_from: AlbertForPreTraining | None):
    import transformers

    hf_cfg = transformers.AlbertConfig(**config.to_hf_dict("AlbertForPreTraining"))
    model = transformers.AlbertForPreTraining(hf_cfg)
    if init_from is not None:
        state = ours_to_hf(init_from.state_dict(), config)
        missing, unexpected = model.load_state_dict(state, strict=False)
        assert not unexpected, unexpected
        assert all("decoder" in k for k in missing), missing  # the tied decoder weight only
        model.tie_weights()
    return model


def hf_bert(config: AlbertConfig):
    """transformers' BertForPreTraining of the same width, depth, heads and vocabulary: no factorised embedding
    (E = H), no cross-layer sharing; its NSP head takes the SOP labels (both are a 2-way head on the pooler)."""
    import transformers

    cfg = transformers.BertConfig(vocab_size=config.vocab_size, hidden_size=config.hidden_size,
                                  num_hidden_layers=config.num_hidden_layers,
                                  num_attention_heads=config.num_attention_heads,
                                  intermediate_size=config.intermediate_size, hidden_act="gelu_new",
                                  hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                  max_position_embeddings=config.max_position_embeddings, type_vocab_size=2,
                                  initializer_range=config.initializer_range, layer_norm_eps=config.layer_norm_eps)
    return transformers.BertForPreTraining(cfg)


HF_BRANCH_WEIGHTS = ("attention.value.weight", "attention.dense.weight", "ffn.weight", "ffn_output.weight")


def init_branches(side_name: str, model, scale: float) -> None:
    """The same residual-branch scaling on either side: litebert's `init_branches`, or transformers' parameters of
    the same roles (value, attention output, the two feed-forward matrices)."""
    if side_name == "litebert":
        return model.init_branches(scale)
    if side_name == "hf-bert":
        raise SystemExit("--branch-init-scale: not wired for hf-bert")
    scaled = 0
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(HF_BRANCH_WEIGHTS):
                p *= scale
                scaled += 1
    assert scaled == len(HF_BRANCH_WEIGHTS), scaled  # one shared layer: one of each


def set_mlm_bias(side_name: str, model, bias: torch.Tensor) -> None:
    with torch.no_grad():
        if side_name == "litebert":
            model.mlm.bias.copy_(bias)
        else:
            model.predictions.bias.copy_(bias)
            model.predictions.decoder.bias = model.predictions.bias


class Side:
    """One model under training: its forward returns (mlm logits at the masked positions [B, P, V], sop logits)."""

    def __init__(self, name: str, model, args, steps: int):
        self.name, self.model = name, model
        if args.torch_adamw:
            self.opt = torch.optim.AdamW(param_groups(model, args.wd), lr=args.lr, betas=(0.9, 0.999), eps=1e-6)
        else:
            self.opt = build_optimizer(model, args.optimizer, lr=args.lr, weight_decay=args.wd,
                                       no_decay_lr_scale=args.no_decay_lr_scale,
                                       bias_correction=args.bias_correction)
        self.sched = make_scheduler(self.opt, args.warmup, steps)
        self.losses: list[float] = []
        self.seconds = 0.0

    def forward(self, b):
        if self.name == "litebert":
            out = self.model(b["input_ids"], b["attention_mask"], b["token_type_ids"],
                             masked_positions=b["masked_positions"])
            return out.mlm_logits, out.sop_logits
        out = self.model(input_ids=b["input_ids"], attention_mask=b["attention_mask"],
                         token_type_ids=b["token_type_ids"])
        # transformers scores every position; gather the masked ones (the same targets, the same loss)
        sentence = out.seq_relationship_logits if self.name == "hf-bert" else out.sop_logits
        return gather_positions(out.prediction_logits, b["masked_positions"]), sentence

    def train_step(self, b, clip: float) -> float:
        t0 = time.perf_counter()
        self.model.train()
        mlm_logits, sop_logits = self.forward(b)
        mlm = masked_lm_loss(mlm_logits, b["masked_ids"], b["masked_weights"])
        sop = F.cross_entropy(sop_logits.float(), b["sop_labels"], ignore_index=-100)
        loss = mlm + sop
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), clip)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        self.sched.step()
        self.seconds += time.perf_counter() - t0
        self.losses.append(mlm.item())
        return mlm.item()

    @torch.no_grad()
    def evaluate(self, eval_batches, store) -> dict:
        self.model.eval()
        tally = MlmTally(piece_table(store), store.token_id("mask"))
        for host in eval_batches:
            logits, _ = self.forward(host)
            per_target = F.cross_entropy(logits.flatten(0, -2).float(), host["masked_ids"].flatten(),
                                         reduction="none").view(host["masked_ids"].shape)
            tally.add(host, logits, per_target)
        r = tally.result()
        return {k: r[k] for k in ("eval_mlm_acc_mask", "eval_mlm_loss_mask", "eval_mlm_acc_kept",
                                  "eval_base_mask_bigram", "eval_base_mask_commonest")}

    @torch.no_grad()
    def health_spread(self, batch) -> float:
        """litebert.health's `health_spread` of this side's last layer on `batch`, whatever the model code."""
        self.model.eval()
        ids, mask, types = batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]
        if self.name == "litebert":
            hidden = self.model.albert(ids, mask, types).sequence_output  # [B, L, H]
        else:
            encoder = self.model.bert if self.name == "hf-bert" else self.model.albert
            hidden = encoder(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state
        return sentence_spread(hidden, mask)


class TokenMasking:
    """transformers run_mlm's data, as a check on ours: contiguous windows of the training split's token stream
    ([CLS] window [SEP], no pairs, no SOP), 15% of the tokens chosen independently, 80/10/10."""

    def __init__(self, store, seq: int, prob: float, max_pred: int, seed: int):
        split = store.split("train")
        self.stream = np.asarray(split.tokens(0, int(split.sentence_base[-1])), np.int64)
        self.seq, self.prob, self.max_pred = seq, prob, max_pred
        self.cls, self.sep, self.mask = (store.token_id(n) for n in ("cls", "sep", "mask"))
        self.vocab = store.vocab_size
        self.rng = np.random.default_rng(seed)

    def batch(self, size: int) -> dict[str, torch.Tensor]:
        n = self.seq - 2
        starts = self.rng.integers(0, len(self.stream) - n, size)
        ids = np.stack([np.r_[self.cls, self.stream[s: s + n], self.sep] for s in starts])  # [B, L]
        pos = np.zeros((size, self.max_pred), np.int64)
        tgt, w = np.zeros_like(pos), np.zeros((size, self.max_pred), np.float32)
        for b in range(size):
            chosen = np.flatnonzero(self.rng.random(n) < self.prob)[: self.max_pred] + 1
            pos[b, : len(chosen)], tgt[b, : len(chosen)], w[b, : len(chosen)] = chosen, ids[b, chosen], 1.0
            u = self.rng.random(len(chosen))
            ids[b, chosen[u < 0.8]] = self.mask
            rnd = chosen[u >= 0.9]
            ids[b, rnd] = self.rng.integers(5, self.vocab, len(rnd))
        t = lambda a: torch.from_numpy(a)
        return {"input_ids": t(ids), "token_type_ids": torch.zeros(size, self.seq, dtype=torch.long),
                "attention_mask": torch.ones(size, self.seq, dtype=torch.long), "masked_positions": t(pos),
                "masked_ids": t(tgt), "masked_weights": t(w), "sop_labels": torch.full((size,), -100)}


def plot_health(out: Path, records: list[Path]) -> None:
    """Every side's health_spread (evaluations and --health-every rows) against the update, log scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for path in records:
        rec = json.loads(Path(path).read_text())
        points: dict[str, dict[int, float]] = {}
        for row in rec["evals"]:
            for side, v in row.items():
                if isinstance(v, dict) and "health_spread" in v:
                    points.setdefault(side, {})[row["step"]] = v["health_spread"]
        for row in rec.get("health", []):
            for side, v in row.items():
                if side != "step":
                    points.setdefault(side, {})[row["step"]] = v
        for side, curve in points.items():
            steps = sorted(curve)
            ax.plot(steps, [max(curve[k], 1e-9) for k in steps], marker=".", label=f"{Path(path).stem}: {side}",
                    linestyle="-" if side == "litebert" else "--")
    for level in (COLLAPSE_SPREAD, DEEP_COLLAPSE_SPREAD):
        ax.axhline(level, color="grey", linewidth=0.8)
    ax.set(yscale="log", xlabel="update",
           ylabel=f"health_spread (< {COLLAPSE_SPREAD:g}: a dip; < {DEEP_COLLAPSE_SPREAD:g}: collapsed)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["plot"]:
        if len(argv) < 3:
            raise SystemExit("usage: hf_control.py plot OUT.png RECORD.json [RECORD.json ...]")
        return plot_health(Path(argv[1]), [Path(a) for a in argv[2:]])
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--store", required=True)
    p.add_argument("--preset", default="albert-tiny")
    p.add_argument("--model-set", nargs="*", default=[], help="AlbertConfig overrides KEY=VALUE")
    p.add_argument("--impls", default="litebert,hf")
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--masked-lm-prob", type=float, default=0.15)
    p.add_argument("--max-predictions", type=int, default=None)
    p.add_argument("--optimizer", default="lamb")
    p.add_argument("--torch-adamw", action="store_true")
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--wd", type=float, default=0.01)
    p.add_argument("--no-decay-lr-scale", type=float, default=1.0)
    p.add_argument("--unigram-bias", action="store_true", help="start the MLM bias at the log unigram prior")
    p.add_argument("--branch-init-scale", type=float, default=1.0,
                   help="multiply both sides' residual-branch weights at init (1: the official draw)")
    p.add_argument("--bias-correction", action="store_true", help="LAMB with Adam's bias correction")
    p.add_argument("--warmup", type=int, default=None, help="warm-up steps (default 5%% of --steps)")
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--evals", type=int, default=6)
    p.add_argument("--stop-at", type=int, default=None,
                   help="train only the first N updates of the --steps schedule (a collapse shows early)")
    p.add_argument("--health-every", type=int, default=0,
                   help="every N updates, each side's health_spread on one fixed held-out batch (0: at evals only)")
    p.add_argument("--eval-batches", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default=None)
    p.add_argument("--data", default="litebert", choices=("litebert", "tokens"),
                   help="litebert's pairs and n-gram masks, or run_mlm-style token masking of plain windows")
    args = p.parse_args(argv)
    args.warmup = args.warmup if args.warmup is not None else max(1, args.steps // 20)
    torch.set_num_threads(args.threads)
    store = TokenStore.open(args.store)
    config = AlbertConfig.from_preset(args.preset, vocab_size=store.vocab_size, **parse_sets(args.model_set))
    max_pred = args.max_predictions or max(1, math.ceil(args.masked_lm_prob * args.seq))
    train = PretrainingDataset(store, "train", max_seq_length=args.seq, masked_lm_prob=args.masked_lm_prob,
                               max_predictions_per_seq=max_pred, seed=args.seed)
    ev = eval_protocol(PretrainConfig(max_seq_length=args.seq, max_predictions_per_seq=max_pred))
    valid = PretrainingDataset(store, "validation", max_seq_length=args.seq, masked_lm_prob=ev.masked_lm_prob,
                               max_predictions_per_seq=ev.max_predictions_per_seq, seed=0, single_sentence="split")
    pad = store.token_id("pad")
    n_eval = min(len(valid), args.eval_batches * 32)
    eval_batches = [collate_pretraining(valid.examples(np.arange(s, min(n_eval, s + 32)), epoch=0), pad_to=args.seq,
                                        pad_id=pad) for s in range(0, n_eval, 32)]

    sides = []
    torch.manual_seed(args.seed)
    ours = AlbertForPreTraining(config)
    for impl in args.impls.split(","):
        if impl == "litebert":
            sides.append(Side("litebert", ours, args, args.steps))
        elif impl in ("hf", "hf-same-init"):
            torch.manual_seed(args.seed + 1)
            sides.append(Side(impl, hf_model(config, ours if impl == "hf-same-init" else None), args, args.steps))
        elif impl == "hf-bert":
            torch.manual_seed(args.seed + 2)
            sides.append(Side(impl, hf_bert(config), args, args.steps))
        else:
            raise SystemExit(f"--impls: unknown side {impl!r}")
    if args.unigram_bias:
        prior = torch.from_numpy(piece_table(store).log_prior()).float()
        for s in sides:
            set_mlm_bias(s.name, s.model, prior)
    for s in sides:
        init_branches(s.name, s.model, args.branch_init_scale)
    if any(s.name == "litebert" for s in sides) and any(s.name == "hf-same-init" for s in sides):
        raise SystemExit("litebert and hf-same-init share litebert's initial weights object; run them apart")

    rng = np.random.default_rng(args.seed)
    simple = TokenMasking(store, args.seq, args.masked_lm_prob, max_pred, args.seed) if args.data == "tokens" else None
    epoch, order, cursor = 0, rng.permutation(len(train)), 0
    record = {"command": " ".join(["python", "experiments/hf_control.py", *argv]),
              "config": {k: getattr(config, k) for k in ("embedding_size", "hidden_size", "num_hidden_layers",
                                                         "intermediate_size", "num_attention_heads", "vocab_size",
                                                         "layer_norm_position")},
              "evals": []}
    last = min(args.steps, args.stop_at or args.steps)
    eval_at = set(np.linspace(0, last, args.evals + 1).round().astype(int).tolist())
    health_batch = store_health_batch(store, args.seq)
    record["health"] = []
    tokens = 0
    for step in range(last + 1):
        if step in eval_at:
            row = {"step": step, "tokens": tokens}
            for s in sides:
                row[s.name] = s.evaluate(eval_batches, store)
                row[s.name]["health_spread"] = s.health_spread(health_batch)
                row[s.name]["train_seconds"] = round(s.seconds, 1)
            record["evals"].append(row)
            print(json.dumps(row), flush=True)
        elif args.health_every and step % args.health_every == 0:
            row = {"step": step, **{s.name: s.health_spread(health_batch) for s in sides}}
            record["health"].append(row)
            print(json.dumps({"health_spread": row}), flush=True)
        if step == last:
            break
        if args.data == "tokens":
            batch = simple.batch(args.batch)
            tokens += int(batch["attention_mask"].sum())
            for s in sides:
                s.train_step(batch, args.clip)
            continue
        if cursor + args.batch > len(order):
            epoch, cursor = epoch + 1, 0
            train.set_epoch(epoch)
            order = rng.permutation(len(train))
        batch = collate_pretraining(train.examples(order[cursor: cursor + args.batch], epoch=epoch), pad_to=None,
                                    pad_id=pad)
        cursor += args.batch
        batch.pop("masked_kinds")
        tokens += int(batch["attention_mask"].sum())
        for s in sides:
            s.train_step(batch, args.clip)
    record["train_mlm_loss"] = {s.name: s.losses for s in sides}
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(record))


if __name__ == "__main__":
    main()
