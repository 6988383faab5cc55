"""Where does the early collapse live? Trains albert-tiny for a few steps and prints, for sub-modules of the
encoder, the norm of the output's mean over tokens (the part every token shares) against the norm of its
per-feature std over tokens (what tells tokens apart), on a fixed held-out batch. A shared module's hook keeps its
last application (layer 4 of 4).

    python experiments/collapse_anatomy.py --store runs/study/demo/store --optimizer lamb --lr 5e-3 --steps 60
"""

from __future__ import annotations

import argparse
import shutil
import tempfile

import torch

MODULES = ("encoder.project_in", "encoder.attention.0.out", "encoder.attention.0.norm", "encoder.ffn.0.down",
           "encoder")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--store", required=True)
    ap.add_argument("--optimizer", default="lamb")
    ap.add_argument("--lr", type=float, default=5e-3)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--every", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--masked-lm-prob", type=float, default=0.15)
    ap.add_argument("--no-decay-lr-scale", type=float, default=1.0)
    args = ap.parse_args()
    torch.set_num_threads(1)
    from litebert.data.store import TokenStore
    from litebert.health import representation_health, store_health_batch
    from litebert.pretrain import PretrainConfig, train_step
    from litebert.pretrain_setup import setup

    out = tempfile.mkdtemp(prefix="anatomy-")
    try:
        cfg = PretrainConfig(model="albert-tiny", data=args.store, out=out, steps=600, warmup_steps=30, lr=args.lr,
                             optimizer=args.optimizer, batch_size=args.batch_size, micro_batch_size=args.batch_size,
                             max_seq_length=64, max_predictions_per_seq=max(10, round(64 * args.masked_lm_prob) + 1),
                             masked_lm_prob=args.masked_lm_prob, no_decay_lr_scale=args.no_decay_lr_scale,
                             threads=1, resume="none")
        run = setup(cfg)
        batch = store_health_batch(TokenStore.open(args.store), 64)
        acts: dict[str, torch.Tensor] = {}
        for name, module in run.raw_model.albert.named_modules():
            if name in MODULES:
                module.register_forward_hook(lambda m, i, o, name=name: acts.__setitem__(name, o.detach()))
        real = batch["attention_mask"].bool()  # [B, L]
        for step in range(args.steps + 1):
            if step % args.every == 0:
                health = representation_health(run.raw_model.albert, batch)  # runs the hooks too
                print(f"step {step}: health_spread {health['health_spread']:.3f}")
                for name in MODULES:
                    x = acts[name][real]  # [tokens, H]
                    print(f"  {name:26s} |mean over tokens| {x.mean(0).norm():6.2f}   "
                          f"|std over tokens| {x.std(0).norm():6.2f}")
            if step < args.steps:
                train_step(run, [run.stream.next(run.step)])
                run.step += 1
    finally:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
