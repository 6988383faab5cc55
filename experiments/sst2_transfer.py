"""Does pretraining help? Pretrain a small ALBERT on the Gutenberg books for a bounded time, then fine-tune on an
SST-2 subset, against the same config from random init. Writes OUT/transfer-nN.md and OUT/summary-nN.json.
Re-running with the same OUT and budget reuses the finished pretraining run (it resumes at its last step), so
other --train-examples sizes cost only the fine-tuning.

    python experiments/sst2_transfer.py --minutes 15 --out runs/transfer

Uses the shared data ($LITEBERT_SHARED_DATA or ../shared/data): gutenberg/ and glue/SST-2/.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import time
from pathlib import Path

import torch

from litebert import AlbertConfig, AlbertForPreTraining
from litebert.shared_data import shared_data_dir

MODEL = dict(embedding_size=128, hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024,
             max_position_embeddings=512)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="runs/transfer")
    ap.add_argument("--minutes", type=float, default=15.0, help="pretraining wall-clock budget")
    ap.add_argument("--steps", type=int, help="pretraining steps (instead of calibrating --minutes)")
    ap.add_argument("--lr", type=float, default=2e-3, help="pretraining learning rate (LAMB)")
    ap.add_argument("--batch-size", type=int, default=64, help="pretraining batch (sequences of 128 tokens)")
    ap.add_argument("--threads", type=int, help="torch threads (default: torch's choice)")
    ap.add_argument("--train-examples", type=int, default=4000)
    ap.add_argument("--finetune-steps", type=int, default=400)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--lrs", default="2e-4,1e-3", help="fine-tuning learning rates, each run for both inits")
    args = ap.parse_args()
    from litebert.data.store import build_store
    from litebert.finetune import FinetuneConfig, finetune
    from litebert.pretrain import PretrainConfig, measure_seconds_per_step, pretrain
    from litebert.tokenizer import load_tokenizer, train_sentencepiece

    if args.threads:
        torch.set_num_threads(args.threads)
    data = shared_data_dir()
    books = sorted((data / "gutenberg").glob("*.txt"))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not (out / "store" / "meta.json").is_file():
        train_sentencepiece(books, out / "tokenizer", vocab_size=8000)
        build_store(books, out / "tokenizer", out / "store", workers=2, validation_fraction=0.02,
                    max_doc_sentences=50, overwrite=True)
    config = AlbertConfig(vocab_size=load_tokenizer(out / "tokenizer").vocab_size, **MODEL)
    config.to_json(out / "model.json")

    # Calibrate steps to the budget on this machine: time a few steps first.
    base = dict(model=str(out / "model.json"), data=str(out / "store"), max_seq_length=128,
                batch_size=args.batch_size, micro_batch_size=args.batch_size, lr=args.lr, log_every=20,
                eval_batches=40, seed=0)
    steps = args.steps
    if not steps:
        shutil.rmtree(out / "probe", ignore_errors=True)  # left by an interrupted run
        per_step = measure_seconds_per_step(PretrainConfig(**base, out=str(out / "probe")))
        steps = max(50, int(args.minutes * 60 / per_step))
    cfg = PretrainConfig(**base, out=str(out / "pretrain"), steps=steps, warmup_steps=steps // 20,
                         eval_every=max(1, steps // 5), save_every=min(steps, 500))  # resumable when cut off
    record = out / "pretrain-record.json"  # what the pretraining cost and scored, kept for re-runs
    if record.is_file() and json.loads(record.read_text())["steps"] == steps:
        saved = json.loads(record.read_text())
        result, pretrain_minutes = saved["eval"], saved["minutes"]
    else:
        t0 = time.perf_counter()
        result = pretrain(cfg)
        pretrain_minutes = (time.perf_counter() - t0) / 60
        record.write_text(json.dumps({"steps": steps, "lr": args.lr, "minutes": pretrain_minutes, "eval": result},
                                     indent=2, default=str))
    pretrained = out / "pretrain" / f"checkpoint-{steps}"

    random_dir = out / "random-init"
    torch.manual_seed(0)
    AlbertForPreTraining(config).save_pretrained(random_dir, tokenizer=load_tokenizer(out / "tokenizer"))

    lrs = [float(x) for x in args.lrs.split(",")]
    scores: dict[tuple[str, float], list[float]] = {}
    for lr in lrs:
        for name, model_dir in (("pretrained", pretrained), ("random-init", random_dir)):
            for seed in range(args.seeds):
                r = finetune(FinetuneConfig(task="sst-2", model=str(model_dir), data=str(data / "glue" / "SST-2"),
                                            out=str(out / f"sst2-n{args.train_examples}-{name}-lr{lr:g}-{seed}"),
                                            seed=seed, lr=lr,
                                            batch_size=32, steps=args.finetune_steps, warmup_ratio=0.1,
                                            max_seq_length=64, max_train_examples=args.train_examples,
                                            eval_every=100))
                scores.setdefault((name, lr), []).append(r["best"]["accuracy"])
    summary = {"pretrain_steps": steps, "pretrain_minutes": pretrain_minutes, "pretrain_eval": result,
               "sst2_dev_accuracy": {f"{n} lr {lr:g}": v for (n, lr), v in scores.items()}, "args": vars(args)}
    (out / f"summary-n{args.train_examples}.json").write_text(json.dumps(summary, indent=2, default=str))
    budget = f"--steps {args.steps}" if args.steps else f"--minutes {args.minutes}"
    budget += f" --batch-size {args.batch_size}" if args.batch_size != 64 else ""
    threads = f" --threads {args.threads}" if args.threads else ""
    lines = ["# Does pretraining help? SST-2 transfer at small scale", "",
             f"Command: `python experiments/sst2_transfer.py {budget} --lr {args.lr:g}{threads} --out {args.out} "
             f"--train-examples {args.train_examples} --finetune-steps {args.finetune_steps} --seeds {args.seeds} "
             f"--lrs {args.lrs}`", "",
             f"Model: {MODEL}, vocab 8000 (SentencePiece trained on the 17 Gutenberg books), all-shared. "
             f"Pretraining: {steps} steps of {args.batch_size} x 128 tokens (MLM + SOP, LAMB, lr {args.lr:g}) in "
             f"{pretrain_minutes:.1f} minutes on this machine; held-out MLM accuracy "
             f"{result.get('eval_mlm_acc', float('nan')):.3f}, "
             f"SOP accuracy {result.get('eval_sop_acc', float('nan')):.3f}.", "",
             f"Fine-tuning: SST-2, first {args.train_examples} training sentences, {args.finetune_steps} steps, "
             "batch 32, "
             "seq 64, each learning rate for both inits; accuracy on the full dev set (872), best of the evaluations "
             "every 100 steps. The majority class is 50.9% of dev.", "",
             "| init | fine-tuning lr | SST-2 dev accuracy per seed | mean ± std |", "|---|---|---|---|"]
    for (name, lr), vals in scores.items():
        lines.append(f"| {name} | {lr:g} | {', '.join(f'{v:.3f}' for v in vals)} | "
                     f"{statistics.mean(vals):.3f} ± {statistics.pstdev(vals):.3f} |")
    (out / f"transfer-n{args.train_examples}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
