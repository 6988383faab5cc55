"""litebert's exceptions.

Every error a user can cause is a `LitebertError`. Its message names the file, line or field at fault and,
where there is one, the option that gets past it. The CLI prints these without a traceback and exits 2.
"""

from __future__ import annotations


class LitebertError(Exception):
    """Base class: a problem with the user's input, config or files (not a bug in litebert)."""


class ConfigError(LitebertError, ValueError):
    """A config field has a bad value or a bad combination with another field."""


class CorpusError(LitebertError):
    """A text corpus cannot be read: missing file, bad encoding, empty input."""


class DataFormatError(LitebertError):
    """A dataset file (TSV, JSON, JSONL, CoNLL, ...) does not parse or lacks a column."""


class TokenizerError(LitebertError):
    """A tokenizer model or vocab file is missing, corrupt or does not match."""


class CheckpointError(LitebertError):
    """A weights file or training-state file is missing, truncated, unsafe or does not match the model."""


class ConversionError(LitebertError):
    """A foreign checkpoint (TF, albert_zh, HF) cannot be mapped onto our model."""


class OutputError(LitebertError):
    """An output cannot be written: a full disk, a read-only file system, a file where a directory should be, or a
    directory another litebert process is writing."""


class Terminated(LitebertError):
    """The run was asked to stop (SIGTERM) and stopped cleanly; the CLI exits with `exit_code` (128 + SIGTERM)."""

    exit_code = 143


class TrainingError(LitebertError):
    """Training cannot go on: non-finite loss past the budget, a bad option, a store that does not match."""


def where(path, line: int | None = None) -> str:
    """'file:line' prefix used at the front of error messages."""
    return f"{path}:{line}" if line is not None else f"{path}"
