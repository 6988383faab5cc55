"""Does pretraining help? Pretrain a small ALBERT on the Gutenberg books for a bounded time, then fine-tune on an
SST-2 subset, against the same config from random init. Writes OUT/transfer-nN.md and OUT/summary-nN.json.
Re-running with the same OUT and budget reuses the finished pretraining run (it resumes at its last step), so
other --train-examples sizes cost only the fine-tuning. --pretrained CHECKPOINT skips the pretraining here and
compares a checkpoint made elsewhere (say, by `torchrun --nproc_per_node 2 -m litebert pretrain`) with its own
config from random init.

    python experiments/sst2_transfer.py --minutes 15 --out runs/transfer
    python experiments/sst2_transfer.py --pretrained runs/transfer3/pretrain/checkpoint-7500 --out runs/transfer3

Uses the shared data ($LITEBERT_SHARED_DATA or ../shared/data): gutenberg/ and glue/SST-2/.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from litebert import AlbertConfig, AlbertForPreTraining
from litebert.checkpoint import validate_checkpoint
from litebert.errors import CheckpointError
from litebert.lab.shared_data import shared_data_dir
from litebert.tokenizer import load_tokenizer

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
    ap.add_argument("--pretrained", help="a finished pretraining checkpoint to compare (no pretraining here)")
    ap.add_argument("--name", default="pretrained",
                    help="the pretrained model's name in run dirs and tables, so several share one OUT (and its "
                         "random init)")
    ap.add_argument("--inits", help="fine-tune only these of NAME,random-init (default: both)")
    ap.add_argument("--train-examples", type=int, default=4000)
    ap.add_argument("--finetune-steps", type=int, default=400)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--lrs", default="2e-4,1e-3", help="fine-tuning learning rates, each run for both inits")
    args = ap.parse_args()
    from litebert.lab.ablate import finetune_sst2, run_lock
    from litebert.params import count_parameters

    if args.threads:
        torch.set_num_threads(args.threads)
    data = shared_data_dir()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.pretrained:
        pretrained = Path(args.pretrained)
        steps, result, pretrain_minutes = checkpoint_record(pretrained)
        config = AlbertConfig.from_json(pretrained / "config.json")
    else:
        pretrained, steps, result, pretrain_minutes = pretrain_here(args, data, out)
        config = AlbertConfig.from_json(out / "model.json")

    random_dir = out / "random-init"
    with run_lock(random_dir):  # two of these scripts (say, two subset sizes) may share OUT
        if not all((random_dir / f).is_file() for f in ("config.json", "model.safetensors")):
            torch.manual_seed(0)
            AlbertForPreTraining(config).save_pretrained(random_dir, tokenizer=load_tokenizer(pretrained))

    lrs = [float(x) for x in args.lrs.split(",")]
    inits = {args.name: pretrained, "random-init": random_dir}
    wanted = args.inits.split(",") if args.inits else list(inits)
    if unknown := set(wanted) - set(inits):
        raise SystemExit(f"--inits: {', '.join(sorted(unknown))} not among {', '.join(inits)}")
    scores: dict[tuple[str, float], list[float]] = {}
    for lr in lrs:
        for name, model_dir in ((n, inits[n]) for n in wanted):
            scores[name, lr] = finetune_sst2(model_dir, out / f"sst2-n{args.train_examples}-{name}-lr{lr:g}",
                                             data / "glue", seeds=args.seeds, lr=lr, steps=args.finetune_steps,
                                             train_examples=args.train_examples, eval_every=100)
    tag = f"{'-'.join(wanted)}-n{args.train_examples}"  # runs for other inits or sizes keep their own files
    earlier = out / f"summary-{tag}.json"
    if earlier.is_file():  # a call with other --lrs for the same checkpoint and budget adds its rows to the table
        saved = json.loads(earlier.read_text())
        same = {k: saved["args"].get(k) for k in ("pretrained", "finetune_steps", "seeds")} == {
            "pretrained": args.pretrained, "finetune_steps": args.finetune_steps, "seeds": args.seeds}
        for key, vals in (saved["sst2_dev_accuracy"].items() if same else ()):
            name, lr = key.rsplit(" lr ", 1)
            scores.setdefault((name, float(lr)), vals)
        scores = dict(sorted(scores.items(), key=lambda kv: (kv[0][1], kv[0][0])))  # by lr, as the loop runs
    summary = {"pretrain_steps": steps, "pretrain_minutes": pretrain_minutes, "pretrain_eval": result,
               "sst2_dev_accuracy": {f"{n} lr {lr:g}": v for (n, lr), v in scores.items()}, "args": vars(args)}
    earlier.write_text(json.dumps(summary, indent=2, default=str))
    how = (f"the checkpoint {pretrained} (its run's log: {steps} steps in {pretrain_minutes:.1f} minutes)"
           if args.pretrained else f"{steps} steps of {args.batch_size} x 128 tokens (MLM + SOP, LAMB, lr {args.lr:g}) "
                                   f"in {pretrain_minutes:.1f} minutes on this machine")
    lines = ["# Does pretraining help? SST-2 transfer at small scale", "",
             f"Command: `python experiments/sst2_transfer.py {' '.join(sys.argv[1:])}`", "",
             f"Model: E={config.embedding_size}, H={config.hidden_size}, {config.num_hidden_layers} layers, "
             f"{config.num_attention_heads} heads, FFN {config.intermediate_size}, sharing {config.sharing}, "
             f"vocab {config.vocab_size}, {count_parameters(config):,} parameters. Pretrained: {how}; held-out MLM "
             f"accuracy {result.get('eval_mlm_acc', float('nan')):.3f}, "
             f"SOP accuracy {result.get('eval_sop_acc', float('nan')):.3f}.", "",
             f"Fine-tuning: SST-2, first {args.train_examples} training sentences, {args.finetune_steps} steps, "
             "batch 32, "
             "seq 64, each learning rate for both inits; accuracy on the full dev set (872), best of the evaluations "
             "every 100 steps. The majority class is 50.9% of dev.", "",
             "| init | fine-tuning lr | SST-2 dev accuracy per seed | mean ± std |", "|---|---|---|---|"]
    for (name, lr), vals in scores.items():
        lines.append(f"| {name} | {lr:g} | {', '.join(f'{v:.3f}' for v in vals)} | "
                     f"{statistics.mean(vals):.3f} ± {statistics.pstdev(vals):.3f} |")
    (out / f"transfer-{tag}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def pretrain_here(args, data: Path, out: Path) -> tuple[Path, int, dict, float]:
    """Pretrain the MODEL config on the Gutenberg books in OUT (tokenizer and store built once); reuse a finished
    run of the same step count. Returns the final checkpoint, its steps, held-out scores and minutes."""
    from litebert.data.store_build import build_store
    from litebert.pretrain import PretrainConfig, measure_seconds_per_step, pretrain
    from litebert.tokenizer_train import train_sentencepiece

    books = sorted((data / "gutenberg").glob("*.txt"))
    if not (out / "store" / "meta.json").is_file():
        train_sentencepiece(books, out / "tokenizer", vocab_size=8000)
        build_store(books, out / "tokenizer", out / "store", workers=2, validation_fraction=0.02,
                    max_doc_sentences=50, overwrite=True)
    AlbertConfig(vocab_size=load_tokenizer(out / "tokenizer").vocab_size, **MODEL).to_json(out / "model.json")
    base = dict(model=str(out / "model.json"), data=str(out / "store"), max_seq_length=128,
                batch_size=args.batch_size, micro_batch_size=args.batch_size, lr=args.lr, log_every=20,
                eval_batches=40, seed=0)
    steps = args.steps or max(50, int(args.minutes * 60 / measure_seconds_per_step(PretrainConfig(**base))))
    cfg = PretrainConfig(**base, out=str(out / "pretrain"), steps=steps, warmup_steps=steps // 20,
                         eval_every=max(1, steps // 5), save_every=min(steps, 500))  # resumable when cut off
    record = out / "pretrain-record.json"  # what the pretraining cost and scored, kept for re-runs
    if record.is_file() and json.loads(record.read_text())["steps"] == steps:
        saved = json.loads(record.read_text())
        return out / "pretrain" / f"checkpoint-{steps}", steps, saved["eval"], saved["minutes"]
    t0 = time.perf_counter()
    result = pretrain(cfg)
    minutes = (time.perf_counter() - t0) / 60
    record.write_text(json.dumps({"steps": steps, "lr": args.lr, "minutes": minutes, "eval": result},
                                 indent=2, default=str))
    return out / "pretrain" / f"checkpoint-{steps}", steps, result, minutes


def checkpoint_record(checkpoint: Path) -> tuple[int, dict, float]:
    """Steps, last held-out scores and wall-clock minutes of the run that wrote `checkpoint`, from its
    metrics.jsonl (the run directory is the checkpoint's parent)."""
    if not (checkpoint / "config.json").is_file():
        raise SystemExit(f"{checkpoint}: not a checkpoint directory (no config.json)")
    try:
        steps = validate_checkpoint(checkpoint)["step"]  # the COMMIT manifest of a pretraining checkpoint
    except CheckpointError:
        steps = 0  # a converted or downloaded model: not a pretraining checkpoint
    log = checkpoint.parent / "metrics.jsonl"  # absent for a converted or downloaded model: no pretraining figures
    records = [json.loads(line) for line in log.read_text().splitlines()] if log.is_file() else []
    records = [r for r in records if r.get("step", 0) <= steps]
    evals = [r for r in records if "eval_mlm_acc" in r]
    stamps = [r["time"] for r in records if "time" in r]
    return steps, (evals[-1] if evals else {}), (stamps[-1] - stamps[0]) / 60 if stamps else float("nan")


if __name__ == "__main__":
    main()
