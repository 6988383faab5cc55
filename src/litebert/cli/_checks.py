"""Validation of numeric and device options, in one place for every command.

`check_args` runs on the parsed arguments of any subcommand before its handler: an option whose destination name
has a rule below must satisfy it, every float option must be finite (argparse's float() takes "nan", "inf" and
"1e999"), and --device must name a device this torch build can use. A failure is a ConfigError naming the flag
and the value, so the CLI prints one line and exits 2. Limits that need the model (--top-k against the
vocabulary) are checked where the model is loaded.

The options of `pretrain`, `finetune` and `serve` are fields of options dataclasses, whose rules live on the field
(`config.option(..., check=)`) and are checked when the handler builds the class, before any work; `check_args`
leaves those to them (cli/_common.FIELD_DESTS). The rules below are for the other commands' plain options.
"""

from __future__ import annotations

import math

from litebert.cli._common import FIELD_DESTS
from litebert.config import FRACTION, LEARNING_RATE, NON_NEGATIVE, POSITIVE, Rule, at_least, closed, open_closed
from litebert.errors import ConfigError

# By argparse destination (the flag without "--", "-" as "_"), for options that are not an options-dataclass field
# (those carry their own rule). A value of None means "not given" and is skipped.
RULES: dict[str, Rule] = {
    **{name: LEARNING_RATE for name in ("lr", "finetune_lr")},
    "warmup_ratio": closed(0.0, 1.0),
    "validation_fraction": FRACTION,
    "character_coverage": open_closed(0.0, 1.0),
    "max_seq_length": at_least(8),
    "opset": at_least(1),
    **{name: POSITIVE for name in (
        "steps", "batch_size", "top_k", "workers", "threads", "num_threads", "vocab_size", "limit", "max_length",
        "max_sentence_tokens", "min_doc_tokens", "min_doc_sentences", "input_sentence_size", "finetune_steps",
        "repeats")},
    **{name: NON_NEGATIVE for name in ("seed", "pretrain_seed", "max_doc_sentences")},
}


def flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def check_args(args) -> None:
    """Raise ConfigError for the first option of `args` (an argparse Namespace) that breaks its rule."""
    fields = getattr(args, FIELD_DESTS, frozenset())  # checked by their options class
    for dest, value in sorted(vars(args).items()):
        if dest in fields or isinstance(value, bool) or not isinstance(value, (int, float)):
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
