"""Fault injection for the reliability tests (tests/reliability) and the kill/resume checks: real faults at a chosen
step, a SIGKILL, a SIGSTOP, an allocation no machine can serve, a NaN loss, a death between two checkpoint files.

Driven by the environment variable LITEBERT_FAULT (docs/reliability.md has the table); when it is unset every hook
returns at once. The training loops and `data build` call the hooks; nothing else in the library reads the variable.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


def inject_fault(kind: str, step: int, rank: int, loss: torch.Tensor | None = None) -> None:
    """LITEBERT_FAULT="kind:step[:rank]": the fault `kind` at `step` (on `rank` only, when given)."""
    spec = os.environ.get("LITEBERT_FAULT", "")
    if not spec:
        return
    parts = spec.split(":")
    if parts[0] != kind or int(parts[1]) != step or (len(parts) > 2 and int(parts[2]) != rank):
        return
    if kind == "stop":  # the test acts on the stopped process (a real fault: a full disk, SIGTERM), then SIGCONTs it
        os.kill(os.getpid(), signal.SIGSTOP)
    elif kind == "oom":  # a real allocator failure: far more memory than any machine has
        import torch  # (here: `data build` calls the hooks too, and does not otherwise import torch)

        torch.empty(1 << 62, dtype=torch.uint8, device=loss.device if loss is not None else "cpu")
    elif kind == "nan_loss" and loss is not None:
        loss.mul_(float("nan"))  # recorded by autograd, so the gradients turn NaN too (as with a real overflow)
    elif kind == "kill":
        marker = os.environ.get("LITEBERT_FAULT_ONCE")
        if marker:  # kill only on the first attempt (torchrun restarts the worker)
            if Path(marker).exists():
                return
            Path(marker).touch()
        os.kill(os.getpid(), signal.SIGKILL)


def with_file_faults(writers: dict, step: int) -> dict:
    """LITEBERT_FAULT="kill_after_file:STEP:K" SIGKILLs this process right after the K-th file of the
    checkpoint at STEP is written (K = number of files: after all files, before the commit marker; K = 0: the
    temp dir exists but no file is written yet)."""
    spec = os.environ.get("LITEBERT_FAULT", "").split(":")
    if spec[0] != "kill_after_file" or int(spec[1]) != step:
        return writers
    k, written = int(spec[2]), []

    def wrap(name, write):
        def run_and_maybe_die(path):
            if k == 0:
                os.kill(os.getpid(), signal.SIGKILL)
            write(path)
            written.append(name)
            if len(written) == k:
                os.kill(os.getpid(), signal.SIGKILL)
        return run_and_maybe_die

    return {name: wrap(name, w) for name, w in writers.items()}
