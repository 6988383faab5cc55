"""A fine-tuning run directory: what it holds (RUN/best/, metrics.jsonl, finetune.json, result.json, the
checkpoint a stopped run resumes from), refusing or replacing a finished run, the recipe check on resume, and the
atomic saves of the loop's state and of best/ (the lifecycle itself, lock and SIGTERM, is litebert.runlife's)."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
from pathlib import Path


from litebert.finetune_config import FinetuneConfig
from litebert.checkpoint import checkpoint_dirs, cleanup_incomplete, find_latest_checkpoint
from litebert.errors import CheckpointError, ConfigError
from litebert.files import atomic_write, fsync_dir, move_into_place, read_json
from litebert.model_card import Training, write_model_card
from litebert.pretrained import model_files
from litebert.runlife import RunDir, changed_fields, check_state_keys, restore_rng, restore_training, rng_state


RUN_OUTPUTS = ("metrics.jsonl", "best", "result.json")


def run_dir(out_dir: str | Path) -> RunDir:
    """A fine-tuning --out, with the run-directory lifecycle fine-tuning shares with pretraining."""
    return RunDir(out_dir, "litebert finetune")


def clear_previous_run(out_dir: Path, model_dir: Path, overwrite: bool) -> tuple[Path | None, bool]:
    """Refuse an --out that already holds a finished fine-tuning run, or with --overwrite remove that run's outputs
    (never the model being fine-tuned: fine-tuning a run's own best/ into the same --out is refused either way).
    An unfinished run (a checkpoint, no result.json: stopped by SIGTERM, --max-time or a crash) is resumed instead:
    (its newest complete checkpoint, False) is returned (which one verifies is decided when it is read:
    RunDir.resume_point). One stopped before its first checkpoint (a full disk, a crash), whose finetune.json says
    what it was, is restarted from step 0 over what it left: (None, True); its best/ stays until the restart does
    as well (kept_best). Else (None, False): a fresh run. Which checkpoint is resumed is RunDir.resume_point's
    choice, as in pretraining: this decides only whether to resume."""
    if out_dir.is_dir():
        cleanup_incomplete(out_dir)  # what a save cut short left behind
    found = [name for name in RUN_OUTPUTS if (out_dir / name).exists()]
    found += [p.name for p in checkpoint_dirs(out_dir)] if out_dir.is_dir() else []
    if not found:
        return None, False
    if not overwrite and not (out_dir / "result.json").exists():
        latest = find_latest_checkpoint(out_dir)
        if latest is not None:
            return latest, False
        if (out_dir / "finetune.json").is_file():
            return None, True
    if not overwrite:
        raise ConfigError(f"--out {out_dir} already holds a fine-tuning run ({', '.join(found)}); pass --overwrite "
                          f"to replace it, or choose another --out")
    if any(model_dir.resolve().is_relative_to((out_dir / name).resolve()) for name in found):
        raise ConfigError(f"--model {model_dir} lies inside --out {out_dir}, which --overwrite would delete; "
                          f"choose another --out")
    for name in found:
        path = out_dir / name
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    return None, False


def kept_best(out_dir: Path, main_metric: str) -> dict:
    """The loop's best record for a run restarted from step 0 over the best/ an earlier session left (it stopped
    before its first checkpoint): the bar is best/'s main metric (eval_metrics.json), and best/ is replaced only by
    an evaluation that reaches it ("kept": the same run, redone, rewrites it at the same step). No best/: no bar."""
    if not (out_dir / "best").exists():
        return {"score": -math.inf}
    path = out_dir / "best" / "eval_metrics.json"
    hint = "pass --overwrite to start over without it, or use another --out"
    saved = read_json(path, CheckpointError, expect=dict, hint=hint)
    score = saved.get(main_metric)
    if not isinstance(score, (int, float)) or isinstance(score, bool) or not math.isfinite(score):
        raise CheckpointError(f"{path}: {main_metric!r} is {score!r}, not a number; {hint}")
    return {"score": float(score), "step": saved.get("step"), "kept": True, "collapsed": {},
            "metrics": {k: v for k, v in saved.items() if k not in ("step", "split")}}


# What a resume restores must equal what the run would have used: a change to any of these would splice two
# recipes into one run (the data order, the schedule, the model). Output-only settings may change.


MAY_CHANGE_ON_RESUME = ("out", "device", "threads", "eval_batch_size", "log_every", "overwrite", "precision",
                        "max_time")


def check_same_recipe(record: Path, cfg: FinetuneConfig) -> None:
    """Refuse to resume a run recorded in `record` (finetune.json) with other settings, naming them."""
    saved = read_json(record, CheckpointError, expect=dict, hint="use a new --out or --overwrite")
    now = dataclasses.asdict(cfg)
    changed = changed_fields(saved, now, [k for k in now if k not in MAY_CHANGE_ON_RESUME])
    if changed:
        raise ConfigError(f"{record}: the unfinished run in {record.parent} was made with " + ", ".join(changed)
                          + "; resume it with its settings, start over with --overwrite, or use another --out")


LOOP_STATE = ("step", "optimizer", "scheduler", "rng", "best", "stale", "epoch", "queue")


def save_loop_state(out_dir: Path, step: int, model, optimizer, scheduler, loop: dict) -> None:
    """checkpoint-STEP/ (atomic, the one before it removed): the weights and everything the loop needs to go on
    exactly as if it had not stopped (optimizer, schedule, every RNG, epoch and the rest of its batch order, best
    score)."""
    state = {"step": step, "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
             "rng": rng_state(), "best": loop["best"], "stale": loop["stale"], "epoch": loop["epoch"],
             "queue": [[int(i) for i in batch] for batch in loop["queue"]]}
    run_dir(out_dir).save(step, model_files(model, "litebert"), state, keep=1)


def read_loop_state(out_dir: Path, model, optimizer, scheduler) -> tuple[Path, dict]:
    """Put the newest checkpoint that verifies into place (weights, optimizer, schedule, RNG); return it and the
    loop's own state."""
    found = run_dir(out_dir).resume_point()  # the resume policy pretraining follows too
    if found is None:
        raise CheckpointError(f"{out_dir}: its checkpoint vanished before it could be read; run again")
    ckpt, state, weights = found
    check_state_keys(ckpt, state, LOOP_STATE, "a litebert fine-tuning state")
    restore_training(ckpt, state, weights, model, optimizer, scheduler,
                     hint="start over with --overwrite or use another --out")
    restore_rng(state["rng"])
    return ckpt, state


