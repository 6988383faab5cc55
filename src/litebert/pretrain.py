"""ALBERT pretraining: `setup()` builds everything, then `pretrain()` is one training loop you can read.

Loss semantics (exact under gradient accumulation and data parallelism):
    mlm = sum of cross-entropy over real masked tokens of the GLOBAL batch / their count in the global batch
    sop = sum of cross-entropy over the global batch's sentence pairs / their count
Each micro-batch contributes its sums divided by the global counts, so the accumulated gradient equals the
gradient of one big batch. DDP averages gradients over ranks; we multiply by world size to undo that.

Runs unchanged under `torchrun` (gloo on CPU, NCCL on GPU): rank and world size come from the environment, and
every (re)start resumes the newest complete checkpoint, so `torchrun --max-restarts` just works.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import json
import math
import os
import sys
import tempfile
import time
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

from litebert.checkpoint import cleanup_incomplete, find_latest_checkpoint
from litebert.config import (ABOVE_ZERO, ADDED_FIELDS, FRACTION, LEARNING_RATE, NON_NEGATIVE, POSITIVE, PRESETS,
                             RETIRED_FIELDS, AlbertConfig, at_least, check_options, closed, open_open, option)
from litebert.data.pretraining import (BatchStream, PretrainingDataset, collate_pretraining, parse_mask_replace,
                                      parse_phases)
from litebert.data.store import TokenStore
from litebert.device import (AUTO_PRECISION_HELP, PRECISIONS, autocast, check_device, first_line, is_out_of_memory,
                             measure_peak_flops, resolve_precision, synchronize)
from litebert.distributed import Dist, check_same_run_dir, check_same_store, init_distributed, on_all_ranks
from litebert.errors import CheckpointError, ConfigError, TokenizerError, TrainingError
from litebert.faults import inject_fault
from litebert.files import atomic_write, check_output, read_json
from litebert.health import (COLLAPSE_POLICIES, CollapseWatch, collapse_message, is_collapsed,
                             representation_health, store_health_batch, warn_collapsed)
from litebert.hub_cache import resolve_model_path
from litebert.memory import check_training_memory
from litebert.mlm_scores import MlmTally, piece_table, summary_line
from litebert.model import AlbertForPreTraining, masked_lm_loss, model_flops_per_token
from litebert.model_card import Result, Training, write_model_card
from litebert.optim import BudgetSchedule, build_optimizer, lamb_lr_for_batch, make_scheduler
from litebert.pretrained import WEIGHTS_NAME, load_checked, model_files, read_model_state
from litebert.progress import eta, format_seconds, make_bar, on_terminal, say
from litebert.rundir import FINAL_STEP_FILE, RUN_RECORD, resolve_model_dir
from litebert.runlife import (TermSignal, budget_reached, changed_fields, check_state_keys, last_checkpoint,
                              make_run_dir, newest_verified, parse_duration, read_checkpoint, restore_rng,
                              restore_training, rng_state, save_run_checkpoint, sigterm_error, stopping_line,
                              take_run_dir, truncate_metrics)
from litebert.tokenizer import load_tokenizer
from litebert.tracking import REPORT_TO_HELP, Trackers, parse_report_to


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
    on_collapse: str = option("warn", "when the representations stay collapsed past the warm-up (3 health checks in "
                                      "a row): warn and go on, or stop (a checkpoint is saved first; exit 2)",
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


# --------------------------------------------------------------------------------------------- setup


@dataclass
class Run:
    cfg: PretrainConfig
    d: Dist
    device: torch.device
    precision: str
    config: AlbertConfig
    model: torch.nn.Module  # what the loop calls (maybe DDP- and compile-wrapped)
    raw_model: AlbertForPreTraining  # what we save
    optimizer: torch.optim.Optimizer
    scheduler: Any
    scaler: Any
    stream: BatchStream
    store: Any
    tokenizer_dir: Path
    accum: int
    step: int = 0
    nan_skipped: int = 0
    peak_flops: float = float("nan")
    tokens: float = 0.0  # training tokens so far, over all ranks and resumes (--max-tokens)
    schedule: str = "steps"  # what the lr schedule follows: "steps", or "budget" (BudgetSchedule)
    clock_before: float = 0.0  # budget schedule: --max-time seconds spent by earlier sessions (from the checkpoint)
    elapsed: float = 0.0  # --max-time seconds spent so far, this session included (rank 0's clock)
    resumed_from: Path | None = None
    tokenizer: Any = None  # loaded from tokenizer_dir at the first save (run_tokenizer)


def model_config_for(cfg: PretrainConfig, vocab_size: int, store=None) -> tuple[AlbertConfig, Path | None]:
    """(config, directory to continue from or None). The vocab always comes from the store's tokenizer.

    Continued (domain- or task-adaptive) pretraining: `cfg.model` is a model directory (or a run directory: its
    newest complete checkpoint); its weights are the start, the optimizer and schedule are fresh, and the store
    must have been built with the model's own tokenizer (same pieces, same ids), which `store` is checked
    against."""
    model = cfg.model
    if model not in PRESETS and "/" in model and not model.endswith(".json") and not Path(model).exists():
        model = str(resolve_model_path(model))  # a Hub id ("albert/albert-base-v2"): its local Hub cache snapshot
    elif model not in PRESETS and Path(model).is_dir():
        model = str(resolve_model_dir(model))  # a run dir: its newest complete checkpoint
    source = Path(model)
    init_dir = source if (source / "model.safetensors").is_file() else None
    if model not in PRESETS and source.is_dir() and init_dir is None:
        # A directory means "continue from these weights"; without them the run would start from random init.
        raise ConfigError(f"--model {cfg.model}: the directory has no model.safetensors, so there are no weights "
                          f"to continue from; to train this architecture from scratch pass its config file "
                          f"(--model {source / 'config.json'})")
    config = AlbertConfig.load(model)
    if init_dir is not None and config.vocab_size != vocab_size:
        raise ConfigError(f"{cfg.model}: the model's vocab_size {config.vocab_size} != the store's tokenizer "
                          f"vocab size {vocab_size}")
    if init_dir is not None and store is not None:
        check_continued_tokenizer(init_dir, store)
    if init_dir is None and model not in PRESETS and config.vocab_size != vocab_size:
        # The vocabulary is the tokenizer's: a config file's own vocab_size cannot hold. Say so, not silently.
        print(f"--model {cfg.model}: vocab_size {config.vocab_size} replaced by the store's tokenizer vocab size "
              f"{vocab_size}", file=sys.stderr)
    dropout = dict(hidden_dropout_prob=cfg.dropout, attention_probs_dropout_prob=cfg.dropout)
    config = config.replace(vocab_size=vocab_size, **dropout)
    if config.max_position_embeddings < max(n for _, n in cfg.length_phases):
        raise ConfigError(f"--max-seq-length exceeds the model's max_position_embeddings "
                          f"{config.max_position_embeddings}")
    return config, init_dir


def check_continued_tokenizer(init_dir: Path, store) -> None:
    """The model dir's tokenizer (when it has one) must be the store's: equal vocab sizes are not enough, a
    store of another vocabulary would feed the model ids that mean other pieces."""
    try:
        tokenizer = load_tokenizer(init_dir)
    except TokenizerError:
        return  # a bare model dir (config + weights): nothing to compare; the vocab size was checked
    if tokenizer.fingerprint() != store.tokenizer_fingerprint:
        raise TokenizerError(f"--model {init_dir}: its tokenizer is not the one the store {store.path} was built "
                             f"with; continued pretraining keeps the model's tokenizer: build the store with "
                             f"`litebert data build --tokenizer {init_dir} ...`")


def start_from(model: AlbertForPreTraining, init_dir: Path, main: bool) -> None:
    """Continued pretraining: load the model dir's weights with load_pretrained's checks (a bare encoder's
    tensors have no `albert.` prefix; a missing encoder tensor is an error) and say which heads start afresh
    (from a fine-tuned classifier, say: the MLM and SOP heads)."""
    report = load_checked(model, read_model_state(init_dir)[2], init_dir / WEIGHTS_NAME)
    fresh = sorted({name.removeprefix("albert.").split(".")[0] for name in report["initialised"]})
    if fresh and main:
        print(f"litebert pretrain: {init_dir} has no weights for these heads, so each starts afresh: "
              f"{', '.join(fresh)}", file=sys.stderr)


def resolve_tokenizer_dir(cfg: PretrainConfig, store) -> Path:
    """The store's own copy of its tokenizer, or --tokenizer; either way it must be the one the store used."""
    path = Path(cfg.tokenizer) if cfg.tokenizer else store.path / "tokenizer"
    if not path.is_dir():
        raise ConfigError(f"{path}: no tokenizer directory; pass --tokenizer DIR (the one the store was built with)")
    store.check_tokenizer(load_tokenizer(path))
    return path


