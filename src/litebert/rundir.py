"""What a `--model` argument means: a model directory, a run directory, a Hub id, or a preset name.

- a model directory (config.json + model.safetensors): itself;
- a fine-tuning run directory (best/ and finetune.json): its best/ checkpoint;
- a pretraining run directory (checkpoint-STEP/ dirs, final/): its newest complete checkpoint, else final/;
- a `litebert demo` directory (its pretraining run in `pretrain/`, beside corpus, tokenizer and store): that run;
- a Hub id: its snapshot in the local Hugging Face cache (hub_cache.py);
- a preset name: an error wherever weights are needed, since a preset is an architecture with no weights.

When the directory used is not the one named, a line on stderr says which it took.
"""

from __future__ import annotations

import sys
from pathlib import Path

from litebert.errors import CheckpointError

# What `pretrain` records in its run directory: the model config and recipe a resume is checked against.
RUN_RECORD = "run.json"
# The step a pretraining run's final/ model was saved at (a checkpoint-N/ says it in its name).
FINAL_STEP_FILE = "step.txt"

# Where `litebert demo` puts its pretraining run inside its own directory (beside corpus.txt, tokenizer/, store/).
DEMO_RUN = "pretrain"


def resolve_run_dir(spec: str | Path) -> Path:
    """The run directory `spec` names: itself, or for a `litebert demo` directory the pretraining run inside it.

    A directory is a demo directory when it has no run files of its own (metrics.jsonl, run.json) and holds a
    `pretrain/` run that has them; `plot`, `--model` and every other reader of run dirs go through here."""
    path = Path(spec)
    inner = path / DEMO_RUN
    if not _is_run(path) and _is_run(inner):
        return inner
    return path


def _is_run(path: Path) -> bool:
    return (path / "metrics.jsonl").is_file() or (path / RUN_RECORD).is_file()


def resolve_model_dir(spec: str | Path, quiet: bool = False) -> Path:
    """The model directory `spec` stands for (see the module docstring)."""
    from litebert.checkpoint import find_latest_checkpoint
    from litebert.config import PRESETS
    from litebert.hub_cache import resolve_model_path

    path = Path(spec)
    if str(spec) in PRESETS and not path.exists():
        raise CheckpointError(
            f"--model {spec} is a preset: an architecture with no weights, so there is nothing to fine-tune or run. "
            f"Get weights first: convert Google's release (`litebert convert albert_base/ --out {spec}`, no "
            f"TensorFlow needed), pass a Hugging Face ALBERT directory (or its Hub id, e.g. albert/{spec}, from the "
            f"local Hugging Face cache), or pretrain your own (`litebert pretrain --model {spec} --data STORE`)")
    if not path.exists():
        return resolve_model_path(spec)
    if (path / "model.safetensors").is_file():
        return path
    if (run := resolve_run_dir(path)) != path:
        picked = resolve_model_dir(run, quiet=True)
        if not quiet and picked != run:
            print(f"--model {spec}: using {picked} (the model the demo run {spec} pretrained)", file=sys.stderr)
        return picked
    picked, why = None, ""
    if (path / "best" / "model.safetensors").is_file():
        picked, why = path / "best", "the best checkpoint of fine-tuning run"
    elif (latest := find_latest_checkpoint(path)) is not None:
        picked, why = latest, "the newest complete checkpoint of pretraining run"
    elif (path / "final" / "model.safetensors").is_file():
        picked, why = path / "final", "the final model of pretraining run"
    if picked is None:
        return path  # not a run dir: the loader says what is missing
    if not quiet:
        print(f"--model {spec}: using {picked} ({why} {spec})", file=sys.stderr)
    return picked
