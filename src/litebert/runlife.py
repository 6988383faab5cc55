"""A training run's directory, from start to stop: what `pretrain` and `finetune` share.

    the run dir             RunDir: the lock (one process per --out), the one resume policy (resume_point: the
                            newest checkpoint whose every file verifies against its COMMIT), continue_at (the
                            metrics log cut back to the step resumed), save (checkpoint-STEP/, atomic, keep-K)
    recipe check            changed_fields: a resume with other settings is refused, naming each changed flag
    state                   rng_state (python `random`, numpy, torch CPU, CUDA when present), saved with the
                            weights (safetensors) and loaded with torch.load(weights_only=True): read_checkpoint
    restore                 restore_training (weights, optimizer, schedule), restore_rng
    stop                    budgets (parse_duration, budget_reached, stopping_line) and SIGTERM (TermSignal,
                            sigterm_error): finish the step, save, exit with one line

What differs stays with each trainer: pretraining's data stream, torchrun agreement, budget schedule and --resume
none/PATH (pretrain.py, pretrain_setup.py); fine-tuning's batch queue, best/, and its rule for a finished run
(--overwrite; finetune.py, finetune_run.py).
"""

from __future__ import annotations

import functools
import json
import random
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from litebert.checkpoint import (check_state_dict, checkpoint_dirs, cleanup_incomplete, find_latest_checkpoint,
                                 load_state, read_verified, save_checkpoint, save_state)
from litebert.errors import CheckpointError, ConfigError, Terminated
from litebert.faults import with_file_faults
from litebert.files import OutputLock, atomic_write, check_output, lock_dir

STATE_FILE = "trainer_state.pt"
WEIGHTS_FILE = "model.safetensors"


# --------------------------------------------------------------------------------------------- the run directory


class RunDir:
    """A training run's directory (--out), with the one lifecycle `pretrain` and `finetune` both follow:

        take()             prove it writable and lock it: one process per --out
        create()           make it (a clear error when it cannot be made)
        resume_point()     THE resume policy (below)
        continue_at(step)  drop metrics.jsonl lines past the step the run goes on from (0: a fresh start)
        save(...)          checkpoint-STEP/, complete or not at all, keeping the newest `keep`
        last_checkpoint()  what a stopped run leaves to resume from, for its error message

    The resume policy: what a save cut short left behind is removed, then the run goes on from the newest
    checkpoint whose every file verifies against its COMMIT; a damaged one is skipped with the reason on stderr,
    and damage everywhere is an error, never a silent fresh start. Which runs resume at all is each trainer's rule
    (pretrain's --resume auto/none/PATH; finetune's finished run, result.json, is refused or --overwrite-n), and
    so is the recipe check against the run's record; both decide only whether to ask, never which checkpoint."""

    def __init__(self, out: str | Path, who: str = "litebert"):
        self.path = Path(out)
        self.who = who  # "litebert pretrain": the prefix of the lines it writes to stderr

    @property
    def metrics(self) -> Path:
        return self.path / "metrics.jsonl"

    def take(self) -> OutputLock:
        """Prove --out writable and lock it (DIR/.lock and DIR itself): a second process on it is refused, naming
        this one's pid. Release the returned lock when the run ends (the kernel drops it if the process dies)."""
        out = check_output(self.path)
        return lock_dir(out, f"--out {out}")

    def create(self) -> None:
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise CheckpointError(f"--out {self.path}: cannot create it ({e.strerror or e}); choose a writable "
                                  "directory") from None

    def has_checkpoints(self) -> bool:
        return find_latest_checkpoint(self.path) is not None

    def resume_point(self) -> tuple[Path, Any, dict] | None:
        """(checkpoint, state, weights) of the newest checkpoint that reads and verifies, or None when there is
        none (the resume policy: see the class docstring)."""
        cleanup_incomplete(self.path)
        skipped = []
        for ckpt in reversed(checkpoint_dirs(self.path)):
            try:
                state, weights = read_checkpoint(ckpt)
            except CheckpointError as e:
                skipped.append(ckpt.name)
                print(f"{self.who}: skipping {ckpt.name}: {e}", file=sys.stderr)
                continue
            if skipped:
                print(f"{self.who}: {', '.join(skipped)} did not verify; resuming from {ckpt.name} instead",
                      file=sys.stderr)
            return ckpt, state, weights
        if skipped:
            raise CheckpointError(f"{self.path}: none of its checkpoints verifies ({', '.join(skipped)}; reasons "
                                  "above); move them away to start over, or use another --out")
        return None

    def continue_at(self, step: int) -> None:
        """At a (re)start, drop logged lines past the step the run continues from (0 for a fresh start), so the
        curve has no duplicates. A line that does not parse (the torn tail a full disk or a crash mid-append leaves)
        is dropped too, and counted on stderr."""
        path = self.metrics
        if not path.is_file():
            return
        keep, torn = [], 0
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                torn += bool(line.strip())
                continue
            if isinstance(record, dict) and record.get("step", 0) <= step:
                keep.append(line)
        if torn:
            print(f"litebert: {path}: dropped {torn} unreadable line(s) (a write cut short)", file=sys.stderr)

        atomic_write(path, lambda tmp: tmp.write_text("".join(line + "\n" for line in keep), encoding="utf-8"))

    def save(self, step: int, files: Mapping[str, Callable[[Path], None]], state: dict, keep: int | None) -> Path:
        """checkpoint-STEP/, complete or not at all (checkpoint.save_checkpoint): the model's `files`
        (pretrained.model_files: safetensors weights and config; a tokenizer's files too) and the training `state`
        (save_state: refused before anything is written if torch.load(weights_only=True) could not read it back).
        Older checkpoints beyond `keep` are removed once this one is committed."""
        writers = {**files, STATE_FILE: lambda path: save_state(path, state)}
        return save_checkpoint(self.path, step, with_file_faults(writers, step), keep=keep)

    def last_checkpoint(self) -> str:
        """What a stopped run leaves to resume from, for its error message."""
        latest = find_latest_checkpoint(self.path)
        if latest is None:
            return "no checkpoint was saved yet (a rerun starts over)"
        return f"the last checkpoint, {latest.name}, is intact"


