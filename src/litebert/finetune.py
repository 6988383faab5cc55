"""Fine-tuning: one loop for every task (`finetune(FinetuneConfig)`).

A task is data (`litebert.data.tasks.TaskSpec`); what differs between head families (sentence classification
or regression, token tagging, span QA, multiple choice) is only how features are made and how outputs become
metrics. That lives in the family's class (litebert.families, named by litebert.heads), the same prediction path
`evaluate`/`predict` (litebert.scoring), the pipeline and `serve` run; the loop itself is shared. Its settings:
litebert.finetune_config; what it sets up: litebert.finetune_setup; its run directory: litebert.finetune_run.

Run dir layout: `RUN_DIR/best/` (the checkpoint with the best dev score on the task's main metric, as the
official scripts keep `model.ckpt-best`), `RUN_DIR/metrics.jsonl`, `RUN_DIR/finetune.json` (the settings).
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from litebert import heads
from litebert.data.tasks import (OUR_DEFAULTS, TaskSpec, feature_length, label_list_for,
                                 pad_features)
from litebert.device import autocast, pick_device, resolve_precision
from litebert.errors import ConfigError, DataFormatError, LitebertError
from litebert.faults import inject_fault
from litebert.health import is_collapsed, warn_collapsed
from litebert.optim import build_optimizer, make_scheduler
from litebert.progress import eta, format_seconds, make_bar, on_terminal, say
from litebert.records import identity_dict
from litebert.rundir import resolve_model_dir
from litebert.runners import TorchRunner
from litebert.runlife import TermSignal, budget_reached, holding_run_dir, sigterm_error, stopping_line
from litebert.tracking import Trackers, parse_report_to

from litebert.collapse import collapse_warning
from litebert.finetune_config import FinetuneConfig, resolve_hparams, resolve_task, warmup_for
from litebert.finetune_run import (check_same_recipe, clear_previous_run, kept_best, read_loop_state, run_dir,
                                   save_best, save_loop_state, write_json)
from litebert.finetune_setup import (check_dev_source, length_grouped_batches, load_task_model, read_split,
                                     record_for, start_health, training_record)

__all__ = ["FinetuneConfig", "finetune"]


@dataclass
class Setup:
    """What the loop runs on: the resolved settings, the task, its splits and features, the model and its family's
    prediction path (over the live model), and the checkpoint to resume from (None: a fresh run)."""
    cfg: FinetuneConfig
    spec: TaskSpec
    out_dir: Path
    train: Any
    dev: Any
    train_feats: list[dict]
    dev_feats: list[dict]
    model: Any
    tokenizer: Any
    fam: Any
    device: torch.device
    precision: str
    health: dict[str, float]
    steps: int
    eval_every: int
    resume: Path | None
    restart: bool  # stopped before its first checkpoint: run again from step 0, keeping best/ (kept_best)


def prepare(cfg: FinetuneConfig) -> Setup:
    """Everything before the first step: checks that refuse bad runs before any work, the schedule, the model."""
    spec = resolve_task(cfg)
    cfg = dataclasses.replace(cfg, model=str(resolve_model_dir(cfg.model)))
    resume, restart = clear_previous_run(Path(cfg.out), Path(cfg.model), cfg.overwrite)
    check_dev_source(spec, cfg)
    train = read_split(spec, cfg, "train", limit=cfg.max_train_examples)
    if not train:
        raise DataFormatError(f"{cfg.data}: no training examples")
    # A subset (--max-train-examples) or a folder far smaller than the official set: the paper's step count, sized
    # for the full set, would mean hundreds of epochs, so the schedule is in epochs.
    subset = len(train) < train.available or not spec.hparams.sized_for(train.available)
    cfg = resolve_hparams(cfg, spec, subset=subset)
    torch.manual_seed(cfg.seed)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    device = pick_device(cfg.device)
    precision = resolve_precision(cfg.precision, device)
    out_dir = Path(cfg.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    if resume is not None or restart:
        check_same_recipe(out_dir / "finetune.json", cfg)
    write_json(out_dir / "finetune.json", dataclasses.asdict(cfg))

    label_list = label_list_for(spec, train) if heads.family(spec.head).has_labels else None
    dev = read_split(spec, cfg, spec.eval_splits[0], label_list=label_list, limit=cfg.max_eval_examples)
    model, tokenizer = load_task_model(cfg.model, label_list, spec, cfg)
    record = record_for(spec, cfg, label_list, precision)
    model.identity = identity_dict(record)  # saved beside the weights of best/
    if cfg.reinit_pooler:
        if model.albert.pooler is None:
            raise ConfigError(f"--reinit-pooler: {cfg.model} has no pooler")
        model.albert.pooler.apply(model._init_module)  # drawn from the seeded RNG: reproducible per --seed
    model.to(device)
    # The prediction path of the family (litebert.families), over the live model: training's dev scores are
    # computed exactly as `evaluate` computes them on the saved model.
    family = heads.family(spec.head)
    fam = family.family_class()(record, tokenizer, TorchRunner(model, family.fields, device, precision),
                                cfg.eval_batch_size, label_list)
    train_feats = fam.encode(train)
    health = start_health(model, train_feats, tokenizer.pad_id)
    if is_collapsed(health):
        warn_collapsed(health, f"--model {cfg.model}")
    steps = cfg.steps or max(1, math.ceil(cfg.epochs * len(train_feats) / cfg.batch_size))
    print(start_line(cfg, spec, train, dev, len(train_feats), steps, precision, subset), file=sys.stderr,
          flush=True)
    eval_every = cfg.eval_every or max(1, math.ceil(len(train_feats) / cfg.batch_size))
    return Setup(cfg, spec, out_dir, train, dev, train_feats, fam.encode(dev), model, tokenizer, fam, device,
                 precision, health, steps, eval_every, resume, restart)


@holding_run_dir(lambda cfg: cfg.out)
def finetune(cfg: FinetuneConfig) -> dict[str, Any]:
    run = prepare(cfg)
    cfg, model, fam, device, steps = run.cfg, run.model, run.fam, run.device, run.steps
    accum = cfg.batch_size // cfg.micro_batch_size
    optimizer = build_optimizer(model, cfg.optimizer, lr=cfg.lr, weight_decay=cfg.weight_decay)
    scheduler = make_scheduler(optimizer, warmup_for(cfg, steps), steps)
    lengths = [feature_length(f) for f in run.train_feats]
    loop: dict[str, Any] = {"best": {"score": -math.inf}, "stale": 0, "epoch": 0, "queue": []}
    step, stop = 0, ""
    if run.resume is not None:
        ckpt, state = read_loop_state(run.out_dir, model, optimizer, scheduler)
        loop, step = {k: state[k] for k in ("best", "stale", "epoch", "queue")}, state["step"]
        run_dir(run.out_dir).continue_at(step)
        say(f"resumed from {ckpt} at step {step}")
    elif run.restart:
        best = loop["best"] = kept_best(run.out_dir, run.spec.main_metric)
        kept = (f"; its best/ (step {best['step']}, {run.spec.main_metric} {best['score']:.4f}) stays until the "
                "restart does as well") if best.get("kept") else ""
        say(f"restarting {run.out_dir} from step 0: it stopped before its first checkpoint{kept}")
    log = (run.out_dir / "metrics.jsonl").open("a" if run.resume is not None else "w")
    # --report-to: the records below also go to the trackers, with the run record (finetune.json) as parameters
    trackers = Trackers(parse_report_to(cfg.report_to), run.out_dir, "finetune", dataclasses.asdict(cfg))
    bar = _progress(steps, cfg.log_every, cfg.max_seconds)
    t0 = time.perf_counter()
    with TermSignal() as term:  # SIGTERM: finish the step, save a checkpoint, stop
        while step < steps:
            model.train()
            for _ in range(accum):
                if not loop["queue"]:
                    loop["queue"] = length_grouped_batches(lengths, cfg.micro_batch_size, cfg.seed, loop["epoch"])
                    loop["epoch"] += 1
                batch = pad_features([run.train_feats[i] for i in loop["queue"].pop()], run.tokenizer.pad_id)
                inputs = {k: batch[k].to(device) for k in fam.model_keys}
                targets = {k: v.to(device) for k, v in fam.targets(batch).items()}
                with autocast(run.precision, device):
                    loss = model(**inputs, **targets).loss / accum
                loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
            if not math.isfinite(loss.item()) or not math.isfinite(grad_norm.item()):
                raise LitebertError(f"step {step}: non-finite loss {loss.item()} or gradient; lower --lr")
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            scheduler.step()
            step += 1
            if step % cfg.log_every == 0 or step == steps:
                _write(log, trackers, {"step": step, "loss": loss.item() * accum, "lr": scheduler.get_last_lr()[0],
                                       "grad_norm": grad_norm.item(), "epoch": loop["epoch"],
                                       "elapsed": time.perf_counter() - t0})
            bar(step, loss.item() * accum, scheduler.get_last_lr()[0], time.perf_counter() - t0)
            if (step % run.eval_every == 0 or step == steps) and evaluate_dev(run, loop, step, log, trackers, t0):
                break  # early stop (--patience)
            inject_fault("stop", step, 0)  # (tests: a real SIGTERM arrives while the process is stopped here)
            # --max-time: this session's clock; the schedule stays over `steps`, so stopping changes nothing else
            stop = budget_reached(time.perf_counter() - t0, cfg.max_time, cfg.max_seconds) if step < steps else ""
            if term.received or stop or step % run.eval_every == 0 or step == steps:  # the last one resumes the run
                save_loop_state(run.out_dir, step, model, optimizer, scheduler, loop)
            if term.received:
                log.close()
                raise sigterm_error(step, run.out_dir)
            if stop:
                say(stopping_line(step, steps, stop, "the same command with a larger --max-time, or none, goes on"))
                break
    log.close()
    return finish(run, loop["best"], step, stop, trackers)


def evaluate_dev(run: Setup, loop: dict, step: int, log, trackers: Trackers, t0: float) -> bool:
    """Score the dev split through the family's prediction path; keep best/ when the score improves. True: stop
    early (--patience evaluations without a gain)."""
    spec, split = run.spec, run.spec.eval_splits[0]
    outputs = run.fam.run(run.dev_feats)
    metrics = run.fam.score(run.dev, run.dev_feats, outputs, spec)
    score = metrics[spec.main_metric]
    collapsed = run.fam.collapse(run.dev, run.dev_feats, outputs, spec)
    _write(log, trackers, {"step": step, "split": split, **metrics, **collapsed})
    say(f"step {step}: {split} " + " ".join(f"{k}={v:.4f}" for k, v in metrics.items() if isinstance(v, float))
        + f" elapsed={format_seconds(time.perf_counter() - t0)}")
    if collapsed:
        say(collapse_warning(collapsed, split, step))
    best = loop["best"]
    if score > best["score"] or (best.get("kept") and score >= best["score"]):
        loop["best"], loop["stale"] = {"score": score, "step": step, "metrics": metrics, "collapsed": collapsed}, 0
        save_best(run.model, run.tokenizer, run.out_dir, {"step": step, "split": split, **metrics, **collapsed},
                  training_record(run.cfg, spec, len(run.train), len(run.dev), step, metrics, collapsed))
        return False
    loop["stale"] += 1
    if run.cfg.patience and loop["stale"] >= run.cfg.patience:
        say(f"early stop at step {step}: no gain in {loop['stale']} evaluations")
        return True
    return False


def finish(run: Setup, best: dict, step: int, stop: str, trackers: Trackers) -> dict[str, Any]:
    """The run's result; written as result.json (the mark of a finished run) unless it stopped early."""
    spec = run.spec
    trackers.finish({"best/step": best.get("step"), **{f"best/{k}": v for k, v in best.get("metrics", {}).items()}},
                    step)
    result = {"task": spec.name, "main_metric": spec.main_metric, "best_step": best.get("step"),
              "best": best.get("metrics", {}), "steps": step, "train_examples": len(run.train),
              "dev_examples": len(run.dev), "start_health": run.health}
    if stop:  # unfinished: no result.json, so the same command resumes from the checkpoint just saved
        return {**result, "stopped": stop}
    if best.get("collapsed"):  # the kept model's degenerate answer, for tables that aggregate runs (ablate)
        result["collapse"] = best["collapsed"]
        result["warnings"] = [collapse_warning(best["collapsed"], spec.eval_splits[0], best["step"])]
    write_json(run.out_dir / "result.json", result)
    return result


