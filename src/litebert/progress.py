"""Progress for humans: a tqdm bar on a terminal, plain log lines otherwise, and messages that do not break
the bar. Shared by pretraining and fine-tuning."""

from __future__ import annotations

import math
import os
import sys

# Narrowest terminal a dynamic-width bar is drawn for; a pseudo-terminal that reports 0 columns (some CI
# runners, `script`, docker without a tty size) gets a fixed 80-column bar instead of an invisible one.
MIN_COLUMNS = 20
# The meter without tqdm's rate field, so that "desc pct|bar| n/total [elapsed<eta] postfix" fits 80 columns:
# the bar takes what the postfix leaves.
BAR_FORMAT = "{desc} {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}]{postfix}"


def on_terminal() -> bool:
    return sys.stderr.isatty()


def terminal_columns() -> int:
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns
    except (OSError, ValueError):
        return 0


def make_bar(total: int, initial: int = 0, desc: str = "", file=None, columns: int | None = None):
    """A tqdm bar on stderr (or `file`), as wide as the terminal (or `columns`); 80 columns where the terminal
    reports fewer than MIN_COLUMNS.

    On such a terminal tqdm also reads 0 rows, takes the bar's line to be off the screen and draws nothing at
    all; so the rows are given too."""
    from tqdm import tqdm

    measured = columns is None
    columns = terminal_columns() if measured else columns
    if measured and columns >= MIN_COLUMNS:
        size = dict(dynamic_ncols=True)
    else:
        size = dict(ncols=columns if columns >= MIN_COLUMNS else 80, nrows=24)
    return tqdm(total=total, initial=initial, desc=desc, file=file or sys.stderr, bar_format=BAR_FORMAT, **size)


def say(message: str) -> None:
    """A log line on stderr; on a terminal through tqdm.write, so it lands above the bar, not inside it."""
    if on_terminal():
        from tqdm import tqdm

        tqdm.write(message, file=sys.stderr)
    else:
        print(message, file=sys.stderr, flush=True)


def format_seconds(seconds: float | None) -> str:
    """1:02:03 / 2:03 / ? (unknown)."""
    if seconds is None or not math.isfinite(seconds):
        return "?"
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def eta(elapsed: float, done: float, remaining: float, *limits: float | None) -> float | None:
    """Seconds left at the pace so far (None before the first step), or less where another budget ends the run
    sooner: each of `limits` is seconds left by some other clock (None: no such budget)."""
    left = [elapsed / done * remaining] if done > 0 else []
    left += [max(0.0, x) for x in limits if x is not None]
    return min(left) if left else None
