"""Durable file writes, shared by checkpoints, the token store, tokenizers and run records.

`atomic_write` is write-to-temporary, fsync, rename: a reader (or a crash) sees the old file or the new one, never
half of one. `fsync_dir` makes the rename itself durable. No torch here, so the tokenizer can use it too.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Callable

from litebert.errors import CheckpointError


def atomic_write(file: Path, write: Callable[[Path], None]) -> None:
    """write(tmp) then rename over `file`. An OSError (full disk, read-only) becomes a CheckpointError naming the
    file, and the temporary is removed."""
    file = Path(file)
    tmp = file.with_name(f".{file.name}.tmp-{os.getpid()}")
    try:
        write(tmp)
        fsync_file(tmp)
        os.replace(tmp, file)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise CheckpointError(f"{file}: cannot write ({exc.strerror or exc})") from None


def atomic_write_bytes(file: Path, data: bytes) -> None:
    atomic_write(file, lambda tmp: tmp.write_bytes(data))


def fsync_file(file: Path) -> None:
    fd = os.open(file, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    """Make renames and new entries in `path` durable. Windows cannot open directories; there is nothing to do."""
    if os.name == "nt":
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as e:  # some network file systems refuse fsync on directories
        if e.errno not in (errno.EINVAL, errno.ENOTSUP):
            raise
    finally:
        os.close(fd)


def read_json(path: Path, error: type[Exception], missing: str = "not found"):
    """The parsed JSON of `path`; a missing file or bad JSON raises `error` naming the file."""
    import json

    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error(f"{path}: {missing}") from None
    except (OSError, ValueError) as exc:
        raise error(f"{path}: not valid JSON ({exc})") from None
