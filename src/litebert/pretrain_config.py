"""`litebert pretrain`'s settings: PretrainConfig (every option with its help and check: one definition for the
library, the CLI and --config files) and what follows from them alone (the warm-up, the lr schedule's kind)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from litebert.config import (ABOVE_ZERO, FRACTION, LEARNING_RATE, NON_NEGATIVE, POSITIVE, at_least, check_options,
                             closed, open_open, option)
from litebert.data.pretraining import parse_mask_replace, parse_phases
from litebert.device import AUTO_PRECISION_HELP, PRECISIONS, check_device
from litebert.errors import ConfigError
from litebert.health import COLLAPSE_PATIENCE, COLLAPSE_POLICIES, DEEP_COLLAPSE_SPREAD
from litebert.model import PROJECTION_INITS
from litebert.optim import lamb_lr_for_batch
from litebert.runlife import parse_duration
from litebert.tracking import REPORT_TO_HELP, parse_report_to


@dataclass
class PretrainConfig:
    model: str = option("albert-tiny", "what to train: a preset name (random init), a config JSON (random init), or "
                                       "a model or run directory to continue from its weights (default: albert-tiny)")
    data: str = option("", "token store from `litebert data build`")
    tokenizer: str | None = option(None, "tokenizer directory (default: the copy inside the store, the one it was "
                                         "built with)")
    out: str = option("runs/pretrain", "run directory: checkpoint-STEP/, final/, metrics.jsonl, run.json")
    # examples
    max_seq_length: int = option(128, "tokens per example", check=at_least(8))
    max_predictions_per_seq: int = option(20, "masked positions per example, at most", check=POSITIVE)
    masked_lm_prob: float = option(0.15, "share of tokens masked", check=open_open(0.0, 1.0))
    short_seq_prob: float = option(0.1, "share of examples cut shorter than --max-seq-length (the paper's 0.1)",
                                   check=closed(0.0, 1.0))
    ngram: int = option(3, "longest masked n-gram (the paper's 3)", check=closed(1, 10))
    objective: str = option("sop", "sentence-level objective: sop (ALBERT), nsp (BERT, for ablations) or none (MLM "
                                   "only)", choices=("sop", "nsp", "none"))
    single_sentence: str = option("random", "a one-sentence chunk: random (the official code: B from another "
                                            "document), split, or skip", choices=("random", "split", "skip"))
    short_seq_draw: str = option("chunk", "the short target length is drawn per chunk (the paper) or per document "
                                          "(the official code)", choices=("chunk", "document"))
    mask_unit: str = option("word", "mask n-grams of whole words (the store's word boundaries) or of single tokens",
                                    choices=("word", "token"))
    mask_replace: str = option("80/10/10", "what a chosen position becomes, in percent: [MASK]/kept/random "
                                           "(ALBERT's 80/10/10; 100/0/0 always shows [MASK]). Held-out MLM is "
                                           "always scored with 80/10/10")
    phases: str | None = option(None, "sequence-length schedule, e.g. 0.9:128,0.1:512 (default: all steps at "
                                      "--max-seq-length)")
    # optimisation
    batch_size: int = option(256, "global batch per optimizer step, in sequences, over all ranks", check=POSITIVE)
    micro_batch_size: int = option(32, "sequences per rank and forward pass; accumulation makes up --batch-size",
                                   check=POSITIVE)
    steps: int = option(1000, "optimizer steps", check=POSITIVE)
    warmup_steps: int | None = option(None, "linear warmup steps (default: 2.5% of --steps, the paper's 3,125 of "
                                            "125k); under --max-time/--max-tokens the same share of the budget",
                                      check=NON_NEGATIVE)
    lr: float | None = option(None, "peak learning rate (default: the paper's 0.00176 at batch 4096 scaled by "
                                    "sqrt(--batch-size / 4096), LAMB's rule: 4.4e-4 at batch 256)",
                              check=LEARNING_RATE)
    optimizer: str = option("lamb", "lamb (the paper's), adamw, or adamw_official (the BERT code's AdamW)",
                                    choices=("lamb", "adamw", "adamw_official"))
    weight_decay: float = option(0.01, "decoupled weight decay", check=NON_NEGATIVE)
    poly_power: float = option(1.0, "power of the polynomial decay after warmup (1: linear)", check=ABOVE_ZERO)
    no_decay_lr_scale: float = option(1.0, "learning-rate multiplier for the biases and LayerNorm parameters, which "
                                           "get no weight decay and (under LAMB) no trust ratio (1: the official "
                                           "optimizer; docs/recipes.md)", check=NON_NEGATIVE)
    mlm_bias_init: str = option("zero", "a fresh model's MLM output bias: zero (official) or unigram (the log "
                                        "frequencies of the store's pieces, so the encoder need not learn them)",
                                choices=("zero", "unigram"))
    bias_correction: bool = option(False, "Adam's bias correction in lamb/adamw_official (the official optimizer has "
                                          "none; docs/recipes.md, 'Why pretraining collapsed')")
    projection_init: str = option("official", "a fresh model's E -> H embedding projection: official (initializer_range "
                                              "draws, so the encoder starts from embeddings of std ~0.02 sqrt(E)) or "
                                              "unit (std 1/sqrt(E): unit-variance input, as BERT's; docs/recipes.md)",
                                  choices=PROJECTION_INITS)
    projection_lr_scale: float = option(1.0, "learning-rate multiplier for the E -> H embedding projection (1: the "
                                             "official optimizer; docs/recipes.md, 'What the model has not learned')",
                                        check=NON_NEGATIVE)
    branch_init_scale: float | None = option(None, "a fresh model's residual-branch weights (value, attention "
                                                   "output, feed-forward) times this (default: (8 x layers)^-1/4, "
                                                   "0.32 for 12 layers, so a deep model does not start collapsed; "
                                                   "1: the official draw; docs/recipes.md, 'Session 18')",
                                             check=ABOVE_ZERO)
    max_grad_norm: float = option(1.0, "gradient clipping norm", check=ABOVE_ZERO)
    # speed
    precision: str = option("auto", AUTO_PRECISION_HELP, choices=PRECISIONS)
    compile: bool = option(False, "torch.compile the model (a minute of compilation first)")
    gradient_checkpointing: bool = option(False, "recompute activations in the backward pass: less memory, ~30% "
                                                 "slower")
    dropout: float = option(0.0, "dropout in pretraining (ALBERT v2: 0)", check=FRACTION)
    threads: int | None = option(None, "torch threads (default: torch's choice; under torchrun on CPU, cores / "
                                       "ranks)", check=POSITIVE)
    device: str | None = option(None, "cpu, cuda, cuda:N or mps (default: cuda when present, else cpu)")
    num_workers: int = option(0, "data-loading processes (0: in the training process)", check=NON_NEGATIVE)
    # bookkeeping
    seed: int = option(0, "seed of the initial weights, the masks and the data order", check=NON_NEGATIVE)
    log_every: int = option(10, "steps between log lines and metrics.jsonl records", check=POSITIVE)
    eval_every: int = option(0, "steps between held-out evaluations (0: only at the end)", check=NON_NEGATIVE)
    eval_batches: int = option(20, "micro-batches in each held-out evaluation", check=POSITIVE)
    save_every: int = option(500, "steps between checkpoints (one is also saved at the end and at a "
                                  "--max-time/--max-tokens stop)", check=POSITIVE)
    keep: int = option(3, "checkpoints kept (older ones are deleted)", check=POSITIVE)
    resume: str = option("auto", "auto: the newest complete checkpoint in --out; none: refuse a --out holding "
                                 "checkpoints; or a checkpoint dir")
    nan_policy: str = option("error", "on a non-finite loss or gradient: error (stop) or skip the step (within "
                                      "--nan-budget)", choices=("error", "skip"))
    nan_budget: int = option(10, "skipped steps allowed under --nan-policy skip before stopping", check=NON_NEGATIVE)
    tensorboard: bool = option(False, "also write TensorBoard logs to OUT/tb (needs the [tb] extra; the same as "
                                      "--report-to tensorboard)")
    report_to: str | None = option(None, REPORT_TO_HELP)
    # budgets: stop cleanly (checkpoint, evaluation, final/) at whichever comes first, else at --steps
    max_time: str | float | None = option(None, "stop cleanly after this much wall-clock time over all sessions, "
                                                "saving a checkpoint: seconds or 30m, 2h, 1h30m; warm-up and decay "
                                                "then follow the share of it used, so the run ends annealed (default: "
                                                "no limit)")
    max_tokens: int | None = option(None, "stop cleanly after this many training tokens, saving a checkpoint; "
                                          "warm-up and decay then follow the share of it used (default: no limit)",
                                    check=POSITIVE)
    health: bool = option(True, "log the representation-health figure (litebert.health) at every log step, and warn "
                                "on a collapse (default: on)")
    on_collapse: str = option("warn", f"when the representations collapse past the warm-up (health_spread under "
                                      f"{DEEP_COLLAPSE_SPREAD:g} at {COLLAPSE_PATIENCE} health checks in a row; a "
                                      "shallower dip is only noted): warn and go on, or stop (a checkpoint is saved "
                                      "first; exit 2)",
                              choices=COLLAPSE_POLICIES)

    def __post_init__(self) -> None:
        check_options(self)  # types, choices and rules of every field: one check for library, CLI and --config
        if self.lr is None:  # resolved once, so run.json records the lr the run used
            self.lr = lamb_lr_for_batch(self.batch_size)
        checks = [  # the rules that relate two fields
            (self.max_predictions_per_seq <= self.max_seq_length, "max_predictions_per_seq",
             "must be in [1, max_seq_length]"),
            (self.warmup_steps is None or self.warmup_steps <= self.steps, "warmup_steps", "must be in [0, steps]"),
            (bool(self.resume), "resume", "must be auto, none or a checkpoint directory"),
        ]
        for ok, name, why in checks:
            if not ok:
                raise ConfigError(f"--{name.replace('_', '-')} {getattr(self, name.split('/')[0], '')}: {why}")
        if self.device is not None:
            check_device(self.device)
        self.length_phases  # noqa: B018 (parses --phases once and checks it)
        self.trackers  # noqa: B018 (checks --report-to)
        self.max_seconds  # noqa: B018 (validates --max-time)
        parse_mask_replace(self.mask_replace, "--mask-replace ")

    @functools.cached_property
    def length_phases(self) -> list[tuple[float, int]]:
        """--phases as (fraction of the steps, sequence length) pairs; [(1.0, max_seq_length)] without it."""
        return parse_phases(self.phases, self.max_seq_length)

    @property
    def trackers(self) -> tuple[str, ...]:
        """--report-to, with the older --tensorboard switch folded in."""
        names = parse_report_to(self.report_to)
        return names + ("tensorboard",) if self.tensorboard and "tensorboard" not in names else names

    @functools.cached_property
    def max_seconds(self) -> float | None:  # read on every step's budget check: parsed once
        return None if self.max_time is None else parse_duration(self.max_time, "--max-time")

    @property
    def warmup(self) -> int:
        return self.warmup_steps if self.warmup_steps is not None else round(0.025 * self.steps)

    @property
    def warmup_fraction(self) -> float:
        """The warm-up's share of the schedule (of --steps, or of a --max-time/--max-tokens budget)."""
        return self.warmup / self.steps

    @property
    def budgeted(self) -> bool:
        """A --max-time or --max-tokens budget bounds the run: the schedule follows the budget's fraction used."""
        return self.max_seconds is not None or self.max_tokens is not None

    def schedule_line(self, follows_budget: bool) -> str:
        """What drives the learning-rate schedule, for the start line."""
        shape = f"warm-up {self.warmup_fraction:.1%}, then decay to 0 (power {self.poly_power:g})"
        if not follows_budget:
            return f"schedule: {shape} over --steps {self.steps}"
        clocks = ([f"wall clock (--max-time {self.max_time})"] if self.max_seconds is not None else []) + \
                 ([f"tokens (--max-tokens {self.max_tokens:,})"] if self.max_tokens is not None else [])
        return (f"schedule: {shape} over the budget's fraction used: {' and '.join(clocks)}, or --steps "
                f"{self.steps} if that ends first (whichever is furthest along drives it)")


def schedule_kind(cfg: PretrainConfig) -> str:
    """What the lr schedule follows, as checkpoints record it: "steps" or "budget"."""
    return "budget" if cfg.budgeted else "steps"


# --single-sentence (the CLI's names) -> PretrainingDataset's names
SINGLE_SENTENCE_MODES = {"random": "random_document", "split": "split", "skip": "skip"}