def train_dataset(cfg: PretrainConfig, store, max_seq_length: int) -> PretrainingDataset:
    """The training examples `cfg` asks for, at one phase's sequence length."""
    return PretrainingDataset(
        store, split="train", max_seq_length=max_seq_length, max_predictions_per_seq=cfg.max_predictions_per_seq,
        masked_lm_prob=cfg.masked_lm_prob, short_seq_prob=cfg.short_seq_prob, ngram=cfg.ngram,
        objective=cfg.objective, seed=cfg.seed, single_sentence=SINGLE_SENTENCE_MODES[cfg.single_sentence],
        short_seq_draw=cfg.short_seq_draw, mask_unit=cfg.mask_unit, mask_replace=cfg.mask_replace)


def setup(cfg: PretrainConfig) -> Run:

    d, device = init_distributed(cfg.device)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    elif d.world > 1 and device.type == "cpu":
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // d.world))
    # Rank 0's choice for all: "auto" on CPU is a timing probe, and ranks must not train in different precisions.
    precision = d.broadcast(resolve_precision(cfg.precision, device))
    if cfg.batch_size % (cfg.micro_batch_size * d.world):
        raise ConfigError(f"--batch-size {cfg.batch_size} is not a multiple of --micro-batch-size "
                          f"{cfg.micro_batch_size} x {d.world} rank(s)")
    accum = cfg.batch_size // (cfg.micro_batch_size * d.world)

    # A rank that cannot open the store stops them all (instead of leaving them at the first collective).
    store = on_all_ranks(d, lambda: TokenStore.open(cfg.data))
    check_same_store(d, store.path, store.content_fingerprint)
    tokenizer_dir = resolve_tokenizer_dir(cfg, store)
    config, init_dir = model_config_for(cfg, store.vocab_size, store)
    if d.main:  # checksums and token ids, before a bad id crashes a step mid-run (one read of the store)
        store.check_tokens(config.vocab_size)
    longest = max(n for _, n in cfg.length_phases)
    check_training_memory(config, cfg.micro_batch_size, longest, cfg.max_predictions_per_seq,
                          cfg.gradient_checkpointing, device, cfg.model)
    torch.manual_seed(cfg.seed)  # identical initial weights on every rank
    raw = AlbertForPreTraining(config)
    raw.set_gradient_checkpointing(cfg.gradient_checkpointing)
    if init_dir is not None:
        start_from(raw, init_dir, d.main)
    elif cfg.mlm_bias_init == "unigram":
        with torch.no_grad():  # the store's piece frequencies: the MLM guesses them from step 0 (docs/recipes.md)
            raw.mlm.bias.copy_(torch.from_numpy(piece_table(store).log_prior()))
    raw.to(device)
    # MLM only: the pooler and the SOP head get zero gradients, and left in the optimizer its weight decay would
    # erase them (LAMB: to exactly 0), handing fine-tuning a pooler that maps every sentence to 0.
    untrained = ("albert.pooler.", "sop.") if cfg.objective == "none" else ()
    optimizer = build_optimizer(raw, cfg.optimizer, lr=cfg.lr, weight_decay=cfg.weight_decay, untrained=untrained,
                                no_decay_lr_scale=cfg.no_decay_lr_scale, bias_correction=cfg.bias_correction)
    # A budgeted run does not know its step count: its schedule follows the budget's fraction used
    # (budget_progress), so a run that stops at its budget has finished warm-up and decay.
    scheduler = (BudgetSchedule(optimizer, cfg.warmup_fraction, cfg.poly_power) if cfg.budgeted
                 else make_scheduler(optimizer, cfg.warmup, cfg.steps, cfg.poly_power))
    scaler = torch.amp.GradScaler("cuda", enabled=precision == "fp16")

    run_dir = Path(cfg.out)
    on_all_ranks(d, lambda: make_run_dir(run_dir) if d.main else None)
    check_same_run_dir(d, run_dir)
    stream = BatchStream(functools.partial(train_dataset, cfg, store), cfg.length_phases, cfg.steps,
                         cfg.micro_batch_size, rank=d.rank, world=d.world, seed=cfg.seed, num_workers=cfg.num_workers)
    run = Run(cfg, d, device, precision, config, raw, raw, optimizer, scheduler, scaler, stream, store,
              tokenizer_dir, accum, schedule=schedule_kind(cfg))
    resume_from(run)
    if d.main:
        check_run_dir_matches(run)
        if run.resumed_from is not None:
            print(f"resumed from {run.resumed_from} at step {run.step}", file=sys.stderr)
    if d.world > 1:
        kwargs = {"device_ids": [device.index]} if device.type == "cuda" else {}
        run.model = torch.nn.parallel.DistributedDataParallel(raw, **kwargs)
    if cfg.compile:
        run.model = torch.compile(run.model)
    return run


