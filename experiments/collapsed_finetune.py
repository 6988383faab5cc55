"""Can fine-tuning leave a collapsed pretraining checkpoint, and does re-initialising the pooler help?

Makes a collapsed checkpoint the way users got one (albert-tiny, the old demo recipe: LAMB 5e-3, batch 64 x 64,
stopped after --collapse-steps steps, inside the unigram plateau), and the same config from random init. Then
fine-tunes each on an easy 3-way keyword task made from the demo corpus (which of "file", "list", "string" does
the sentence contain; sentences with exactly one of them), with and without --reinit-pooler, and prints the dev
accuracy and the health of the model at start and at the end.

    python experiments/collapsed_finetune.py --demo-dir runs/study/demo --out runs/collapsed
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import re
import statistics
from pathlib import Path

import torch

KEYWORDS = ("file", "list", "string")


def keyword_task(corpus: Path, out: Path, train: int, dev: int) -> Path:
    rows = []
    for line in corpus.read_text(encoding="utf-8").splitlines():
        words = set(re.findall(r"[a-z]+", line.lower()))
        hits = [k for k in KEYWORDS if k in words]
        if len(hits) == 1 and 5 <= len(line.split()) <= 40:
            rows.append((line, hits[0]))
    random.Random(0).shuffle(rows)
    out.mkdir(parents=True, exist_ok=True)
    for name, part in (("train", rows[:train]), ("dev", rows[train:train + dev])):
        with (out / f"{name}.csv").open("w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["text", "label"])
            w.writerows(part)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--demo-dir", type=Path, required=True, help="holds corpus.txt and store/")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--collapse-steps", type=int, default=60)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--lrs", default="1e-4,1e-3")
    ap.add_argument("--seeds", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(1)
    from litebert import AlbertConfig, AlbertForPreTraining
    from litebert.finetune import FinetuneConfig, finetune
    from litebert.health import representation_health, texts_health_batch
    from litebert.model import AlbertForSequenceClassification
    from litebert.pretrain import PretrainConfig, pretrain
    from litebert.tokenizer import load_tokenizer

    store = args.demo_dir / "store"
    ckpt = args.out / "pretrain" / f"checkpoint-{args.collapse_steps}"
    if not ckpt.is_dir():
        pretrain(PretrainConfig(model="albert-tiny", data=str(store), out=str(args.out / "pretrain"),
                                steps=args.collapse_steps, batch_size=64, micro_batch_size=64, max_seq_length=64,
                                max_predictions_per_seq=10, lr=5e-3, warmup_steps=args.collapse_steps // 10,
                                threads=1, save_every=args.collapse_steps, resume="none",
                                log_every=args.collapse_steps))
    random_dir = args.out / "random-init"
    torch.manual_seed(0)
    AlbertForPreTraining(AlbertConfig.from_json(ckpt / "config.json")).save_pretrained(
        random_dir, tokenizer=load_tokenizer(ckpt))
    data = keyword_task(args.demo_dir / "corpus.txt", args.out / "keywords", 600, 300)
    dev_texts = [r["text"] for r in csv.DictReader((data / "dev.csv").open(encoding="utf-8"))][:16]
    batch = texts_health_batch(ckpt, dev_texts, 64)
    results = {}
    for lr in (float(x) for x in args.lrs.split(",")):
        for name, model, reinit in (("collapsed", ckpt, False), ("collapsed + reinit pooler", ckpt, True),
                                    ("random init", random_dir, False)):
            scores, ends = [], []
            for seed in range(args.seeds):
                out = args.out / f"ft-{name.replace(' ', '_').replace('+', '')}-lr{lr:g}-seed{seed}"
                r = finetune(FinetuneConfig(task="custom", model=str(model), data=str(data), out=str(out),
                                            format="csv", text_columns="text", label_column="label",
                                            steps=args.steps, batch_size=32, max_seq_length=64, lr=lr, seed=seed,
                                            eval_every=args.steps // 3, threads=1, reinit_pooler=reinit,
                                            overwrite=True))
                scores.append(r["best"]["accuracy"])
                end = AlbertForSequenceClassification.from_pretrained(out / "best")
                ends.append(representation_health(end.albert, batch)["health_spread"])
            start = r["start_health"]["health_spread"]
            results[f"{name} lr {lr:g}"] = {"accuracy": scores, "spread_start": start, "spread_end": ends}
            print(f"| {name} | {lr:g} | {start:.4f} | {', '.join(f'{s:.3f}' for s in ends)} | "
                  f"{', '.join(f'{s:.3f}' for s in scores)} | {statistics.mean(scores):.3f} |", flush=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