def start_line(cfg: FinetuneConfig, spec: TaskSpec, train, dev, n_features: int, steps: int, precision: str,
               subset: bool) -> str:
    """What this run will do, before it does it: a run's numbers are readable only next to these."""
    per_step = cfg.batch_size
    epochs = steps * per_step / max(n_features, 1)
    if cfg.steps is not None and cfg.epochs is None and spec.hparams.train_steps == cfg.steps:
        why = f"{spec.hparams.source} steps"
    elif subset and cfg.epochs == OUR_DEFAULTS.num_train_epochs and cfg.steps is None:
        held = (f"a subset ({len(train)} of {train.available})" if len(train) < train.available else
                f"{len(train)} rows, far fewer than the {spec.hparams.train_examples} the paper's steps are sized for")
        why = (f"{cfg.epochs:g} epochs: the training set is {held}, so the paper's step count, sized for the full "
               "set, is not used")
    else:
        why = f"{cfg.epochs:g} epochs" if cfg.steps is None else "--steps"
    accum = (f" ({cfg.micro_batch_size} x {cfg.batch_size // cfg.micro_batch_size} accumulation)"
             if cfg.micro_batch_size < cfg.batch_size else "")
    of = f" (of {train.available})" if len(train) < train.available else ""
    return (f"litebert finetune: {spec.name} from {cfg.model}; {len(train)} train examples"
            f"{of}, {len(dev)} dev; {steps} steps = {epochs:.2f} epochs "
            f"({why}); batch {cfg.batch_size}{accum}, lr {cfg.lr:g}, warmup {warmup_for(cfg, steps)} "
            f"steps, max_seq_length {cfg.max_seq_length}, {precision}; " + stop_words(cfg, steps))