def check_run_dir_matches(run: Run) -> None:
    """Every run dir stores what made it; a restart with a different store or model is refused."""
    path = Path(run.cfg.out) / RUN_RECORD
    now = {"model_config": run.config.to_dict(), "tokenizer_fingerprint": run.store.tokenizer_fingerprint,
           "store_fingerprint": run.store.content_fingerprint, "train": dataclasses.asdict(run.cfg)}
    if path.is_file() and run.step > 0:
        before = read_json(path, TrainingError, expect=dict, hint="use a new --out")
        if before.get("tokenizer_fingerprint") != now["tokenizer_fingerprint"]:
            raise TrainingError(f"{path}: this run was made with a store of another tokenizer than {run.cfg.data}; "
                                "use a new --out")
        if before.get("store_fingerprint", now["store_fingerprint"]) != now["store_fingerprint"]:
            # Same tokenizer, other tokens (a store rebuilt from other text or with other settings): the saved data
            # position (epoch, offset) would index other examples, and the run would silently mix two corpora.
            raise TrainingError(f"{path}: this run was made with another token store than {run.cfg.data} (same "
                                "tokenizer, but its shards differ: rebuilt from other text or with other settings). "
                                "Resume with the run's store, or continue from its weights in a new --out "
                                "(--model CHECKPOINT_DIR: continued pretraining)")
        saved_config = {k: v for k, v in before.get("model_config", {}).items() if k not in RETIRED_FIELDS}
        if saved_config:  # a run.json from before a field existed ran at its earlier value
            saved_config = {**ADDED_FIELDS, **saved_config}
        if saved_config != now["model_config"]:
            raise TrainingError(f"{path}: this run was made with another model config; use a new --out")
        changed = changed_fields(before.get("train", {}), now["train"], RECIPE_FIELDS)
        if changed:
            raise TrainingError(f"{path}: this run was made with " + ", ".join(changed) + "; a resume restores the "
                                "saved optimizer, schedule and data stream, so the new values would be ignored or "
                                "mix two recipes. Resume with the run's values, or continue from its weights in a "
                                "new --out (--model CHECKPOINT_DIR: continued pretraining)")

    atomic_write(path, lambda tmp: tmp.write_text(json.dumps(now, indent=2) + "\n"))  # a full disk: CheckpointError


# The settings that define what a run learns: changing one on resume would be silently ignored (the learning rate
# and its schedule come back from the optimizer state) or would splice two recipes into one run (masking, data order,
# lengths). --steps, budgets, logging, saving, workers, threads, --micro-batch-size and the world size may change.
RECIPE_FIELDS = ("max_seq_length", "max_predictions_per_seq", "masked_lm_prob", "short_seq_prob", "ngram", "objective",
                 "single_sentence", "short_seq_draw", "mask_unit", "mask_replace", "phases", "batch_size",
                 "warmup_steps", "lr", "weight_decay", "poly_power", "no_decay_lr_scale", "max_grad_norm", "dropout",
                 "seed")


def resume_from(run: Run) -> None:
    """Restore the checkpoint this run continues from (if any), then drop logged lines past its step, so the
    metrics log never holds a step twice (also after a crash before the first save)."""
    cfg, d = run.cfg, run.d
    run_dir = Path(cfg.out)
    on_all_ranks(d, lambda: check_output(run_dir) if d.main else None)
    if cfg.resume == "none":
        if find_latest_checkpoint(run_dir) is not None:
            raise TrainingError(f"{run_dir} already holds checkpoints; use --resume auto or another --out")
    elif cfg.resume == "auto":
        if d.main:
            cleanup_incomplete(run_dir)
        # Rank 0 picks the newest checkpoint that verifies and every rank loads that one (not each its own newest).
        found = on_all_ranks(d, lambda: newest_verified(run_dir, "litebert pretrain") if d.main else None)
        ckpt = d.broadcast(found[0] if found else None)
        if ckpt is not None:
            restore(run, ckpt, *on_all_ranks(d, lambda: found[1:] if d.main else read_checkpoint(ckpt)))
    else:
        ckpt = Path(cfg.resume)  # an explicit path must be complete and verify too
        restore(run, ckpt, *on_all_ranks(d, lambda: read_checkpoint(ckpt)))
    if d.main:
        truncate_metrics(run_dir / "metrics.jsonl", run.step)


