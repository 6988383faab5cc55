"""`litebert evaluate` on a pretraining directory: the held-out MLM figures of its run's eval lines, again.

The directory may be a pretraining run (its newest complete checkpoint, else final/), a `litebert demo` directory
(its pretrain/ run), a checkpoint or final/ inside a run, or a bare model directory saved with MLM heads. The
figures are `pretrain.held_out_eval`'s, the function the run's eval lines and metrics.jsonl records come from:
held-out MLM at [MASK], kept and random-replaced targets beside the official headline, the model-free baselines on
the same targets (litebert.mlm_scores), and the sentence-pair accuracy. With the run's record (run.json) they are
computed with the run's own settings (length, eval batches, seed, precision) on the store it trained on, so they
repeat its last eval line; `data` scores another store built with the same tokenizer.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from litebert import heads
from litebert.checkpoint import checkpoint_step
from litebert.errors import CheckpointError, ConfigError, TokenizerError
from litebert.files import read_json
from litebert.rundir import FINAL_STEP_FILE, RUN_RECORD, resolve_model_dir, resolve_run_dir


def is_pretraining_dir(spec: str | Path) -> bool:
    """`spec` holds a model with MLM heads (a pretraining run, its checkpoint or final/, a demo directory, or an
    AlbertForPreTraining / AlbertForMaskedLM directory): the kind `evaluate` scores without a TASK."""
    from litebert.records import read_model_config, saved_architecture

    weights = resolve_model_dir(spec, quiet=True)
    if not (weights / "config.json").is_file():
        return False
    config, _ = read_model_config(weights)
    return heads.for_saved(saved_architecture(weights), config.problem_type, config.num_labels).name == "mlm"


def find_run(spec: str | Path, weights_dir: Path) -> Path | None:
    """The pretraining run directory whose record (run.json) made `weights_dir`: `spec` itself (or a demo's run),
    or the run holding the checkpoint-STEP/ or final/ that `spec` names; None for a bare model directory."""
    run = resolve_run_dir(spec)
    if (run / RUN_RECORD).is_file():
        return run
    inside = weights_dir.name == "final" or checkpoint_step(weights_dir) is not None
    if inside and (weights_dir.parent / RUN_RECORD).is_file():
        return weights_dir.parent
    return None


def run_settings(run_dir: Path):
    """(PretrainConfig of the run, its record) from run_dir/run.json. Options this version no longer has are
    left out (none of them changes how held-out MLM is scored)."""
    from litebert.pretrain import PretrainConfig

    path = run_dir / RUN_RECORD
    record = read_json(path, CheckpointError, expect=dict, what="a pretraining run record")
    train = record.get("train")
    if not isinstance(train, dict):
        raise CheckpointError(f"{path}: no 'train' settings; not a pretraining run record")
    # the device the run trained on may not be here: scoring picks this machine's
    known = {f.name for f in dataclasses.fields(PretrainConfig)} - {"device"}
    try:
        return PretrainConfig(**{k: v for k, v in train.items() if k in known}), record
    except ConfigError as exc:
        raise CheckpointError(f"{path}: {exc}") from None


def step_of(weights_dir: Path) -> int | None:
    """The training step of a checkpoint-STEP/ or final/ (its step.txt) directory, None when unknown."""
    step = checkpoint_step(weights_dir)
    if step is not None:
        return step
    step_file = weights_dir / FINAL_STEP_FILE
    text = step_file.read_text().strip() if step_file.is_file() else ""
    return int(text) if text.isdigit() else None


def evaluate_pretraining(model: str | Path, data: str | Path | None = None, precision: str | None = None,
                         max_seq_length: int | None = None, eval_batches: int | None = None,
                         batch_size: int | None = None) -> dict[str, Any]:
    """Held-out MLM figures of a pretraining directory (see the module docstring). `data`: a token store (default:
    the run's). `precision`, `max_seq_length`, `eval_batches` and `batch_size` (sequences per forward pass, which
    with `eval_batches` sets how many held-out examples are scored) default to the run's, else to pretrain's
    defaults. Returns the eval_* figures with what was scored: model, data, step, precision, settings."""
    import torch

    from litebert.data.store import TokenStore
    from litebert.device import for_inference, resolve_precision
    from litebert.model import AlbertForPreTraining
    from litebert.model_card import has_tokenizer
    from litebert.pretrain import PretrainConfig, held_out_eval
    from litebert.tokenizer import load_tokenizer

    if not is_pretraining_dir(model):
        raise ConfigError(f"--model {model}: not a pretraining directory (a model with MLM heads, or a pretraining "
                          "run); a fine-tuned model is evaluated on its task: litebert evaluate TASK --model DIR "
                          "--data DATA")
    weights_dir = resolve_model_dir(model)
    run_dir = find_run(model, weights_dir)
    cfg, record = run_settings(run_dir) if run_dir is not None else (PretrainConfig(), {})
    if data is None:
        if run_dir is None:
            raise ConfigError(f"--model {model}: a model directory without its run record ({RUN_RECORD}); pass "
                              "--data STORE (a token store built with its tokenizer)")
        data = cfg.data
        if not Path(data).is_dir():
            raise ConfigError(f"{run_dir / RUN_RECORD}: the run trained on {data}, which is not there (now); pass "
                              "--data STORE (a token store built with the run's tokenizer)")
    overrides = {k: v for k, v in (("max_seq_length", max_seq_length), ("eval_batches", eval_batches),
                                   ("micro_batch_size", batch_size)) if v is not None}
    if overrides:
        try:
            cfg = dataclasses.replace(cfg, **overrides)
        except ConfigError as exc:  # the options' own checks: "--max-seq-length 0: must be >= 8"
            raise ConfigError(str(exc).replace("--micro-batch-size", "--batch-size")) from None
    store = TokenStore.open(data)
    if has_tokenizer(weights_dir):  # checkpoints and final/ carry the run's tokenizer
        store.check_tokenizer(load_tokenizer(weights_dir))
    elif record.get("tokenizer_fingerprint", store.tokenizer_fingerprint) != store.tokenizer_fingerprint:
        raise TokenizerError(f"--data {data}: built with another tokenizer than the run {run_dir} trained with")
    net = AlbertForPreTraining.from_pretrained(weights_dir)
    if not has_tokenizer(weights_dir):  # no tokenizer to compare: at least every id is inside the vocabulary
        store.check_tokens(net.config.vocab_size)
    if net.config.max_position_embeddings < cfg.max_seq_length:
        raise ConfigError(f"--max-seq-length {cfg.max_seq_length} exceeds the model's max_position_embeddings "
                          f"{net.config.max_position_embeddings}")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    precision = resolve_precision(precision or cfg.precision, device)
    # Through the door every saved model takes (device.for_inference), with fp32 weights: these figures repeat the
    # run's eval lines, which score its fp32 weights under autocast at `precision` (held_out_eval does the same).
    result = held_out_eval(for_inference(net, "fp32", device), store, cfg, precision)
    if not result:
        raise ConfigError(f"{store.path}: no validation split, so nothing is held out to score (build the store with "
                          "--validation-fraction)")
    fresh = [name for name in net.load_report.get("initialised", []) if name.startswith("sop.")]
    notes = []
    if fresh:  # a masked-LM directory: no trained pair head, so its pair accuracy means nothing
        result = {k: v for k, v in result.items() if k not in ("eval_sop_acc", "eval_nsp_acc")}
        notes.append(f"{weights_dir} has no sentence-pair head: no pair accuracy")
    return {"model": str(weights_dir), "run": str(run_dir) if run_dir else None, "data": str(store.path),
            "step": step_of(weights_dir), "precision": precision,
            "settings": {"max_seq_length": cfg.max_seq_length, "eval_batches": cfg.eval_batches,
                         "batch_size": cfg.micro_batch_size, "seed": cfg.seed, "objective": cfg.objective},
            **result, **({"notes": notes} if notes else {})}