def holding_run_dir(out_of: Callable) -> Callable:
    """Decorator for a function that writes a run directory: `RunDir(out_of(*args)).take()` before it runs,
    released when it returns or raises."""
    def wrap(fn):
        @functools.wraps(fn)
        def locked(*args, **kwargs):
            with RunDir(out_of(*args, **kwargs)).take():
                return fn(*args, **kwargs)
        return locked
    return wrap


def changed_fields(saved: Mapping, now: Mapping, fields: Iterable[str]) -> list[str]:
    """'--lr 0.01 (now 0.02)' for each of `fields` whose recorded value differs (fields a run recorded before they
    existed are not compared): what a resume with another recipe is refused with."""
    return [f"--{k.replace('_', '-')} {saved[k]} (now {now[k]})" for k in fields
            if k in saved and k in now and saved[k] != now[k]]


# --------------------------------------------------------------------------------------------- RNG


def rng_state() -> dict[str, Any]:
    """Every global generator a training step may draw from: python `random`, numpy's legacy global, torch's CPU
    generator (dropout on the CPU) and each CUDA device's (dropout on a GPU). Plain containers, ints and tensors
    only, so torch.load(weights_only=True) reads it back (numpy's 624-word key as an int64 tensor)."""
    import numpy as np
    import torch

    numpy_state = np.random.get_state(legacy=False)
    numpy_state["state"]["key"] = torch.from_numpy(numpy_state["state"]["key"].astype(np.int64))
    return {"python": random.getstate(), "numpy": numpy_state, "torch": torch.get_rng_state(),
            # a process that never touched CUDA drew nothing there (and asking would start a CUDA context)
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None}


def restore_rng(saved: Any) -> None:
    """Put back what `rng_state` saved. An older checkpoint's bare torch CPU state (a uint8 tensor) restores that
    generator alone; CUDA states are restored when this machine has as many devices (a GPU run resumed on the CPU
    draws nothing from them)."""
    import numpy as np
    import torch

    if isinstance(saved, torch.Tensor):
        torch.set_rng_state(saved)
        return
    random.setstate(_as_tuples(saved["python"]))
    numpy_state = {**saved["numpy"], "state": dict(saved["numpy"]["state"])}
    numpy_state["state"]["key"] = numpy_state["state"]["key"].numpy().astype(np.uint32)
    np.random.set_state(numpy_state)
    torch.set_rng_state(saved["torch"])
    cuda = saved.get("cuda")
    if cuda and torch.cuda.is_available() and len(cuda) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(cuda)