def restore(run: Run, ckpt: Path, state: Any, weights: dict[str, torch.Tensor]) -> None:
    """Put a checkpoint's weights, optimizer, schedule, data position and RNG into `run`, or refuse one that does
    not fit this run (another optimizer, model shape or --steps), naming the file."""
    cfg, d = run.cfg, run.d
    state_file = ckpt / "trainer_state.pt"
    check_state_keys(ckpt, state, ("step", "optimizer", "scheduler", "scaler", "data", "rng", "world_size",
                                   "nan_skipped"), "a litebert pretraining state")
    saved_step = int(state["step"])
    if saved_step > cfg.steps:
        # The loop would not run and the "result" would be a longer run's model, silently.
        raise TrainingError(f"{ckpt}: saved at step {saved_step}, past this run's --steps {cfg.steps}; "
                            f"pass --steps {saved_step} or more to continue it, or use another --out")
    saved_schedule = state.get("schedule", "steps")
    if saved_schedule == "budget" and not cfg.budgeted:
        raise TrainingError(f"{state_file}: saved by a run whose lr schedule follows its --max-time/--max-tokens "
                            "budget; resume it with its budget flags (a larger budget to go on), or continue from "
                            "its weights in a new --out")
    if saved_schedule == "steps" and cfg.budgeted:
        # A run started without a budget keeps its step schedule; the budget only stops this session (as a
        # scheduler's wall-time limit does), and its clock starts at this session's start.
        run.schedule = "steps"
        for group, base in zip(run.optimizer.param_groups, run.scheduler.base_lrs):
            group["lr"] = base  # the budget schedule set them to its lr at 0; the step schedule starts from these
        run.scheduler = make_scheduler(run.optimizer, cfg.warmup, cfg.steps, cfg.poly_power)
        if d.main:
            print(f"litebert pretrain: {ckpt.name} was saved by a run without a budget: it keeps its schedule over "
                  "--steps; --max-time/--max-tokens only stop it", file=sys.stderr)
    saved_optimizer = state.get("optimizer_name", cfg.optimizer)
    if saved_optimizer != cfg.optimizer:
        raise CheckpointError(f"{state_file}: saved with --optimizer {saved_optimizer}, this run has --optimizer "
                              f"{cfg.optimizer}; resume with --optimizer {saved_optimizer} or use a new --out")
    restore_training(ckpt, state, weights, run.raw_model, run.optimizer, run.scheduler, run.scaler,
                     "resume with the --optimizer and model it was saved with, or use a new --out")
    run.step, run.nan_skipped = saved_step, int(state["nan_skipped"])
    run.tokens = float(state.get("tokens", 0.0))
    if run.schedule == "budget":
        run.clock_before = run.elapsed = float(state.get("budget_elapsed", 0.0))
    saved_micro = int(state.get("micro_batch_size", cfg.micro_batch_size))
    if run.stream.load_state_dict(state["data"], saved_micro, int(state["world_size"])):
        restore_rng(state["rng"][d.rank])
    else:  # another sharding: the data continues the epoch (BatchStream), the RNG cannot continue
        torch.manual_seed(cfg.seed + 1000 * run.step + d.rank)
    run.resumed_from = ckpt  # said once the run directory's record accepts the resume (check_run_dir_matches)


# --------------------------------------------------------------------------------------------- one step


def train_step(run: Run, batches: list[dict[str, torch.Tensor]]) -> dict[str, float]:
    """Forward/backward over the micro-batches of one global batch, then one optimizer update (or a skip).

    The host waits for the device once per step (one copy of the step's figures and grad norm, which the
    skip-or-stop decision needs), not after every micro-batch: the counts come from the host copies of the
    batches, and the per-micro-batch figures stay on the device until that copy."""
    d, device, model = run.d, run.device, run.model
    model.train()
    # Global counts first, from the host tensors: every micro-batch's loss is divided by the whole global batch's
    # numbers.
    counts = torch.tensor([sum(b["masked_weights"].sum().item() for b in batches),
                           sum((b["sop_labels"] != -100).sum().item() for b in batches)], dtype=torch.float64)
    tokens = float(sum(b["attention_mask"].numel() for b in batches))
    # masked_kinds (what the 80/10/10 rule did per target) is for held-out scores only: it stays on the host.
    batches = [{k: v.to(device, non_blocking=True) for k, v in b.items() if k != "masked_kinds"} for b in batches]
    d.all_reduce(counts)
    n_masked, n_pairs = max(counts[0].item(), 1.0), max(counts[1].item(), 1.0)
    figures = []  # per micro-batch, float32 [4] on the device: mlm loss, mlm correct, sop loss, sop correct
    for i, b in enumerate(batches):
        last = i == len(batches) - 1
        no_sync = model.no_sync if (d.world > 1 and not last and hasattr(model, "no_sync")) else contextlib.nullcontext
        with no_sync():
            with autocast(run.precision, device):
                out = model(b["input_ids"], b["attention_mask"], b["token_type_ids"],
                            masked_positions=b["masked_positions"])
            mlm = masked_lm_loss(out.mlm_logits, b["masked_ids"], b["masked_weights"], denominator=n_masked)
            sop = F.cross_entropy(out.sop_logits.float(), b["sop_labels"], ignore_index=-100,
                                  reduction="sum") / n_pairs
            loss = (mlm + sop) * d.world
            inject_fault("nan_loss", run.step, d.rank, loss)
            inject_fault("oom", run.step, d.rank, loss)
            run.scaler.scale(loss).backward()
        with torch.no_grad():
            w = b["masked_weights"]
            figures.append(torch.stack([mlm.detach().float(),
                                        ((out.mlm_logits.argmax(-1) == b["masked_ids"]) * w).sum().float(),
                                        sop.detach().float(),
                                        (out.sop_logits.argmax(-1) == b["sop_labels"]).sum().float()]))
    run.scaler.unscale_(run.optimizer)
    grad_norm = torch.nn.utils.clip_grad_norm_(run.raw_model.parameters(), run.cfg.max_grad_norm)
    # The step's one device -> host copy: [accum * 4 figures, grad norm].
    host = torch.cat([torch.stack(figures).flatten(), grad_norm.detach().float().view(1)]).cpu().double()
    grad_norm_value = host[-1].item()
    sums = torch.zeros(5, dtype=torch.float64)  # mlm loss, mlm correct, sop loss, sop correct, tokens
    for row in host[:-1].view(-1, 4):  # added micro-batch by micro-batch, in float64
        sums[:4] += row
    sums[4] = tokens
    d.all_reduce(sums)
    # Decide on every rank from the same all-reduced numbers, so all ranks skip or stop together.
    loss_finite = math.isfinite(sums[0].item() + sums[2].item())
    finite = torch.tensor([float(loss_finite and math.isfinite(grad_norm_value))])
    d.all_reduce(finite, op=dist.ReduceOp.MIN if d.world > 1 else None)
    skipped = False
    # fp16: a finite loss whose scaled gradients overflowed is the loss scale's doing, not the model's. The scaler
    # skips that update and halves its scale (GradScaler's own rule); it is not a non-finite step for --nan-policy.
    # Below a scale of 1 an overflow is no longer the scale's doing.
    scale_overflow = (finite.item() < 1.0 and loss_finite and run.scaler.is_enabled()
                      and run.scaler.get_scale() >= 1.0)
    if finite.item() < 1.0 and not scale_overflow:
        run.nan_skipped += 1
        if run.cfg.nan_policy == "error":
            raise TrainingError(f"step {run.step + 1}: non-finite loss or gradient (loss {sums[0] + sums[2]:.4g}, "
                                f"grad norm {grad_norm_value:.4g}); {last_checkpoint(run.cfg.out)}. Use "
                                "--nan-policy skip to skip such steps")
        if run.nan_skipped > run.cfg.nan_budget:
            raise TrainingError(f"step {run.step + 1}: {run.nan_skipped} non-finite steps skipped, over the budget "
                                f"--nan-budget {run.cfg.nan_budget}")
        skipped = True  # the update is not applied; the schedule and the data move on
    else:
        run.scaler.step(run.optimizer)  # skips the update itself on a scale overflow
        skipped = scale_overflow
    run.scaler.update()
    run.optimizer.zero_grad(set_to_none=True)
    lr = run.scheduler.get_last_lr()[0]
    with warnings.catch_warnings():
        if skipped:  # torch warns "scheduler.step() before optimizer.step()"; moving the schedule on is intended
            warnings.filterwarnings("ignore", message=r"Detected call of `lr_scheduler.step\(\)`")
        run.scheduler.step()
    n_ranks_pairs = counts[1].item()
    # Each rank's sums are its share of the global means (divided by the global counts): their sum is the mean.
    return {
        "loss": (sums[0] + sums[2]).item(), "mlm_loss": sums[0].item(),
        "mlm_acc": sums[1].item() / n_masked, "sop_loss": sums[2].item(),
        "sop_acc": sums[3].item() / n_ranks_pairs if n_ranks_pairs else float("nan"),
        "lr": lr, "grad_norm": grad_norm_value, "tokens": sums[4].item(), "skipped": skipped,
    }


