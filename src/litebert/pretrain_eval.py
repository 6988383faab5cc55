"""Held-out MLM of a pretraining model: the figures of a run's eval lines, and `litebert evaluate` repeating them.

`held_out_eval` is the one scorer: the pretraining loop calls it for its eval lines and metrics.jsonl eval records,
and `evaluate_pretraining` (`litebert evaluate` without a TASK) calls it on a saved model: held-out MLM at [MASK],
kept and random-replaced targets beside the official headline, the model-free baselines on the same targets
(litebert.mlm_scores), and the sentence-pair accuracy, always with ALBERT's 15% masking (`eval_protocol`).

`evaluate_pretraining` takes a pretraining run (its newest complete checkpoint, else final/), a `litebert demo`
directory (its pretrain/ run), a checkpoint or final/ inside a run, or a bare model directory saved with MLM heads.
With the run's record (run.json) the figures are computed with the run's own settings (length, eval batches, seed,
precision) on the store it trained on, so they repeat its last eval line; `data` scores another store built with
the same tokenizer.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from litebert import heads
from litebert.checkpoint import checkpoint_step
from litebert.data.pretraining import PretrainingDataset, collate_pretraining
from litebert.data.store import TokenStore
from litebert.device import autocast, for_inference, resolve_precision
from litebert.errors import CheckpointError, ConfigError, TokenizerError
from litebert.files import read_json
from litebert.mlm_scores import MlmTally, piece_table
from litebert.model import AlbertForPreTraining, predicted_ids
from litebert.model_card import has_tokenizer
from litebert.pretrain_config import PretrainConfig
from litebert.rundir import FINAL_STEP_FILE, RUN_RECORD, resolve_model_dir, resolve_run_dir
from litebert.tokenizer import load_tokenizer


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
    the run's recorded settings (evaluate_pretraining), so it repeats the run's figures. {} without a validation
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
                                ((predicted_ids(out.mlm_logits) == b["masked_ids"]) * w).sum().item(),
                                w.sum().item(), (predicted_ids(out.sop_logits) == b["sop_labels"]).sum().item()],
                               dtype=torch.float64)
        tally.add(host, out.mlm_logits, per_target)
    masked = max(totals[2].item(), 1.0)
    return {"eval_mlm_loss": totals[0].item() / masked, "eval_mlm_acc": totals[1].item() / masked,
            **tally.result(), f"eval_{objective}_acc": totals[3].item() / max(n, 1), "eval_examples": n}


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
