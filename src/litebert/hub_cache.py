"""Hugging Face Hub ids ("albert/albert-base-v2") resolved through the local Hub cache, never the network.

The cache layout is huggingface_hub's: `<cache>/models--<org>--<name>/refs/main` holds the commit hash that
`snapshots/<commit>/` is named after, and the snapshot holds the repository's files (links into `blobs/`).
The cache folder is HF_HUB_CACHE (or its older name HUGGINGFACE_HUB_CACHE), else `$HF_HOME/hub`, else
`$XDG_CACHE_HOME/huggingface/hub`, else `~/.cache/huggingface/hub`, as huggingface_hub decides it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from litebert.errors import CheckpointError, LitebertError

# An id as the Hub spells it: "name" or "org/name", letters, digits, "-", "_", "."; no "..", no leading dot.
_HUB_ID = re.compile(r"^(?!\.)[A-Za-z0-9_.-]+(/(?!\.)[A-Za-z0-9_.-]+)?$")


def hub_cache_dir() -> Path:
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(var):
            return Path(os.environ[var]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "huggingface" / "hub"


def looks_like_hub_id(name: str) -> bool:
    return bool(_HUB_ID.match(name)) and ".." not in name


def resolve_model_path(name: str | os.PathLike, error: type[LitebertError] = CheckpointError) -> Path:
    """`name` itself when it exists (or does not look like a Hub id); else its snapshot in the Hub cache.

    A Hub id that is not in the cache raises `error` saying where we looked and how to get it.
    """
    path = Path(name)
    if path.exists() or not looks_like_hub_id(str(name)):
        return path
    repo_id = str(name)
    cache = hub_cache_dir()
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    ref = repo / "refs" / "main"
    if ref.is_file():
        commit = ref.read_text(encoding="utf-8").strip()
        snapshot = repo / "snapshots" / commit
        if snapshot.is_dir():
            return snapshot
        problem = f"{ref} names commit {commit}, but {snapshot} is missing"
    elif repo.is_dir():
        problem = f"{repo} has no refs/main (downloaded at a pinned revision?)"
    else:
        problem = f"not in the Hugging Face cache at {cache}"
    raise error(
        f"{repo_id}: no such local file or directory, and {problem}. litebert never downloads. To get it, on a machine "
        f"with network run `hf download {repo_id}` (huggingface_hub; older versions: `huggingface-cli download "
        f"{repo_id}`) and copy {repo.name} into the cache here (HF_HUB_CACHE or HF_HOME/hub), or save the model "
        f"to a directory and pass that path")