# --------------------------------------------------------------------------------------------- eval, save, log


EVAL_MASKED_LM_PROB = 0.15  # ALBERT's masking rate: held-out MLM is scored with it whatever the training rate


def eval_protocol(cfg: PretrainConfig) -> PretrainConfig:
    """`cfg` with the masking held-out MLM is scored with: ALBERT's 15% of the words whatever the training rate
    (so a run that trains with 40% masking is scored on the same task as one that trains with 15%), with at most
    ceil(15% of --max-seq-length) predictions per example, or the run's own cap when that is lower. Length,
    n-gram and short-sequence settings stay the run's."""
    cap = math.ceil(round(EVAL_MASKED_LM_PROB * cfg.max_seq_length, 6))  # round: 0.15 * 20 is 3.0000000000000004
    return dataclasses.replace(cfg, masked_lm_prob=EVAL_MASKED_LM_PROB,
                               max_predictions_per_seq=max(1, min(cfg.max_predictions_per_seq, cap)))


def held_out_eval(model: AlbertForPreTraining, store, cfg: PretrainConfig, precision: str) -> dict[str, float]:
    """The figures of a pretraining run's eval lines and metrics.jsonl eval records, on the store's validation
    split: held-out MLM (ALBERT's 15% masking: `eval_protocol`; every per-kind figure and baseline of
    `evaluate_checkpoint`) with the pair accuracy of the run's objective, plus the other pair task's for an sop or
    nsp run (the paper's Table 5 cross-evaluation). `litebert evaluate` on a pretraining directory calls this with
    the run's recorded settings (pretrain_eval.py), so it repeats the run's figures. {} without a validation
    split."""
    if store.num_documents("validation") == 0:
        return {}

    def score(objective: str) -> dict[str, float]:
        return evaluate_checkpoint(model, store, objective, cfg.max_seq_length, batches=cfg.eval_batches,
                                   batch_size=cfg.micro_batch_size, precision=precision, seed=cfg.seed,
                                   cfg=eval_protocol(cfg))

    result = score(cfg.objective if cfg.objective != "none" else "sop")
    other = {"nsp": "sop", "sop": "nsp"}.get(cfg.objective)
    if other:  # only its pair accuracy: the MLM figures are the first pass's
        result[f"eval_{other}_acc"] = score(other)[f"eval_{other}_acc"]
    return result


@torch.no_grad()
def evaluate_checkpoint(model: AlbertForPreTraining, store, objective: str = "sop", max_seq_length: int = 128,
                        batches: int = 20, batch_size: int = 32, precision: str = "fp32", seed: int = 0,
                        cfg: PretrainConfig | None = None) -> dict[str, float]:
    """Held-out MLM and pair accuracy with fixed masks (epoch 0): `objective` "sop" scores the head on
    in-order/swapped pairs, "nsp" on actual-next/random pairs (the paper's Table 5 cross-evaluation).

    eval_mlm_acc is the official masked_lm_accuracy over every target (kept for comparability); beside it the
    accuracy at [MASK], kept and random-replaced targets and the model-free baselines on the same targets
    (litebert.mlm_scores: eval_mlm_acc_mask, eval_base_copy_commonest, ...)."""
    store = store if not isinstance(store, (str, Path)) else TokenStore.open(store)
    device = next(model.parameters()).device
    precision = resolve_precision(precision, device)
    cfg = cfg or PretrainConfig(max_seq_length=max_seq_length)
    model.eval()
    dataset = PretrainingDataset(store, split="validation", max_seq_length=max_seq_length,
                                 max_predictions_per_seq=cfg.max_predictions_per_seq,
                                 masked_lm_prob=cfg.masked_lm_prob, short_seq_prob=cfg.short_seq_prob,
                                 ngram=cfg.ngram, objective=objective, seed=seed,
                                 # every pair from one document, swapped (or replaced) with p = 0.5: chance is 50%
                                 single_sentence="split")
    dataset.set_epoch(0)
    n = min(len(dataset), batches * batch_size)
    totals = torch.zeros(4, dtype=torch.float64)  # mlm loss sum, mlm correct, masked count, pair correct
    tally = MlmTally(piece_table(store), store.token_id("mask"))
    for start in range(0, n, batch_size):
        # built together, as training builds them (one store read and one masking pass per batch)
        host = collate_pretraining(dataset.examples(np.arange(start, min(n, start + batch_size)), epoch=0),
                                   pad_to=max_seq_length, pad_id=store.token_id("pad"))
        b = {k: v.to(device) for k, v in host.items()}
        with autocast(precision, device):
            out = model(b["input_ids"], b["attention_mask"], b["token_type_ids"],
                        masked_positions=b["masked_positions"])
        w = b["masked_weights"]
        per_target = F.cross_entropy(out.mlm_logits.flatten(0, -2).float(), b["masked_ids"].flatten(),
                                     reduction="none").view(w.shape)  # [B, P]
        totals += torch.tensor([(per_target * w).sum().item(),
                                ((out.mlm_logits.argmax(-1) == b["masked_ids"]) * w).sum().item(),
                                w.sum().item(), (out.sop_logits.argmax(-1) == b["sop_labels"]).sum().item()],
                               dtype=torch.float64)
        tally.add(host, out.mlm_logits, per_target)
    masked = max(totals[2].item(), 1.0)
    return {"eval_mlm_loss": totals[0].item() / masked, "eval_mlm_acc": totals[1].item() / masked,
            **tally.result(), f"eval_{objective}_acc": totals[3].item() / max(n, 1), "eval_examples": n}