def _as_tuples(state: Any) -> Any:
    """random.setstate wants the tuples getstate gave (torch.load may hand back lists)."""
    return tuple(_as_tuples(x) for x in state) if isinstance(state, (list, tuple)) else state


# --------------------------------------------------------------------------------------------- save and restore


def read_checkpoint(ckpt: Path) -> tuple[Any, dict]:
    """(training state, weights) of a checkpoint. Every file is checked against the sha256 its COMMIT records as it
    is read, and the state and weights are loaded from the bytes that were checked (one read of each file)."""
    from litebert.pretrained import read_model_state

    blobs = read_verified(ckpt, (STATE_FILE, WEIGHTS_FILE))
    state = load_state(ckpt / STATE_FILE, blobs.pop(STATE_FILE))
    _, _, weights, _ = read_model_state(ckpt, blobs.pop(WEIGHTS_FILE))
    return state, weights


def check_state_keys(ckpt: Path, state: Any, keys: Iterable[str], what: str) -> None:
    """Refuse a training state that lacks what this trainer saves (`what`: "a litebert pretraining state")."""
    missing = [k for k in keys if not isinstance(state, dict) or k not in state]
    if missing:
        raise CheckpointError(f"{ckpt / STATE_FILE}: not {what} (missing {missing})")


def restore_training(ckpt: Path, state: dict, weights: dict, model, optimizer, scheduler, scaler=None,
                     hint: str = "use a new --out") -> None:
    """Load a checkpoint's weights (every tensor checked against the model first), optimizer, schedule and (AMP)
    scaler into place, or refuse one that does not fit this run, naming the file; `hint` says what to do then."""
    check_state_dict(model.state_dict(), weights, ckpt / WEIGHTS_FILE)
    model.load_state_dict(weights, strict=True)
    try:
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        if scaler is not None:
            scaler.load_state_dict(state["scaler"])
    except (KeyError, ValueError, TypeError, RuntimeError) as e:
        raise CheckpointError(f"{ckpt / STATE_FILE}: its optimizer/scheduler state does not fit this run ({e}); "
                              f"{hint}") from None


# --------------------------------------------------------------------------------------------- stopping


def parse_duration(text: str | float, flag: str) -> float:
    """Seconds in "90", "90s", "30m", "2h", "1h30m" (or a number)."""
    value = str(text).strip().lower()
    match = re.fullmatch(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s?)?", value)
    if not value or match is None:
        raise ConfigError(f"{flag} {text!r}: expected seconds or a duration like 30m, 2h, 1h30m")
    h, m, sec = (float(g) if g else 0.0 for g in match.groups())
    seconds = 3600 * h + 60 * m + sec
    if seconds <= 0:
        raise ConfigError(f"{flag} {text!r}: must be more than 0")
    return seconds


def budget_reached(elapsed: float, max_time: str | float | None, max_seconds: float | None,
                   done: float = 0.0, limit: int | None = None, unit: str = "tokens") -> str:
    """Why a budget stops the run now ("--max-time 2h reached", "--max-tokens 1,200 reached (1,536 tokens)"), or
    "" while it does not: `elapsed` seconds against --max-time, `done` units against --max-UNIT `limit`."""
    if max_seconds is not None and elapsed >= max_seconds:
        return f"--max-time {max_time} reached"
    if limit is not None and done >= limit:
        return f"--max-{unit} {limit:,} reached ({done:,.0f} {unit})"
    return ""


def stopping_line(step: int, steps: int, why: str, go_on: str = "resume with a larger budget to go on") -> str:
    """The one line a run stopped by its budget ends with."""
    return f"stopping at step {step} of {steps}: {why}; checkpoint-{step} saved ({go_on})"


def sigterm_error(step: int, out: str | Path, rerun: str = "run the same command again to resume") -> Terminated:
    """The error a SIGTERMed run exits with (143), after saving checkpoint-STEP: one line, no traceback."""
    return Terminated(f"SIGTERM: stopped after step {step} and saved checkpoint-{step} in {out}; {rerun}")


class TermSignal:
    """SIGTERM (what schedulers send before preemption) only raises a flag here; the loop finishes the step it
    is in, saves a checkpoint and stops (exit code 143). Installed only from the main thread (Python's rule)."""

    def __init__(self):
        self.received, self.previous = False, None

    def __enter__(self) -> TermSignal:
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGTERM, self._on_term)
        return self

    def _on_term(self, signum, frame) -> None:
        self.received = True

    def __exit__(self, *exc) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGTERM, self.previous)