def stop_words(cfg: FinetuneConfig, steps: int) -> str:
    """What ends the run, for the start line."""
    if cfg.max_seconds is None:
        return f"stops after step {steps}"
    return (f"stops after step {steps} or at --max-time {cfg.max_time} of this session, whichever comes first "
            "(the schedule stays over the steps)")


def _write(f, trackers: Trackers, record: dict) -> None:
    """One metrics record: a line of metrics.jsonl, and the same figures to the --report-to trackers."""
    clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in record.items()}
    f.write(json.dumps(clean) + "\n")
    f.flush()
    trackers.log(record)


def _progress(total: int, log_every: int, max_seconds: float | None = None):
    """Per-step update: a tqdm bar on a terminal; otherwise a log line every `log_every` steps (and the last), whose
    eta is the nearer of the steps' and --max-time's ends."""
    if not on_terminal():
        def line(step, loss, lr, elapsed):
            if step % log_every == 0 or step == total:
                time_left = None if max_seconds is None else max_seconds - elapsed
                say(f"step {step}/{total} loss={loss:.4f} lr={lr:.3g} elapsed={format_seconds(elapsed)} "
                    f"eta={format_seconds(eta(elapsed, step, total - step, time_left))}")
        return line
    bar = make_bar(total, desc="finetune")

    def update(step, loss, lr, elapsed):
        bar.update(step - bar.n)
        bar.set_postfix_str(f"loss={loss:.4f} lr={lr:.2g}")
    return update
