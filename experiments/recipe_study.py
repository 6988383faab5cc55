"""Recipe study: how soon does a pretraining recipe leave the MLM plateau, and where is it after a token budget?

One run per call. Its record, OUT/NAME.json, is rewritten after every evaluation, so a run that is cut off keeps
its curve. Budgets are in tokens (the machine is shared: wall clock depends on its load); each record also
keeps the training seconds and tokens/s it saw.

    python experiments/recipe_study.py --store runs/study/demo/store --out experiments/recipe_records/demo \\
        --name adamw-lr2e-3 --tokens 3e6 --set optimizer=adamw lr=2e-3 batch_size=32 micro_batch_size=32

--set KEY=VALUE sets PretrainConfig fields (lr, optimizer, batch_size, max_seq_length, phases, masked_lm_prob,
warmup_steps, ...); --model-set KEY=VALUE sets AlbertConfig fields on top of --model (initializer_range,
hidden_size, num_hidden_layers, ...). Values are read as JSON when they parse, as strings otherwise.

Evaluation is one fixed protocol for every recipe, so recipes that train with other masking rates or lengths
are comparable: held-out (validation split) pairs of --eval-seq-len tokens, 15% n-gram whole-word masking
(ALBERT's), the first --eval-batches x 32 examples of epoch 0. Every point holds the official headline
(eval_mlm_acc, every target) and the accuracy at [MASK], kept and random-replaced targets (eval_mlm_acc_mask, ...);
the record's "baseline" holds the model-free baselines on the same targets (litebert.mlm_scores: commonest piece,
copy, copy-else-commonest, bigram, copy-else-bigram), and each point the representation health (litebert.health)
on a fixed held-out batch. Compare recipes on eval_mlm_acc_mask at equal tokens.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import torch


def parse_sets(items: list[str]) -> dict:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--set/--model-set {item!r}: expected KEY=VALUE")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


@torch.no_grad()
def scale_init(model, scales: dict) -> dict:
    """Multiply initial weights: "qk" = the query and key rows of each fused qkv projection ([3H, H], rows 0:2H),
    "v" = its value rows (2H:3H), any other key = every parameter whose name contains it. Returns {parameter name:
    factor} as applied ("NAME[v]" for the value rows)."""
    applied = {}
    for key, factor in scales.items():
        for name, p in model.named_parameters():
            if key == "qk" and name.endswith("qkv.weight"):
                p[: 2 * p.shape[1]] *= factor
            elif key == "v" and name.endswith("qkv.weight"):
                p[2 * p.shape[1]:] *= factor
                name += "[v]"
            elif key != "qk" and key in name:
                p *= factor
            else:
                continue
            applied[name] = factor
        if not any(v == factor for v in applied.values()):
            raise SystemExit(f"--init-scale {key}: no parameter matched")
    return applied


@torch.no_grad()
def sinusoid_positions(model, scale: float) -> None:
    """Position embeddings [P, E] := sin/cos of position x 10000^(-2i/E) (even/odd columns), rescaled to
    `scale` x initializer_range standard deviation: every offset k is then one linear map of the table, the same
    at every position, so attention to "the word before" is one thing to learn rather than P separate ones."""
    table = model.albert.embeddings.position_embeddings.weight  # [P, E]
    P, E = table.shape
    pos = torch.arange(P, dtype=torch.float64)[:, None]
    freq = torch.pow(10000.0, -torch.arange(0, E, 2, dtype=torch.float64) / E)[None, :]
    sin = torch.zeros(P, E, dtype=torch.float64)
    sin[:, 0::2], sin[:, 1::2] = torch.sin(pos * freq), torch.cos(pos * freq)
    table.copy_((sin / sin.std() * scale * model.config.initializer_range).to(table.dtype))


def write_atomic(path: Path, obj: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(obj, indent=1) + "\n")
    os.replace(tmp, path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", required=True)
    ap.add_argument("--out", required=True, help="folder of the JSON records")
    ap.add_argument("--name", required=True)
    ap.add_argument("--model", default="albert-tiny")
    ap.add_argument("--tokens", type=float, required=True, help="training budget in tokens (padding included)")
    ap.add_argument("--evals", type=int, default=12, help="evaluations over the budget (plus one at step 0)")
    ap.add_argument("--eval-seq-len", type=int, default=64)
    ap.add_argument("--eval-batches", type=int, default=20)
    ap.add_argument("--set", nargs="*", default=[], dest="sets")
    ap.add_argument("--model-set", nargs="*", default=[], dest="model_sets")
    ap.add_argument("--init-scale", nargs="*", default=[], dest="init_scales",
                    help="KEY=FACTOR: multiply initial weights by FACTOR before training; KEY is qk (the query and "
                         "key rows of the fused qkv projection), v (its value rows) or a substring of parameter names (position_emb)")
    ap.add_argument("--sinusoid-positions", type=float, metavar="SCALE",
                    help="initialise the position embeddings with sinusoids (Vaswani et al.) of SCALE times the "
                         "initializer's standard deviation instead of random draws")
    ap.add_argument("--distance-bias", metavar="SLOPES",
                    help="comma-separated slope per head: the model config's distance_bias (head h adds -slope_h x "
                         "|i - j| to its attention scores); short for --model-set distance_bias=[...]")
    ap.add_argument("--distance-bias-fade", type=float, metavar="FRACTION",
                    help="with a distance bias: lower it linearly to 0 over this fraction of the steps (a scaffold: "
                         "the model is ALBERT's own from then on, evaluations included)")
    ap.add_argument("--fill-mask", action="store_true", help="save the final model and record the demo's fill-mask")
    ap.add_argument("--keep-model", metavar="DIR", help="with --fill-mask: keep the final model in DIR/NAME")
    args = ap.parse_args()
    torch.set_num_threads(1)

    from litebert.config import PRESETS, AlbertConfig
    from litebert.data.store import TokenStore
    from litebert.health import representation_health, store_health_batch
    from litebert.pretrain import PretrainConfig, train_step
    from litebert.pretrain_eval import evaluate_checkpoint
    from litebert.pretrain_setup import setup

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    record_path = out / f"{args.name}.json"
    work = out / "_work" / args.name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    sets, model_sets = parse_sets(args.sets), parse_sets(args.model_sets)
    if args.distance_bias:
        model_sets["distance_bias"] = [float(x) for x in args.distance_bias.split(",")]
    model = args.model
    if model_sets:
        base = AlbertConfig.from_preset(model) if model in PRESETS else AlbertConfig.from_json(model)
        model = str(work / "model.json")
        base.replace(**model_sets).to_json(model)
    base_cfg = dict(max_seq_length=64, max_predictions_per_seq=10, batch_size=64, micro_batch_size=64)
    base_cfg.update(sets)
    probe = PretrainConfig(**base_cfg)
    mean_len = sum(f * n for f, n in probe.length_phases)
    steps = max(10, round(args.tokens / (probe.batch_size * mean_len)))
    cfg = PretrainConfig(**{**base_cfg, "model": model, "data": args.store, "out": str(work / "run"),
                            "steps": steps, "threads": 1, "resume": "none", "save_every": 10**9,
                            "log_every": 10**9, "seed": base_cfg.get("seed", 0)})
    store = TokenStore.open(args.store)
    eval_len = args.eval_seq_len
    eval_cfg = PretrainConfig(max_seq_length=eval_len, max_predictions_per_seq=max(1, round(eval_len * 0.15) + 1),
                              masked_lm_prob=0.15, ngram=3)
    health_batch = store_health_batch(store, eval_len)

    run = setup(cfg)
    slopes = run.raw_model.albert.encoder.distance_slopes  # [heads, 1, 1], or None: no bias
    if args.distance_bias_fade and slopes is None:
        raise SystemExit("--distance-bias-fade: the model has no distance bias (--distance-bias SLOPES)")
    full_slopes = slopes.clone() if slopes is not None else None
    scaled = scale_init(run.raw_model, parse_sets(args.init_scales))
    if args.sinusoid_positions:
        sinusoid_positions(run.raw_model, args.sinusoid_positions)
    eval_at = sorted({round(steps * (i + 1) / args.evals) for i in range(args.evals)})
    record = {"name": args.name, "store": args.store, "model": args.model, "model_set": model_sets, "set": sets,
              "steps": steps, "tokens_per_step": probe.batch_size * mean_len, "budget_tokens": args.tokens,
              "parameters": run.raw_model.num_parameters(exclude_heads=True), "baseline": {},
              "init_scale": parse_sets(args.init_scales), "init_scaled": scaled,
              "sinusoid_positions": args.sinusoid_positions, "distance_bias": args.distance_bias,
              "distance_bias_fade": args.distance_bias_fade,
              "eval": {"seq_len": eval_len, "examples": args.eval_batches * 32, "masked_lm_prob": 0.15, "ngram": 3},
              "command": "python experiments/recipe_study.py " + " ".join(sys.argv[1:]),
              "load_at_start": os.getloadavg()[0], "curve": [], "done": False}

    def fade() -> float:
        return max(0.0, 1.0 - run.step / (args.distance_bias_fade * steps))

    def evaluate(train_s: float, tokens: float, window: list[dict]) -> None:
        r = evaluate_checkpoint(run.raw_model, store, "sop", eval_len, batches=args.eval_batches, batch_size=32,
                                seed=0, cfg=eval_cfg)
        point = {"step": run.step, "tokens": tokens, "train_s": round(train_s, 2),
                 **{k: v for k, v in r.items() if k.startswith("eval_mlm") or k == "eval_sop_acc"},
                 **representation_health(run.raw_model.albert, health_batch), "load": os.getloadavg()[0],
                 **({"distance_bias_factor": float(fade())} if args.distance_bias_fade else {})}
        # model-free: the same at every point
        record["baseline"] = {k: v for k, v in r.items() if k.startswith(("eval_base_", "eval_targets_"))}
        if window:
            point["train_mlm_loss"] = float(np.mean([w["mlm_loss"] for w in window]))
            point["lr"] = window[-1]["lr"]
        record["curve"].append(point)
        record["tokens_per_s"] = tokens / train_s if train_s else None
        write_atomic(record_path, record)
        print(f"[{args.name}] step {run.step}/{steps} {tokens / 1e6:.2f}M tok {train_s:.0f}s "
              f"[MASK] {point['eval_mlm_acc_mask']:.4f} headline {point['eval_mlm_acc']:.4f} "
              f"loss {point['eval_mlm_loss']:.3f} "
              f"spread {point['health_spread']:.3f}", file=sys.stderr, flush=True)

    train_s, tokens, window = 0.0, 0.0, []
    evaluate(0.0, 0.0, [])
    while run.step < steps:
        t0 = time.perf_counter()
        batches = [run.stream.next(run.step) for _ in range(run.accum)]
        stats = train_step(run, batches)
        train_s += time.perf_counter() - t0
        run.step += 1
        tokens += stats["tokens"]
        window.append(stats)
        if args.distance_bias_fade:
            slopes.copy_(full_slopes * fade())
        if not np.isfinite(stats["loss"]):
            record["diverged_at"] = run.step
            break
        if run.step in eval_at:
            evaluate(train_s, tokens, window)
            window = []
    if args.fill_mask:
        from litebert.demo import FILL_MASK_EXAMPLES
        from litebert.families.mlm import fill_mask
        from litebert.tokenizer import load_tokenizer

        run.raw_model.save_pretrained(work / "model", tokenizer=load_tokenizer(run.tokenizer_dir))
        record["fill_mask"] = {text: [(p.token, round(p.score, 3)) for p in masks[0]]
                               for text, masks in zip(FILL_MASK_EXAMPLES, fill_mask(work / "model",
                                                                                    FILL_MASK_EXAMPLES, top_k=3))}
    record["done"] = True
    write_atomic(record_path, record)
    if args.fill_mask and args.keep_model:
        kept = Path(args.keep_model) / args.name
        shutil.rmtree(kept, ignore_errors=True)
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(work / "model"), kept)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