def save(run: Run) -> Path | None:
    """A complete checkpoint-STEP/ or nothing: the model in HF layout, tokenizer, trainer state, RNG per rank."""
    d = run.d
    rng = [rng_state()]
    if d.world > 1:
        gathered: list[Any] = [None] * d.world
        dist.all_gather_object(gathered, rng[0])
        rng = gathered
    path = None
    if d.main:
        state = {"step": run.step, "optimizer": run.optimizer.state_dict(), "scheduler": run.scheduler.state_dict(),
                 "scaler": run.scaler.state_dict(), "data": run.stream.state_dict(), "rng": rng,
                 "world_size": d.world, "micro_batch_size": run.cfg.micro_batch_size,
                 "optimizer_name": run.cfg.optimizer, "nan_skipped": run.nan_skipped, "tokens": run.tokens,
                 "schedule": run.schedule, "budget_elapsed": run.elapsed if run.schedule == "budget" else 0.0}
        files = {**model_files(run.raw_model), **run_tokenizer(run).files()}
        path = save_run_checkpoint(run.cfg.out, run.step, files, state, keep=run.cfg.keep)
    d.barrier()
    return path


def run_tokenizer(run: Run):
    """The run's tokenizer, loaded once: checkpoints and final/ write its files (tokenizer.json included, which a
    store built before litebert wrote one lacks) rather than copying the tokenizer directory."""
    if run.tokenizer is None:
        run.tokenizer = load_tokenizer(run.tokenizer_dir)
    return run.tokenizer


def finite_or_none(x: Any) -> Any:
    return None if isinstance(x, float) and not math.isfinite(x) else x


class MetricsLog:
    def __init__(self, run: Run):
        self.path = Path(run.cfg.out) / "metrics.jsonl"
        self.main = run.d.main
        # --report-to: every record also goes to the trackers, with the run record (run.json) as their parameters
        self.trackers = (Trackers(run.cfg.trackers, run.cfg.out, "pretrain",
                                  read_json(Path(run.cfg.out) / RUN_RECORD, TrainingError, expect=dict))
                         if self.main and run.cfg.trackers else None)

    def write(self, record: dict[str, Any]) -> None:
        if not self.main:
            return
        record = {k: finite_or_none(v) for k, v in record.items()}
        try:
            with self.path.open("a") as f:
                f.write(json.dumps(record) + "\n")
        except OSError as exc:  # a full disk, a vanished mount: say where, and that the checkpoints are safe
            raise TrainingError(f"{self.path}: cannot write the metrics log ({exc.strerror or exc}); "
                                f"{last_checkpoint(self.path.parent)}; free space and resume") from exc
        if self.trackers is not None:
            self.trackers.log(record)

    def finish(self, result: dict[str, Any], step: int) -> None:
        """The run's last figures to the trackers, as "final/NAME", and close them."""
        if self.trackers is not None:
            self.trackers.finish({f"final/{k}": v for k, v in result.items() if k not in ("step", "time")}, step)


# --------------------------------------------------------------------------------------------- the loop


def pretrain(cfg: PretrainConfig) -> dict[str, float]:
    """Pretrain as `cfg` says; returns the last logged step's figures and the final held-out evaluation.

    Rank 0 first proves --out writable and locks it (a second run on it is refused, naming this one's pid)."""
    lock = None
    try:
        if int(os.environ.get("RANK", "0")) == 0:
            lock = take_run_dir(cfg.out)
        with TermSignal() as term:
            return run_pretraining(cfg, term)
    except BaseException as e:
        # A raised error's traceback keeps its frames' locals alive, the DDP wrapper among them (train_step's
        # `model`). Clear them, so that the wrapper is really gone before its process group below.
        traceback.clear_frames(e.__traceback__)
        raise
    finally:
        if dist.is_initialized():
            # Drop the DDP wrapper (its reducer holds the process group and pending work objects) before the
            # group itself, on every exit: the other order leaves gloo threads to be torn down at interpreter
            # exit, and under heavy load a rank aborted there (SIGABRT), after a finished run and after a
            # non-finite-loss stop alike.
            gc.collect()
            dist.destroy_process_group()
        if lock is not None:
            lock.release()


SINGLE_SENTENCE_MODES = {"random": "random_document", "split": "split", "skip": "skip"}  # CLI -> dataset names
LABEL_SKEW_WARNING = 0.1  # warn when the share of label 1 is further than this from 1/2


def data_lines(cfg: PretrainConfig, dataset) -> list[str]:
    """The pretraining start line about the data (label balance, random-document B, short targets), and a
    warning when the pair labels are far from 50/50."""
    b = dataset.label_balance(0)
    word = dataset.store.meta["build"].get("word_segmenter")
    lines = [f"data: {b['examples']:,} examples in epoch 0, {b['single_sentence_chunks']:.1%} single-sentence "
             f"chunks (--single-sentence {cfg.single_sentence}), {b['random_b']:.1%} with B from another "
             f"document, {b['short_targets']:.1%} short targets (--short-seq-draw {cfg.short_seq_draw}), masking "
             f"{cfg.mask_unit}s" + (f" ({word} words)" if word and cfg.mask_unit == "word" else "")]
    if cfg.objective != "none":
        lines[0] += f", {cfg.objective.upper()} label 1: {b['label1']:.1%}"
        if abs(b["label1"] - 0.5) > LABEL_SKEW_WARNING:
            lines.append(f"warning: {b['label1']:.0%} of {cfg.objective.upper()} labels are 1 (far from 50/50): "
                         f"{b['single_sentence_chunks']:.0%} of chunks hold one sentence and take B from another "
                         "document; --single-sentence split or skip keeps the labels balanced")
    return lines


