"""What pretraining and fine-tuning runs share about their run directory's life: SIGTERM as a flag the loop
checks after each step (it saves and stops), and the metrics log cut back to the step a run resumes from.

(The lock is files.lock_dir; atomic checkpoints are checkpoint.save_checkpoint.)
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from pathlib import Path

from litebert.files import atomic_write


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


def truncate_metrics(path: Path, step: int) -> None:
    """At a (re)start, drop logged lines past the step the run continues from (0 for a fresh start), so the curve
    has no duplicates. A line that does not parse (the torn tail a full disk or a crash mid-append leaves) is
    dropped too, and counted on stderr."""
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
