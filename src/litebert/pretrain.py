"""ALBERT pretraining: `setup()` builds everything, then `pretrain()` is one training loop you can read.

This module is the loop: one step (`train_step`), the loop around it (`run_pretraining`: logging, evaluation,
checkpoints, budgets, SIGTERM) and what the loop writes (checkpoints, final/, metrics.jsonl). Its settings are
litebert.pretrain_config's, everything before the first step litebert.pretrain_setup's, the held-out scoring
litebert.pretrain_eval's.

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
import gc
import json
import math
import os
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F

from litebert.device import autocast, first_line, is_out_of_memory, measure_peak_flops, synchronize
from litebert.distributed import Dist
from litebert.errors import ConfigError, TrainingError
from litebert.faults import inject_fault
from litebert.files import atomic_write, read_json
from litebert.health import (CollapseWatch, collapse_message, dip_message, is_collapsed, representation_health,
                             store_health_batch, warn_collapsed)
from litebert.mlm_scores import summary_line
from litebert.model import masked_lm_loss, model_flops_per_token, predicted_ids
from litebert.model_card import Result, Training, write_model_card
from litebert.pretrain_config import PretrainConfig
from litebert.pretrain_eval import held_out_eval
from litebert.pretrain_setup import WHO, Run, setup
from litebert.pretrained import model_files
from litebert.progress import eta, format_seconds, make_bar, on_terminal, say
from litebert.rundir import FINAL_STEP_FILE, RUN_RECORD
from litebert.runlife import RunDir, TermSignal, budget_reached, rng_state, sigterm_error, stopping_line
from litebert.tokenizer import load_tokenizer
from litebert.tracking import Trackers

__all__ = ["PretrainConfig", "pretrain"]  # the public API; the loop's parts are importable for tests and benchmarks


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
                                        ((predicted_ids(out.mlm_logits) == b["masked_ids"]) * w).sum().float(),
                                        sop.detach().float(),
                                        (predicted_ids(out.sop_logits) == b["sop_labels"]).sum().float()]))
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
                                f"grad norm {grad_norm_value:.4g}); {run.run_dir.last_checkpoint()}. Use "
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


# --------------------------------------------------------------------------------------------- save, log


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
        path = run.run_dir.save(run.step, files, state, keep=run.cfg.keep)
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
        self.run_dir = run.run_dir
        self.path = self.run_dir.metrics
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
                                f"{self.run_dir.last_checkpoint()}; free space and resume") from exc
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
            lock = RunDir(cfg.out, WHO).take()
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
        if run.branch_scale is not None and run.step == 0:
            print(f"init: {cfg.model} drawn as the official code does, residual branches x {run.branch_scale:.3g} "
                  f"(--branch-init-scale; default (8 x {run.config.num_hidden_layers} layers)^-1/4)", file=sys.stderr)
        for line in data_lines(cfg, run.stream.dataset()):
            print(line, file=sys.stderr)
    bar = make_progress(cfg, run.step, d.main)
    # A fixed held-out batch for the representation-health figure at every log step (litebert.health).
    shortest = min(n for _, n in cfg.length_phases)
    health_batch = store_health_batch(run.store, shortest) if d.main and cfg.health else None
    watch = CollapseWatch()
    last = {}
    window_tokens, window_start = 0.0, time.perf_counter()
    started, start_step, start_tokens = time.perf_counter(), run.step, run.tokens
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
                                f"--gradient-checkpointing; {run.run_dir.last_checkpoint()}") from None
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
                event = watch.update(run.step, last, past_warmup(run))
                declared = event == "collapsed"
                if declared:
                    say(f"litebert pretrain: warning: {collapse_message(last, run.step, watch.first_dip, collapse_advice(cfg))}")
                elif event == "dip":
                    say(f"litebert pretrain: note: {dip_message(last, run.step, watch.first_dip)}")
            log.write(last)
            bar(last, budget_eta(run, last["elapsed"], run.step - start_step, run.tokens - start_tokens))
            window_tokens, window_start = 0.0, time.perf_counter()
            if cfg.on_collapse == "stop" and cfg.health and on_any_rank(d, declared):
                save(run)
                raise TrainingError(f"stopped at step {run.step} (--on-collapse stop): the representations stayed "
                                    f"collapsed past the warm-up; {run.run_dir.last_checkpoint()}. "
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


def budget_eta(run: Run, session_seconds: float, session_steps: int, session_tokens: float) -> float | None:
    """Seconds until whichever budget ends the run first (--steps or --max-tokens at this session's pace, or what
    is left of --max-time), so a time-budget run with a large --steps shows its real end, not the steps' pace."""
    cfg = run.cfg
    tokens_left = (eta(session_seconds, session_tokens, max(0.0, cfg.max_tokens - run.tokens))
                   if cfg.max_tokens is not None else None)
    time_left = cfg.max_seconds - run.elapsed if cfg.max_seconds is not None else None
    return eta(session_seconds, session_steps, cfg.steps - run.step, tokens_left, time_left)


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
    random_init = run.branch_scale is not None  # set by setup exactly when no weights were loaded
    if random_init:
        recipe["branch_init_scale"] = round(run.branch_scale, 4)
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
