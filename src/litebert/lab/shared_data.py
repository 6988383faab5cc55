"""Where the optional shared datasets live (GLUE, SQuAD, Gutenberg, the official vocab, ...).

Tests and benchmarks read them from `$LITEBERT_SHARED_DATA`, else `../shared/data` beside the repo root.
The library itself never needs them.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]


def shared_data_dir() -> Path:
    env = os.environ.get("LITEBERT_SHARED_DATA")
    return Path(env) if env else (REPO_ROOT.parent / "shared" / "data")
