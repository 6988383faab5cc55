"""Experiment trackers: `--report-to tensorboard,mlflow,wandb` on `pretrain` and `finetune`.

Each training loop writes one record per log step (and per held-out evaluation) to its metrics.jsonl; that one
writer also hands the record to `Trackers.log`, so a tracker shows exactly the figures the file holds, at the
same steps. A tracker gets:
- at the start, the run record (pretraining: run.json; fine-tuning: finetune.json) as parameters;
- per record, its numbers (a record naming its split, like fine-tuning's dev evaluations, tags them
  "SPLIT/NAME": "dev/accuracy");
- at the end, the run's final figures (pretraining: "final/...", fine-tuning: the best checkpoint's "best/...").

Every start of a command is one tracker run: a resumed pretraining run opens a new one, whose curves continue
from the step it resumed at.

Each tracker is its own library, an optional extra: [tb] (TensorBoard), [mlflow] (mlflow-skinny), [wandb].
A missing library is a ConfigError before training starts. Once training runs, a tracker that raises is dropped
with one warning and training goes on: a tracker never stops a run.

Where the figures go:
- tensorboard: OUT/tb (event files);
- mlflow: $MLFLOW_TRACKING_URI when set (a server, a database), else the file store OUT/mlruns (no server;
  MLflow 3 reads a file store only with MLFLOW_ALLOW_FILE_STORE=true: `mlflow ui --backend-store-uri OUT/mlruns`
  shows it); the experiment MLflow itself picks in the same environment ($MLFLOW_EXPERIMENT_ID, else
  $MLFLOW_EXPERIMENT_NAME, else Default), so `mlflow.search_runs()` after `mlflow.set_tracking_uri(...)` finds
  the run; run named after OUT; the start line names the run, the experiment and the URI;
- wandb: offline, into OUT/wandb (`wandb sync` uploads it later), unless WANDB_MODE says otherwise; project
  $WANDB_PROJECT or "litebert".
"""

from __future__ import annotations

import importlib.util
import math
import os
import time
import weakref
from pathlib import Path
from typing import Any

from litebert.errors import ConfigError
from litebert.progress import say

REPORT_TO = ("tensorboard", "mlflow", "wandb")
# tracker -> (the module it needs, the extra that installs it)
NEEDS = {"tensorboard": ("tensorboard", "tb"), "mlflow": ("mlflow", "mlflow"), "wandb": ("wandb", "wandb")}
REPORT_TO_HELP = ("send the metrics to experiment trackers as well, comma-separated: " + ", ".join(REPORT_TO)
                  + " (extras [tb], [mlflow], [wandb]; litebert.tracking says where each writes)")


def parse_report_to(value: str | None, flag: str = "--report-to") -> tuple[str, ...]:
    """"mlflow, tensorboard" -> ("mlflow", "tensorboard"); None, "" or "none" -> ()."""
    names = tuple(dict.fromkeys(n.strip().lower() for n in (value or "").split(",") if n.strip()))
    if names in ((), ("none",)):
        return ()
    unknown = [n for n in names if n not in REPORT_TO]
    if unknown:
        raise ConfigError(f"{flag} {value!r}: unknown tracker {unknown[0]!r}; use a comma-separated list of "
                          f"{', '.join(REPORT_TO)} (or none)")
    missing = [n for n in names if importlib.util.find_spec(NEEDS[n][0]) is None]
    if missing:
        extras = ",".join(NEEDS[n][1] for n in missing)
        raise ConfigError(f"{flag} {','.join(missing)} needs its library: pip install 'litebert[{extras}]'")
    return names


def numbers(record: dict[str, Any]) -> dict[str, float]:
    """The finite numbers of a metrics record, keyed as trackers show them (its step and wall-clock time are not
    figures; a record naming its split tags its figures with it)."""
    prefix = f"{record['split']}/" if isinstance(record.get("split"), str) else ""
    return {prefix + k: float(v) for k, v in record.items()
            if k not in ("step", "time") and isinstance(v, (int, float)) and not isinstance(v, bool)
            and math.isfinite(v)}


def flatten(params: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"train": {"lr": 0.1}} -> {"train.lr": 0.1}: trackers take flat parameter names."""
    flat: dict[str, Any] = {}
    for k, v in params.items():
        if isinstance(v, dict):
            flat.update(flatten(v, f"{prefix}{k}."))
        else:
            flat[prefix + k] = v
    return flat


class Trackers:
    """The trackers of one run. `log(record)` per metrics record, `finish(summary, step)` at the end; a run that
    never reaches `finish` (an exception) is closed as failed when this object goes away or the process exits."""

    def __init__(self, names: tuple[str, ...], out_dir: str | Path, command: str, params: dict[str, Any]):
        self.active: list = []
        out_dir = Path(out_dir)
        for name in names:
            try:
                self.active.append(TRACKERS[name](out_dir, command, params))
            except Exception as exc:  # a tracker that cannot start (a dead server, a bad store) costs no run
                say(f"warning: the {name} tracker did not start ({type(exc).__name__}: {exc}); training goes on "
                    "without it")
        self._closer = weakref.finalize(self, _close_all, list(self.active), True)

    def log(self, record: dict[str, Any]) -> None:
        if self.active:
            self._each("log", numbers(record), int(record["step"]))

    def finish(self, summary: dict[str, Any], step: int) -> None:
        """The run's final figures (as named by the caller), then each tracker is closed as a finished run."""
        self._closer.detach()
        self._each("summary", numbers(summary), step)
        _close_all(self.active, failed=False)
        self.active = []

    def _each(self, method: str, *args) -> None:
        for tracker in list(self.active):
            try:
                getattr(tracker, method)(*args)
            except Exception as exc:
                self.active.remove(tracker)
                say(f"warning: the {tracker.name} tracker failed ({type(exc).__name__}: {exc}); training goes on "
                    "without it (metrics.jsonl has every figure)")