def run_pretraining(cfg: PretrainConfig, term: TermSignal | None = None) -> dict[str, float]:
    run = setup(cfg)
    term = term or TermSignal()
    d, log = run.d, MetricsLog(run)
    seq_len = cfg.max_seq_length
    flops_per_token = model_flops_per_token(run.config, seq_len, cfg.max_predictions_per_seq / seq_len)
    if d.main:
        m = cfg.micro_batch_size * seq_len
        # The model's own FFN GEMM; for toy widths also a 1024-wide one, so a tiny model's MFU is not
        # measured against a peak that small shapes never reach anyway.
        run.peak_flops = max(measure_peak_flops(run.device, run.precision, m, run.config.hidden_size,
                                                run.config.intermediate_size),
                             measure_peak_flops(run.device, run.precision, max(m, 1024), 1024, 1024))
        print(f"litebert pretrain: {run.raw_model.num_parameters(exclude_heads=True):,} parameters, "
              f"{run.precision}, {d.world} rank(s) x {cfg.micro_batch_size} x {run.accum} accumulation = batch "
              f"{cfg.batch_size}, {cfg.steps} steps from step {run.step}, peak {run.peak_flops / 1e12:.2f} "
              "TFLOP/s (calibration GEMM)", file=sys.stderr)
        print(cfg.schedule_line(run.schedule == "budget"), file=sys.stderr)
        for line in data_lines(cfg, run.stream.dataset()):
            print(line, file=sys.stderr)
    bar = make_progress(cfg, run.step, d.main)
    # A fixed held-out batch for the representation-health figure at every log step (litebert.health).
    shortest = min(n for _, n in cfg.length_phases)
    health_batch = store_health_batch(run.store, shortest) if d.main and cfg.health else None
    watch = CollapseWatch()
    last = {}
    window_tokens, window_start = 0.0, time.perf_counter()
    started, start_step = time.perf_counter(), run.step
    while run.step < cfg.steps:
        inject_fault("kill", run.step, d.rank)
        inject_fault("stop", run.step, d.rank)
        batches = [run.stream.next(run.step) for _ in range(run.accum)]
        t0 = time.perf_counter()
        try:
            stats = train_step(run, batches)
            synchronize(run.device)
        except (RuntimeError, MemoryError) as e:
            if not is_out_of_memory(e):
                raise
            raise TrainingError(f"step {run.step + 1}: out of memory ({first_line(e)}); lower --micro-batch-size "
                                f"(now {cfg.micro_batch_size}; accumulation keeps the batch) or enable "
                                f"--gradient-checkpointing; {last_checkpoint(cfg.out)}") from None
        if run.step == 0 and cfg.compile and d.main:
            print(f"first step (with compilation) took {time.perf_counter() - t0:.1f}s", file=sys.stderr)
        run.step += 1
        window_tokens += stats["tokens"]
        run.tokens += stats.pop("tokens")
        stop, terminated, run.elapsed = stop_signals(run, time.perf_counter() - started, term.received)
        if run.schedule == "budget":  # the lr of the next step, from the fraction of the budget now used
            run.scheduler.step(budget_progress(run))
        if run.step % cfg.log_every == 0 or run.step == cfg.steps or stop:
            elapsed = time.perf_counter() - window_start
            tps = window_tokens / elapsed
            peak = run.peak_flops * (d.world if run.device.type == "cuda" else 1)
            last = {"step": run.step, **stats, "tokens_per_s": tps, "mfu": flops_per_token * tps / peak,
                    "nan_skipped": run.nan_skipped, "time": time.time(),
                    "elapsed": time.perf_counter() - started}
            declared = False
            if health_batch is not None:
                last.update(representation_health(run.raw_model.albert, health_batch))
                declared = watch.update(run.step, last, past_warmup(run))
                if declared:
                    say(f"litebert pretrain: warning: {collapse_message(last, run.step, watch.first_dip, collapse_advice(cfg))}")
            log.write(last)
            bar(last, eta(last["elapsed"], run.step - start_step, cfg.steps - run.step))
            window_tokens, window_start = 0.0, time.perf_counter()
            if cfg.on_collapse == "stop" and cfg.health and on_any_rank(d, declared):
                save(run)
                raise TrainingError(f"stopped at step {run.step} (--on-collapse stop): the representations stayed "
                                    f"collapsed past the warm-up; {last_checkpoint(cfg.out)}. "
                                    f"{collapse_advice(cfg)}")
        if cfg.eval_every and run.step % cfg.eval_every == 0 and run.step != cfg.steps and not stop:
            log_eval(run, log)
        saved = run.step % cfg.save_every == 0 or run.step == cfg.steps or bool(stop)
        if saved:
            save(run)
        if stop:
            if d.main:
                say(stopping_line(run.step, cfg.steps, stop))
            break
        if run.step < cfg.steps and terminated:
            if not saved:
                save(run)
            raise sigterm_error(run.step, cfg.out, "run the same command again (--resume auto) to continue")
    if health_batch is not None and is_collapsed(last):  # never hand over a collapsed model silently
        warn_collapsed(last, f"{cfg.out}: the final model (step {run.step})")
    # A rerun of a finished run trains nothing: its final evaluation is in the log already.
    result = {**last, "tokens": run.tokens, **log_eval(run, log if run.step > start_step else None)}
    save_final(run, result)
    log.finish(result, run.step)
    return result


def past_warmup(run: Run) -> bool:
    """Is the learning rate past its warm-up ramp (by steps, or by the share of the budget used)?"""
    if run.schedule == "budget":
        return budget_progress(run) > run.cfg.warmup_fraction
    return run.step > run.cfg.warmup


def collapse_advice(cfg: PretrainConfig) -> str:
    """What to change in a collapsed run, from its own settings."""
    return (f"Try a lower --lr (now {cfg.lr:g}) or a longer warm-up (now --warmup-steps {cfg.warmup}); "
            "docs/recipes.md, 'Why pretraining collapsed', has the measured recipes; --on-collapse stop ends such a "
            "run at once")


def on_any_rank(d: Dist, flag: bool) -> bool:
    """`flag` OR-ed over the ranks (rank 0 alone runs the health check; every rank must stop together)."""
    if d.world == 1:
        return flag
    t = torch.tensor([float(flag)])
    d.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item() > 0


def schedule_kind(cfg: PretrainConfig) -> str:
    """What the lr schedule follows, as checkpoints record it: "steps" or "budget"."""
    return "budget" if cfg.budgeted else "steps"


def budget_progress(run: Run) -> float:
    """The fraction of the run done, for BudgetSchedule: the furthest along of the step count, the tokens
    (--max-tokens) and the wall clock (--max-time, over every session: run.elapsed), capped at 1. Tokens and steps
    come back exactly on resume, so a token-budget run resumes bit-exact; the wall clock does not repeat, so a
    time-budget run's lrs depend on the machine's speed (its checkpoint records the seconds spent)."""
    cfg = run.cfg
    fractions = [run.step / cfg.steps]
    if cfg.max_tokens is not None:
        fractions.append(run.tokens / cfg.max_tokens)
    if cfg.max_seconds is not None:
        fractions.append(run.elapsed / cfg.max_seconds)
    return min(1.0, max(fractions))


