"""Validation of numeric and device options, in one place for every command.

`check_args` runs on the parsed arguments of any subcommand before its handler: an option whose destination name
has a rule below must satisfy it, every float option must be finite (argparse's float() takes "nan", "inf" and
"1e999"), and --device must name a device this torch build can use. A failure is a ConfigError naming the flag
and the value, so the CLI prints one line and exits 2. Limits that need the model (--top-k against the
vocabulary) are checked where the model is loaded.
"""

from __future__ import annotations

import math
from litebert.config import (ABOVE_ZERO, FRACTION, LEARNING_RATE, NON_NEGATIVE, POSITIVE, Rule, at_least, closed,
                             open_closed)
from litebert.errors import ConfigError

# By argparse destination (the flag without "--", "-" as "_"). A value of None means "not given" and is skipped.
RULES: dict[str, Rule] = {
    **{name: LEARNING_RATE for name in ("lr", "finetune_lr")},
    "epochs": ABOVE_ZERO,
    "warmup_ratio": closed(0.0, 1.0),
    "masked_lm_prob": ((lambda v: 0 < v < 1), "must be in (0, 1)"),
    "short_seq_prob": closed(0.0, 1.0),
    "validation_fraction": FRACTION,
    **{name: FRACTION for name in ("dropout", "albert_dropout", "classifier_dropout")},
    "max_grad_norm": ABOVE_ZERO,
    **{name: NON_NEGATIVE for name in ("weight_decay", "no_decay_lr_scale")},
    "character_coverage": open_closed(0.0, 1.0),
    "max_seq_length": at_least(8),
    "opset": at_least(1),
    **{name: POSITIVE for name in (
        "steps", "batch_size", "micro_batch_size", "eval_batch_size", "grad_accum", "log_every", "save_every",
        "eval_batches", "keep", "top_k", "workers", "threads", "num_threads", "vocab_size", "max_predictions_per_seq",
        "ngram", "doc_stride", "max_query_length", "n_best", "max_answer_length", "limit", "max_length",
        "max_sentence_tokens", "min_doc_tokens", "min_doc_sentences", "input_sentence_size", "finetune_steps",
        "repeats", "max_train_examples", "max_eval_examples")},
    **{name: NON_NEGATIVE for name in (
        "seed", "pretrain_seed", "num_workers", "nan_budget", "warmup_steps", "eval_every", "patience",
        "max_doc_sentences")},
}


def flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def check_args(args) -> None:
    """Raise ConfigError for the first option of `args` (an argparse Namespace) that breaks its rule."""
    for dest, value in sorted(vars(args).items()):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{flag(dest)} {value}: must be a finite number")
        rule = RULES.get(dest)
        if rule is not None and not rule[0](value):
            raise ConfigError(f"{flag(dest)} {value}: {rule[1]}")
    device = getattr(args, "device", None)
    if isinstance(device, str) and device:
        from litebert.device import check_device

        check_device(device)
