"""What every fine-tuning reader shares: the sentence-level `Example`, the `Examples` list it returns, and
`read_lines`, the line reader whose errors name file:line.

The task table (`tasks.py`) dispatches to the readers of `ner.py`, `squad.py` and `race.py`; those readers import
from here, never from the table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Iterator, Sequence

from litebert.errors import DataFormatError, where


@dataclass
class Example:
    guid: str
    text_a: str
    text_b: str | None = None
    label: Any = None  # str (classification), float (regression), tuple[str, ...] (multi-label), None (unlabelled)
    source: str = field(default="", compare=False)  # "file:line", for error messages


class Examples(list):
    """A list of examples that also carries what was skipped by design ("file:line: why") and reader stats."""

    def __init__(self, items=(), path: Path | None = None, skipped: Sequence[str] = (), stats: dict | None = None):
        super().__init__(items)
        self.path = path
        self.skipped = list(skipped)
        self.stats = dict(stats or {})


def read_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text without the line end). Splits on '\\n' only (text may hold \\u2028 and friends);
    drops a UTF-8 BOM; bad UTF-8 is an error naming the line."""
    try:
        f = open(path, "rb")
    except OSError as e:
        raise DataFormatError(f"{path}: cannot read ({e.strerror or e})") from None
    with f:
        for n, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                msg = f"{where(path, n)}: invalid UTF-8 ({e.reason}); re-encode the file as UTF-8"
                raise DataFormatError(msg) from None
            if n == 1:
                line = line.removeprefix("\ufeff")
            yield n, line.rstrip("\r\n") if line.endswith("\n") else line
