"""Does a pretraining recipe learn to read a [MASK]'s neighbours? The whole `pretrain` path on Markov text (issue 43).

The corpus is `litebert.lab.synthetic.write_markov_corpus` (made-up words in a Markov chain, one WordPiece token
each), so the [MASK] accuracy has two clean yardsticks: the commonest word (~8-11%) and the bigram table (~30-36%).
The model is tests/test_pretrain.py's (E 64 -> H 128, 2 layers, all shared, 2 heads), 64-token pairs, batch 64,
one thread; --set overrides PretrainConfig fields (the recipe). One JSON line per run, appended to --out.

    python experiments/markov_text.py --name aw-unit03 --set optimizer=adamw lr=2e-3 warmup_steps=60 \
        projection_init=unit projection_lr_scale=0.03
    python experiments/markov_text.py --name pretrain-defaults          # pretrain's own defaults (LAMB)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

from litebert.config import AlbertConfig
from litebert.data.store_build import build_store
from litebert.lab.synthetic import write_markov_corpus
from litebert.pretrain import PretrainConfig, pretrain
from litebert.tokenizer import WordPieceTokenizer

OUT = Path(__file__).parent / "recipe_records" / "markov_text" / "runs.jsonl"


def parse_value(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--name", required=True)
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--set", nargs="*", default=[], help="PretrainConfig KEY=VALUE (the recipe)")
    p.add_argument("--corpus-seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args(argv)
    recipe = {k: parse_value(v) for k, v in (item.split("=", 1) for item in args.set)}
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        write_markov_corpus(tmp / "corpus.txt", tmp / "vocab.txt", seed=args.corpus_seed)
        WordPieceTokenizer(tmp / "vocab.txt").save_pretrained(tmp / "tokenizer")
        store = build_store([tmp / "corpus.txt"], tmp / "tokenizer", tmp / "store", validation_fraction=0.02)
        AlbertConfig(vocab_size=store.vocab_size, embedding_size=64, hidden_size=128, num_hidden_layers=2,
                     num_attention_heads=2, intermediate_size=512,
                     max_position_embeddings=64).to_json(tmp / "model.json")
        t0 = time.time()
        pretrain(PretrainConfig(**{"model": str(tmp / "model.json"), "data": str(store.path), "out": str(tmp / "run"),
                                   "max_seq_length": 64, "max_predictions_per_seq": 10, "batch_size": 64,
                                   "micro_batch_size": 64, "steps": args.steps, "threads": 1,
                                   "log_every": max(1, args.steps // 4), "eval_every": max(1, args.steps // 4),
                                   "save_every": 10**9, "eval_batches": 8, **recipe}))
        rows = [json.loads(line) for line in (tmp / "run" / "metrics.jsonl").read_text().splitlines()]
    evals = [{k: r[k] for k in ("step", "eval_mlm_acc_mask", "eval_base_mask_commonest", "eval_base_mask_bigram")}
             for r in rows if "eval_mlm_acc_mask" in r]
    spread = [r["health_spread"] for r in rows if "health_spread" in r]
    record = {"name": args.name, "recipe": recipe, "steps": args.steps, "corpus_seed": args.corpus_seed,
              "seconds": round(time.time() - t0), "evals": evals, "health_spread": spread,
              "command": " ".join(["python", "experiments/markov_text.py", *(argv or sys.argv[1:])])}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
    last = evals[-1]
    print(f"{args.name}: at [MASK] {last['eval_mlm_acc_mask']:.1%} (commonest {last['eval_base_mask_commonest']:.1%}, "
          f"bigram {last['eval_base_mask_bigram']:.1%}) after {args.steps} updates, {record['seconds']} s")


if __name__ == "__main__":
    main()