def stop_signals(run: Run, session: float, sigterm: bool) -> tuple[str, bool, float]:
    """(why the budget stops the run now, "" when it does not; whether any rank got SIGTERM; the --max-time
    seconds spent, earlier sessions included), the same on every rank. Under DDP they are agreed in one all-reduce
    per step: clocks differ between ranks, so rank 0's clock decides, and a SIGTERM on any rank stops them all
    after the same step."""
    cfg = run.cfg
    elapsed = run.clock_before + session
    why = budget_reached(elapsed, cfg.max_time, cfg.max_seconds, run.tokens, cfg.max_tokens, "tokens")
    if run.d.world == 1:
        return why, sigterm, elapsed
    # [rank 0's budget, any SIGTERM, rank 0's clock]
    flags = torch.tensor([1.0 if why and run.d.main else 0.0, float(sigterm), elapsed if run.d.main else 0.0],
                         dtype=torch.float64)
    run.d.all_reduce(flags, op=dist.ReduceOp.MAX)
    budget, terminated, elapsed = flags.tolist()
    return ((why or "the budget was reached on rank 0") if budget > 0 else ""), terminated > 0, elapsed


def save_final(run: Run, result: dict[str, Any] | None = None) -> Path | None:
    """OUT/final/: the model and its tokenizer at the end of the run, the directory to fine-tune from, and its
    model card (with the held-out figures of `result`, the final evaluation)."""
    if not run.d.main:
        return None

    final = Path(run.cfg.out) / "final"
    final.mkdir(parents=True, exist_ok=True)
    for name, write in model_files(run.raw_model).items():
        atomic_write(final / name, write)
    for name, write in run_tokenizer(run).files().items():
        atomic_write(final / name, write)
    (final / FINAL_STEP_FILE).write_text(f"{run.step}\n")
    write_model_card(final, training_record(run, result or {}), parameters=run.raw_model.encoder_parameters())
    print(f"final model (step {run.step}) -> {final}", file=sys.stderr)
    return final


def training_record(run: Run, result: dict[str, Any]) -> Training:
    """What the model card says about this run: the held-out figures are the final evaluation's (eval_*)."""
    cfg = run.cfg
    recipe = {"objective": cfg.objective, "optimizer": cfg.optimizer, "lr": cfg.lr, "batch_size": cfg.batch_size,
              "warmup_steps": cfg.warmup, "max_seq_length": cfg.max_seq_length, "phases": cfg.phases,
              "masked_lm_prob": cfg.masked_lm_prob, "ngram": cfg.ngram, "mask_unit": cfg.mask_unit,
              "weight_decay": cfg.weight_decay, "dropout": cfg.dropout, "precision": run.precision, "seed": cfg.seed}
    random_init = cfg.model in PRESETS or Path(cfg.model).is_file()  # a preset or a config file, not weights
    start = f"random initialisation ({cfg.model})" if random_init else f"the weights of `{cfg.model}`"
    held_out = {k: v for k, v in result.items() if k.startswith("eval_") and k != "eval_examples"}
    results = [Result("held-out", Path(cfg.data).name, run.step, held_out, result.get("eval_examples"))]
    return Training("pretrain", start, cfg.data, run.step, recipe, results if held_out else [], tokens=int(run.tokens))


def measure_seconds_per_step(cfg: PretrainConfig, steps: int = 8) -> float:
    """Wall-clock seconds per optimizer step of `cfg` on this machine, for turning a time budget into a step count.

    Runs a throw-away `steps`-step pretraining in a private temporary directory (cfg.out is never touched, and
    the directory is removed even when the probe fails) and times it from the metrics log's per-step stamps, from
    the end of step 1 to the end of the last step. Set-up, the peak-FLOP calibration, the first step's warm-up, the
    final evaluation and the save are all outside that window, so a slow start does not shrink the budget (it once
    cut a 5-minute demo to under 3).
    """

    if steps < 3:
        raise ConfigError(f"steps={steps}: timing needs at least 3 steps")
    with tempfile.TemporaryDirectory(prefix="litebert-probe-") as tmp:
        out = Path(tmp) / "run"
        pretrain(dataclasses.replace(cfg, out=str(out), steps=steps, log_every=1, eval_every=0, eval_batches=1,
                                     save_every=steps, keep=1, resume="none", tensorboard=False, report_to=None,
                                     max_time=None, max_tokens=None, health=False))
        stamps = [r["time"] for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines())
                  if "loss" in r]
    return max(stamps[-1] - stamps[0], 1e-6) / (len(stamps) - 1)


def log_eval(run: Run, log: MetricsLog | None) -> dict[str, float]:
    result: dict[str, float] = {}
    if run.d.main:
        result = held_out_eval(run.raw_model, run.store, run.cfg, run.precision)
        if result and log is not None:
            log.write({"step": run.step, **result})
            # The [MASK]-position figure and its baselines first (litebert.mlm_scores); all of them are in the log.
            pairs = " ".join(f"{k}={result[k]:.4f}" for k in ("eval_mlm_loss", "eval_sop_acc", "eval_nsp_acc")
                             if isinstance(result.get(k), float))
            say(f"eval {summary_line(result)}; {pairs}")
    run.d.barrier()
    return result


def make_progress(cfg: PretrainConfig, start: int, main: bool):
    """A tqdm bar on a terminal, plain log lines otherwise; returns the per-log-step update function."""
    if not main:
        return lambda rec, eta_s=None: None
    keys = ("loss", "mlm_acc", "sop_acc", "health_spread", "lr", "tokens_per_s", "mfu")
    if on_terminal():
        bar = make_bar(cfg.steps, start, "pretrain")

        def update(rec, eta_s=None):
            bar.update(rec["step"] - bar.n)
            bar.set_postfix_str(" ".join(f"{SHORT[k] if k in SHORT else k}={rec[k]:.3g}"
                                         for k in ("loss", "mlm_acc", "sop_acc", "lr") if rec.get(k) is not None))
        return update

    def line(rec, eta_s=None):
        print(f"step {rec['step']}/{cfg.steps} " + " ".join(
            f"{k}={rec[k]:.4g}" for k in keys if rec.get(k) is not None)
            + f" elapsed={format_seconds(rec['elapsed'])} eta={format_seconds(eta_s)}", file=sys.stderr, flush=True)
    return line



# Short names in the progress bar's postfix, so the bar stays readable at 80 columns.
SHORT = {"mlm_acc": "mlm", "sop_acc": "sop"}