def _close_all(trackers: list, failed: bool) -> None:
    for tracker in trackers:
        try:
            tracker.close(failed)
        except Exception as exc:
            say(f"warning: the {tracker.name} tracker did not close ({type(exc).__name__}: {exc})")


class TensorBoardTracker:
    name = "tensorboard"

    def __init__(self, out_dir: Path, command: str, params: dict[str, Any]):
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(str(out_dir / "tb"))

    def log(self, metrics: dict[str, float], step: int) -> None:
        for k, v in metrics.items():
            self.writer.add_scalar(k, v, step)

    summary = log

    def close(self, failed: bool) -> None:
        self.writer.close()


class MLflowTracker:
    name = "mlflow"
    PARAMS_PER_CALL = 100  # MLflow's limit on parameters in one log_batch
    MAX_PARAM_CHARS = 6000  # and on a parameter's value

    def __init__(self, out_dir: Path, command: str, params: dict[str, Any]):
        uri = os.environ.get("MLFLOW_TRACKING_URI")
        if not uri:
            # MLflow 3 keeps its file store (a folder, no server) only behind this opt-in; it is the store we chose.
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
            uri = (out_dir / "mlruns").resolve().as_uri()
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient
        from mlflow.tracking.default_experiment import DEFAULT_EXPERIMENT_ID

        self.client = MlflowClient(tracking_uri=uri)
        # The experiment mlflow's own calls use with the same environment (mlflow.start_run, mlflow.search_runs()):
        # $MLFLOW_EXPERIMENT_ID, else $MLFLOW_EXPERIMENT_NAME (made if new), else the store's Default experiment.
        experiment_id, name = os.environ.get("MLFLOW_EXPERIMENT_ID"), os.environ.get("MLFLOW_EXPERIMENT_NAME")
        if not experiment_id and name:
            experiment = self.client.get_experiment_by_name(name)
            experiment_id = experiment.experiment_id if experiment else self.client.create_experiment(name)
        experiment_id = experiment_id or DEFAULT_EXPERIMENT_ID
        run = self.client.create_run(experiment_id, run_name=out_dir.resolve().name,
                                     tags={"litebert.command": command, "litebert.out": str(out_dir.resolve())})
        self.run_id = run.info.run_id
        opt_in = "" if os.environ.get("MLFLOW_TRACKING_URI") else "MLFLOW_ALLOW_FILE_STORE=true, "
        say(f"mlflow: run {self.run_id} in experiment {self.client.get_experiment(experiment_id).name!r} at {uri} "
            f"(read it back with {opt_in}mlflow.set_tracking_uri({uri!r}) and mlflow.search_runs())")
        flat = [Param(k, str(v)[:self.MAX_PARAM_CHARS]) for k, v in sorted(flatten(params).items())]
        for start in range(0, len(flat), self.PARAMS_PER_CALL):
            self.client.log_batch(self.run_id, params=flat[start:start + self.PARAMS_PER_CALL])

    def log(self, metrics: dict[str, float], step: int) -> None:
        from mlflow.entities import Metric

        stamp = int(time.time() * 1000)
        self.client.log_batch(self.run_id, metrics=[Metric(k, v, stamp, step) for k, v in metrics.items()])

    summary = log

    def close(self, failed: bool) -> None:
        self.client.set_terminated(self.run_id, "FAILED" if failed else "FINISHED")


class WandbTracker:
    name = "wandb"

    def __init__(self, out_dir: Path, command: str, params: dict[str, Any]):
        import wandb

        out_dir.mkdir(parents=True, exist_ok=True)
        self.run = wandb.init(project=os.environ.get("WANDB_PROJECT", "litebert"), name=out_dir.resolve().name,
                              dir=str(out_dir), config=params, job_type=command,
                              mode=os.environ.get("WANDB_MODE", "offline"))

    def log(self, metrics: dict[str, float], step: int) -> None:
        self.run.log(metrics, step=step)

    def summary(self, metrics: dict[str, float], step: int) -> None:
        self.run.summary.update(metrics)

    def close(self, failed: bool) -> None:
        self.run.finish(exit_code=1 if failed else 0)


TRACKERS = {"tensorboard": TensorBoardTracker, "mlflow": MLflowTracker, "wandb": WandbTracker}
