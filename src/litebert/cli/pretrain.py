"""`litebert pretrain` and `litebert plot`."""

from litebert.cli._common import add_alias, add_command, add_config_option, add_dataclass_args, dataclass_from_args

PRECISIONS = ("auto", "fp32", "bf16", "fp16")

HELP = {
    "model": "what to train: a preset name (random init), a config JSON (random init), or a model or run "
             "directory to continue from its weights (default: albert-tiny)",
    "data": "token store from `litebert data build`",
    "tokenizer": "tokenizer directory (default: the copy inside the store, the one it was built with)",
    "out": "run directory: checkpoint-STEP/, final/, metrics.jsonl, run.json",
    "max_seq_length": "tokens per example",
    "max_predictions_per_seq": "masked positions per example, at most",
    "masked_lm_prob": "share of tokens masked",
    "short_seq_prob": "share of examples cut shorter than --max-seq-length (the paper's 0.1)",
    "ngram": "longest masked n-gram (the paper's 3)",
    "objective": "sentence-level objective: sop (ALBERT), nsp (BERT, for ablations) or none (MLM only)",
    "single_sentence": "a one-sentence chunk: random (the official code: B from another document), split, or skip",
    "short_seq_draw": "the short target length is drawn per chunk (the paper) or per document (the official code)",
    "mask_unit": "mask n-grams of whole words (the store's word boundaries) or of single tokens",
    "phases": "sequence-length schedule, e.g. 0.9:128,0.1:512 (default: all steps at --max-seq-length)",
    "batch_size": "global batch per optimizer step, in sequences, over all ranks",
    "micro_batch_size": "sequences per rank and forward pass; accumulation makes up --batch-size",
    "steps": "optimizer steps",
    "warmup_steps": "linear warmup steps (default: 2.5%% of --steps, the paper's 3,125 of 125k)",
    "lr": "peak learning rate (the paper's 0.00176, at batch 4096)",
    "optimizer": "lamb (the paper's), adamw, or adamw_official (the BERT code's AdamW)",
    "weight_decay": "decoupled weight decay",
    "poly_power": "power of the polynomial decay after warmup (1: linear)",
    "no_decay_lr_scale": "learning-rate multiplier for the biases and LayerNorm parameters, which get no weight "
                         "decay and (under LAMB) no trust ratio (1: the official optimizer; docs/recipes.md)",
    "max_grad_norm": "gradient clipping norm",
    "precision": "auto: bf16 where the CPU/GPU has fast bf16, fp16 on older GPUs, else fp32",
    "compile": "torch.compile the model (a minute of compilation first)",
    "gradient_checkpointing": "recompute activations in the backward pass: less memory, ~30%% slower",
    "dropout": "dropout in pretraining (ALBERT v2: 0)",
    "threads": "torch threads (default: torch's choice; under torchrun on CPU, cores / ranks)",
    "device": "cpu, cuda, cuda:N or mps (default: cuda when present, else cpu)",
    "num_workers": "data-loading processes (0: in the training process)",
    "seed": "seed of the initial weights, the masks and the data order",
    "log_every": "steps between log lines and metrics.jsonl records",
    "eval_every": "steps between held-out evaluations (0: only at the end)",
    "eval_batches": "micro-batches in each held-out evaluation",
    "save_every": "steps between checkpoints (one is also saved at the end and at a --max-time/--max-tokens stop)",
    "keep": "checkpoints kept (older ones are deleted)",
    "resume": "auto: the newest complete checkpoint in --out; none: refuse a --out holding checkpoints; "
              "or a checkpoint dir",
    "nan_policy": "on a non-finite loss or gradient: error (stop) or skip the step (within --nan-budget)",
    "nan_budget": "skipped steps allowed under --nan-policy skip before stopping",
    "tensorboard": "also write TensorBoard logs to OUT/tb (needs the [tb] extra)",
    "health": "log the representation-health figure (litebert.health) at every log step, and warn on a collapse "
              "(default: on)",
    "max_time": "stop cleanly after this much wall-clock time, saving a checkpoint: seconds or 30m, 2h, 1h30m "
                "(default: no limit)",
    "max_tokens": "stop cleanly after this many training tokens, saving a checkpoint (default: no limit)",
}
CHOICES = {"objective": ("sop", "nsp", "none"), "single_sentence": ("random", "split", "skip"),
           "short_seq_draw": ("chunk", "document"), "mask_unit": ("word", "token"), "optimizer": ("lamb", "adamw", "adamw_official"),
           "precision": PRECISIONS, "nan_policy": ("error", "skip")}


def register(sub) -> None:
    from litebert.pretrain import PretrainConfig

    p = add_command(sub, "pretrain", "pretrain ALBERT (MLM + SOP, LAMB) on a token store; torchrun-ready", """
litebert pretrain --model albert-base-v2 --data store/ --out runs/base --batch-size 4096 \\
    --micro-batch-size 64 --steps 125000 --max-time 12h
litebert pretrain --config runs/base/run.json --steps 150000     # the same run, longer""")
    add_config_option(p)
    add_dataclass_args(p, PretrainConfig, HELP, required=("data",), choices=CHOICES,
                       flags={"num_workers": "--workers"})
    p.add_argument("--warmup-ratio", type=float, metavar="R",
                   help="warmup as a share of --steps, instead of --warmup-steps (default: 0.025)")
    add_alias(p, "--num-workers", "num_workers", type=int)
    p.config_ignore = ()
    p.set_defaults(func=run_pretrain)

    q = add_command(sub, "plot", "plot the curves of a run dir's metrics.jsonl into a PNG",
                    "litebert plot runs/base            # writes runs/base/curves.png")
    q.add_argument("run_dir", metavar="RUN_DIR", help="a pretraining or fine-tuning run directory")
    q.add_argument("--out", help="PNG path (default: RUN_DIR/curves.png)")
    q.set_defaults(func=run_plot)


def run_pretrain(args) -> int:
    from litebert.errors import ConfigError
    from litebert.pretrain import PretrainConfig, pretrain

    if args.warmup_ratio is not None:
        if args.warmup_steps is not None:
            raise ConfigError("give --warmup-steps or --warmup-ratio, not both")
        if not 0 <= args.warmup_ratio <= 1:
            raise ConfigError(f"--warmup-ratio {args.warmup_ratio}: must be in [0, 1]")
        args.warmup_steps = round(args.warmup_ratio * args.steps)
    pretrain(dataclass_from_args(PretrainConfig, args))
    return 0


def run_plot(args) -> int:
    from litebert.plot import plot_run

    print(plot_run(args.run_dir, args.out))
    return 0