def save_best(model, tokenizer, out_dir: Path, eval_metrics: dict, training: Training | None = None) -> None:
    """best/ as a whole: weights, tokenizer, model card and eval_metrics.json are written into a temporary sibling
    and swapped in, so a failed save (a full disk) leaves the previous best/ complete, never weights and metrics of
    different steps or a best/ without its tokenizer."""
    tmp = out_dir / f".best.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        model.save_pretrained(tmp, tokenizer=tokenizer)
        write_model_card(tmp, training, location=out_dir / "best", parameters=model.encoder_parameters())  # the run's card, named for where it lands
        write_json(tmp / "eval_metrics.json", eval_metrics)
        fsync_dir(tmp)
        aside = move_into_place(tmp, out_dir / "best")
        fsync_dir(out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)


def write_json(path: Path, obj: dict) -> None:
    """A run record, whole or not at all (a torn finetune.json would refuse the resume; a torn result.json would
    mark a run finished that cannot be read)."""
    text = json.dumps(obj, indent=2, default=str) + "\n"
    atomic_write(path, lambda tmp: tmp.write_text(text))


def run_record(model_dir: str | Path) -> dict:
    """The settings a fine-tuning run recorded (RUN/finetune.json, beside best/), or {} for a bare model dir."""
    path = Path(model_dir)
    for candidate in (path / "finetune.json", path.parent / "finetune.json"):
        if candidate.is_file() and (candidate.parent / "best").is_dir():
            return read_json(candidate, CheckpointError, expect=dict)
    return {}
