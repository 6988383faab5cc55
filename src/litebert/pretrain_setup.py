"""Everything a pretraining run needs before its first step, built by `setup()`: the model (fresh, or continued
from a model directory's weights), optimizer and schedule, the data stream, the run directory and the checkpoint
it resumes from (`resume_from`, `restore`), checked against the run's record (run.json) so that a resume never
mixes two stores, models or recipes. The loop itself is litebert.pretrain's."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from litebert.config import ADDED_FIELDS, PRESETS, RETIRED_FIELDS, AlbertConfig
from litebert.data.pretraining import BatchStream, PretrainingDataset
from litebert.data.store import TokenStore
from litebert.device import resolve_precision
from litebert.distributed import Dist, check_same_run_dir, check_same_store, init_distributed, on_all_ranks
from litebert.errors import CheckpointError, ConfigError, TokenizerError, TrainingError
from litebert.files import atomic_write, check_output, read_json
from litebert.hub_cache import resolve_model_path
from litebert.memory import check_training_memory
from litebert.mlm_scores import piece_table
from litebert.model import AlbertForPreTraining, branch_scale_for_depth
from litebert.optim import BudgetSchedule, build_optimizer, make_scheduler
from litebert.pretrain_config import SINGLE_SENTENCE_MODES, PretrainConfig, schedule_kind
from litebert.pretrained import WEIGHTS_NAME, load_checked, read_model_state
from litebert.rundir import RUN_RECORD, resolve_model_dir
from litebert.runlife import (RunDir, changed_fields, check_state_keys, read_checkpoint, restore_rng,
                              restore_training)
from litebert.tokenizer import load_tokenizer


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
    branch_scale: float | None = None  # the residual-branch factor a fresh model started with; None: from weights

    @property
    def run_dir(self) -> RunDir:
        """--out, with the run-directory lifecycle pretraining shares with fine-tuning (litebert.runlife)."""
        return RunDir(self.cfg.out, WHO)


WHO = "litebert pretrain"  # what its lines on stderr start with


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


def branch_scale(cfg: PretrainConfig, config: AlbertConfig) -> float:
    """--branch-init-scale, or by default DeepNet's beta for the model's depth (branch_scale_for_depth)."""
    return cfg.branch_init_scale if cfg.branch_init_scale is not None else branch_scale_for_depth(
        config.num_hidden_layers)


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
    branches = None if init_dir is not None else branch_scale(cfg, config)  # a fresh model's branch factor
    if init_dir is not None:
        start_from(raw, init_dir, d.main)
    else:
        if cfg.projection_init != "official":  # (official: as init_weights drew it, the same model as before)
            raw.init_projection(cfg.projection_init)
        raw.init_branches(branches)
        if cfg.mlm_bias_init == "unigram":
            with torch.no_grad():  # the store's piece frequencies: the MLM guesses them from step 0 (docs/recipes.md)
                raw.mlm.bias.copy_(torch.from_numpy(piece_table(store).log_prior()))
    raw.to(device)
    # MLM only: the pooler and the SOP head get zero gradients, and left in the optimizer its weight decay would
    # erase them (LAMB: to exactly 0), handing fine-tuning a pooler that maps every sentence to 0.
    untrained = ("albert.pooler.", "sop.") if cfg.objective == "none" else ()
    optimizer = build_optimizer(raw, cfg.optimizer, lr=cfg.lr, weight_decay=cfg.weight_decay, untrained=untrained,
                                no_decay_lr_scale=cfg.no_decay_lr_scale, bias_correction=cfg.bias_correction,
                                projection_lr_scale=cfg.projection_lr_scale)
    # A budgeted run does not know its step count: its schedule follows the budget's fraction used
    # (budget_progress), so a run that stops at its budget has finished warm-up and decay.
    scheduler = (BudgetSchedule(optimizer, cfg.warmup_fraction, cfg.poly_power) if cfg.budgeted
                 else make_scheduler(optimizer, cfg.warmup, cfg.steps, cfg.poly_power))
    scaler = torch.amp.GradScaler("cuda", enabled=precision == "fp16")

    run_dir = RunDir(cfg.out, WHO)
    on_all_ranks(d, lambda: run_dir.create() if d.main else None)
    check_same_run_dir(d, run_dir.path)
    stream = BatchStream(functools.partial(train_dataset, cfg, store), cfg.length_phases, cfg.steps,
                         cfg.micro_batch_size, rank=d.rank, world=d.world, seed=cfg.seed, num_workers=cfg.num_workers)
    run = Run(cfg, d, device, precision, config, raw, raw, optimizer, scheduler, scaler, stream, store,
              tokenizer_dir, accum, schedule=schedule_kind(cfg), branch_scale=branches)
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
                 "warmup_steps", "lr", "weight_decay", "poly_power", "no_decay_lr_scale", "projection_lr_scale",
                 "projection_init", "branch_init_scale", "max_grad_norm", "dropout", "seed")


def resume_from(run: Run) -> None:
    """Restore the checkpoint this run continues from (if any), then drop logged lines past its step, so the
    metrics log never holds a step twice (also after a crash before the first save)."""
    cfg, d, run_dir = run.cfg, run.d, run.run_dir
    on_all_ranks(d, lambda: check_output(run_dir.path) if d.main else None)
    if cfg.resume == "none":
        if run_dir.has_checkpoints():
            raise TrainingError(f"{run_dir.path} already holds checkpoints; use --resume auto or another --out")
    elif cfg.resume == "auto":
        # The run directory's one resume policy (RunDir.resume_point), on rank 0; every rank loads the checkpoint
        # it picked (not each its own newest).
        found = on_all_ranks(d, lambda: run_dir.resume_point() if d.main else None)
        ckpt = d.broadcast(found[0] if found else None)
        if ckpt is not None:
            restore(run, ckpt, *on_all_ranks(d, lambda: found[1:] if d.main else read_checkpoint(ckpt)))
    else:
        ckpt = Path(cfg.resume)  # an explicit path must be complete and verify too
        restore(run, ckpt, *on_all_ranks(d, lambda: read_checkpoint(ckpt)))
    if d.main:
        run_dir.continue_at(run.step)


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
