"""Crash-safe checkpoints in a run directory, and safe loading of the files in them.

Layout of RUN_DIR (only these names are ever created, renamed or deleted here):
    checkpoint-STEP/               a complete checkpoint: the files, plus COMMIT (JSON manifest) written last
    .tmp-checkpoint-STEP-PID/      a save in progress; never read
    .old-checkpoint-STEP-PID/      the previous checkpoint-STEP while a re-save of the same step replaces it
    .trash-checkpoint-STEP-PID/    a pruned checkpoint being deleted

Protocol: write every file into the temp dir and fsync it; write COMMIT (step, and each file's size and sha256);
fsync the dir; rename it to checkpoint-STEP (the rename is the commit); fsync RUN_DIR; only then prune older ones.
A crash at any moment therefore leaves every earlier checkpoint-N intact, and a checkpoint-N is only trusted
when its COMMIT lists files that exist with the listed sizes. Call `cleanup_incomplete` once when a run starts
(it also puts back a checkpoint that a crash caught in the middle of a same-step replace).

Exactly one process saves into a run dir (rank 0, after a barrier): concurrent renames in one directory are
what broke HF Trainer's two attempts at this scheme. The temp dir sits inside RUN_DIR so the rename never
crosses file systems (EXDEV).

File contents: weights in safetensors (`pretrained.model_files`); everything else (optimizer, scheduler, scaler, RNG
states as tensors, data position as ints) through `save_state`, which `load_state` reads back with
`torch.load(weights_only=True)`, so a checkpoint file can never run code.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import numbers
import os
import re
import shutil
import warnings
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from litebert.errors import CheckpointError, ConfigError
from litebert.files import disk_error, fsync_dir, move_into_place, read_json, reason, write_through

# torch is imported inside the functions that need it: finding and cleaning checkpoints
# (the CLI's `--resume auto`, the crash tests' subprocesses) should not pay for importing torch.

log = logging.getLogger(__name__)

COMMIT = "COMMIT"
FORMAT = "litebert-checkpoint"
_CKPT_RE = re.compile(r"^checkpoint-(\d+)$")
_TEMP_RE = re.compile(r"^\.(tmp|old|trash)-checkpoint-(\d+)-(\d+)$")
_CHUNK = 1 << 20


# ------------------------------------------------------------------------------------------ save


def save_checkpoint(run_dir: str | os.PathLike, step: int, writers: Mapping[str, Callable[[Path], None]],
                    keep: int | None = 3) -> Path:
    """Write `run_dir/checkpoint-{step}/` atomically and return its path.

    `writers` maps a file name to a function that writes that one file at the path it is given (for example
    `pretrained.model_files(model)`). If checkpoint-{step} exists it is replaced. Afterwards complete
    checkpoints with a lower step are deleted until `keep` remain, the new one included (None keeps all).
    A disk error (full, read-only, permission denied; also when safetensors or torch report it as their own
    exception) removes the partial save and becomes a CheckpointError; any other exception from a writer also
    removes it and propagates unchanged.
    """
    run_dir = Path(run_dir)
    path = run_dir
    if isinstance(step, bool) or not isinstance(step, numbers.Integral) or step < 0:
        raise ConfigError(f"step: must be an integer >= 0, got {step!r}")
    step = int(step)
    if keep is not None and keep < 1:
        raise ConfigError(f"keep: must be >= 1 (or None to keep every checkpoint), got {keep}")
    for name in writers:
        _check_file_name(name)
    final = run_dir / f"checkpoint-{step}"
    tmp = run_dir / f".tmp-checkpoint-{step}-{os.getpid()}"
    committed = False
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        if tmp.exists():  # left by a crashed save whose pid we now reuse
            shutil.rmtree(tmp)
        tmp.mkdir()
        files = {}
        for name, writer in writers.items():
            path = tmp / name
            writer(path)
            if not path.is_file():
                raise CheckpointError(f"{path}: the writer for {name!r} returned without creating the file")
            files[name] = _sync_and_describe(path)
        _write_commit(tmp, {"format": FORMAT, "version": 1, "step": step, "files": files})
        fsync_dir(tmp)
        aside = move_into_place(tmp, final)
        committed = True
        fsync_dir(run_dir)
    except Exception as e:
        err = e if isinstance(e, OSError) else disk_error(e)
        if committed and err is not None:
            raise CheckpointError(f"{run_dir}: {final.name} was written but syncing the directory failed ({e}); "
                                  "it may not survive a power loss") from e
        _remove_tree(tmp)
        if err is None:
            raise
        if err.filename is None:  # torch's and safetensors' errors do not say which file; the one being written
            err.filename = str(path)
        raise CheckpointError(_save_error_message(run_dir, step, err)) from e
    except BaseException:
        _remove_tree(tmp)
        raise
    if aside is not None:
        _remove_tree(aside)
    if keep is not None:
        _prune(run_dir, step, keep)
    return final


def _is_plain_name(name: str) -> bool:
    return bool(name) and not name.startswith(".") and "/" not in name and os.sep not in name and name != COMMIT


def _check_file_name(name: str) -> None:
    if not _is_plain_name(name):
        raise ConfigError(f"checkpoint file name {name!r}: must be a plain name, not hidden, not {COMMIT!r}")


def _sync_and_describe(path: Path) -> dict[str, Any]:
    """fsync one written file and return its size and sha256 (one read, served from the page cache)."""
    with open(path, "rb") as f:
        size, sha256 = _hash_stream(f)
        os.fsync(f.fileno())
    return {"size": size, "sha256": sha256}


def _hash_stream(f) -> tuple[int, str]:
    digest, size = hashlib.sha256(), 0
    while chunk := f.read(_CHUNK):
        digest.update(chunk)
        size += len(chunk)
    return size, digest.hexdigest()


def _write_commit(directory: Path, manifest: dict[str, Any]) -> None:
    with open(directory / COMMIT, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())


def _prune(run_dir: Path, step: int, keep: int) -> None:
    """Delete complete checkpoints with a lower step beyond the newest `keep - 1` of them.

    Higher steps are never touched (they belong to a run this one rolled back from). Each victim is first
    renamed to a .trash- name so a crash mid-delete never leaves a half-deleted checkpoint-N behind.
    A failure here is logged, not raised: the new checkpoint is already committed.
    """
    older = [(s, p) for s, p in _checkpoint_dirs(run_dir) if s < step and _is_complete(p)]
    victims = sorted(older)[: max(0, len(older) - (keep - 1))]
    for _s, path in victims:
        trash = run_dir / f".trash-{path.name}-{os.getpid()}"
        try:
            os.rename(path, trash)
        except OSError as e:
            log.warning("could not prune %s: %s", path, e)
            continue
        _remove_tree(trash)
    if victims:
        try:
            fsync_dir(run_dir)
        except OSError as e:
            log.warning("could not fsync %s after pruning: %s", run_dir, e)


def _remove_tree(path: Path) -> None:
    """Best-effort delete of one of our own temp dirs; leftovers are reported and `cleanup_incomplete` retries."""
    if not path.exists():
        return
    try:
        shutil.rmtree(path)
    except OSError as e:
        log.warning("could not remove %s: %s (cleanup_incomplete will retry)", path, e)


def _save_error_message(run_dir: Path, step: int, e: OSError) -> str:
    kept = (f"earlier checkpoints in {run_dir} are intact" if _checkpoint_dirs(run_dir) else
            "no checkpoint was saved before it (the same command starts the run again)")
    return (f"{e.filename or run_dir}: could not save checkpoint-{step}: {reason(e)} ({e}). Nothing was committed and "
            f"{kept}; free some space or choose a writable run directory")


# ------------------------------------------------------------------------------------------ find / validate


def checkpoint_step(path: str | os.PathLike) -> int | None:
    """N for a checkpoint-N directory's path, None for any other name."""
    match = _CKPT_RE.match(Path(path).name)
    return int(match.group(1)) if match else None


def _checkpoint_dirs(run_dir: Path) -> list[tuple[int, Path]]:
    """(step, path) of every checkpoint-N directory, complete or not, in step order."""
    if not run_dir.is_dir():
        return []
    found = []
    for entry in os.scandir(run_dir):
        step = checkpoint_step(entry.name)
        if step is not None and entry.is_dir():
            found.append((step, Path(entry.path)))
    return sorted(found)


def checkpoint_dirs(run_dir: str | os.PathLike) -> list[Path]:
    """Every checkpoint-N directory of `run_dir` (complete or not), oldest first."""
    return [path for _, path in _checkpoint_dirs(Path(run_dir))]


def validate_checkpoint(path: str | os.PathLike, verify: bool = False) -> dict[str, Any]:
    """Return the COMMIT manifest of a complete checkpoint dir, or raise CheckpointError saying what is wrong.

    Checks that every listed file exists with the listed size; `verify=True` also re-hashes each file (sha256),
    which catches same-size corruption at the cost of reading the whole checkpoint.
    """
    path = Path(path)
    commit = path / COMMIT
    if not path.is_dir():
        raise CheckpointError(f"{path}: not a checkpoint directory")
    if not commit.exists():
        raise CheckpointError(f"{path}: no {COMMIT} marker, so its save never finished; resume from an earlier "
                              "checkpoint (cleanup_incomplete removes this one)")
    manifest = read_json(commit, CheckpointError,
                         hint="the commit marker is damaged: resume from an earlier checkpoint")
    if not (isinstance(manifest, dict) and manifest.get("format") == FORMAT
            and isinstance(manifest.get("files"), dict) and isinstance(manifest.get("step"), int)):
        raise CheckpointError(f"{commit}: not a {FORMAT} commit marker")
    match = _CKPT_RE.match(path.name)
    if match and int(match.group(1)) != manifest["step"]:
        raise CheckpointError(f"{commit}: records step {manifest['step']} but the directory is {path.name}")
    for name, info in manifest["files"].items():
        if not isinstance(info, dict) or not _is_plain_name(name):
            raise CheckpointError(f"{commit}: bad entry for file {name!r}")
        file = path / name
        try:
            size = file.stat().st_size
        except FileNotFoundError:
            raise CheckpointError(f"{file}: listed in {commit} but missing") from None
        if size != info.get("size"):
            raise CheckpointError(f"{file}: {size} bytes but {commit} records {info.get('size')} "
                                  "(truncated or overwritten)")
        if verify:
            with open(file, "rb") as f:
                if _hash_stream(f)[1] != info.get("sha256"):
                    raise CheckpointError(f"{file}: sha256 differs from {commit}: the file is corrupt")
    return manifest


def read_verified(path: str | os.PathLike, names: tuple[str, ...] = ()) -> dict[str, bytes]:
    """Check every file of a complete checkpoint against the sha256 in its COMMIT while reading it once; return
    the bytes of the files in `names` (the others are hashed and dropped), so they are loaded from what was
    checked. A missing, resized, unreadable or changed file raises CheckpointError naming it."""
    path = Path(path)
    commit = path / COMMIT
    manifest = validate_checkpoint(path)
    kept = {}
    for name, info in manifest["files"].items():
        file = path / name
        try:
            with open(file, "rb") as f:
                if name in names:  # one read into one buffer, hashed there: no chunk list to join
                    kept[name] = f.read()
                    digest = hashlib.sha256(kept[name]).hexdigest()
                else:
                    digest = _hash_stream(f)[1]
        except OSError as e:
            raise CheckpointError(f"{file}: unreadable ({e.strerror or e})") from None
        if digest != info.get("sha256"):
            raise CheckpointError(f"{file}: sha256 differs from {commit}: the file is corrupt")
    missing = [n for n in names if n not in kept]
    if missing:
        raise CheckpointError(f"{commit}: does not list {missing}; not a checkpoint of this kind")
    return kept


def _is_complete(path: Path) -> bool:
    try:
        validate_checkpoint(path)
        return True
    except CheckpointError:
        return False


def find_latest_checkpoint(run_dir: str | os.PathLike, verify: bool = False) -> Path | None:
    """The highest-step complete checkpoint-N in `run_dir` (see `validate_checkpoint`), or None.

    Incomplete or damaged checkpoint dirs are skipped with a logged warning naming the reason; temp dirs
    (dot names) are never considered.
    """
    for _, path in reversed(_checkpoint_dirs(Path(run_dir))):
        try:
            validate_checkpoint(path, verify=verify)
            return path
        except CheckpointError as e:
            log.warning("skipping %s", e)
    return None


def cleanup_incomplete(run_dir: str | os.PathLike) -> list[Path]:
    """Remove what interrupted saves left behind in `run_dir`; return the removed paths.

    Removes .tmp-/.trash-checkpoint-* dirs and checkpoint-N dirs without a COMMIT marker. A .old-checkpoint-N-*
    dir (a crash between the two renames of a same-step replace) is renamed back to checkpoint-N when that is
    missing and it is complete, otherwise removed. Checkpoints with a COMMIT marker are never removed, even
    damaged ones (find_latest_checkpoint skips them, and a person may want to look). Symlinks and names that
    do not match these patterns are left alone. Run it when no other process is saving into `run_dir`.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return []
    removed: list[Path] = []
    for entry in sorted(os.scandir(run_dir), key=lambda e: e.name):
        if entry.is_symlink() or not entry.is_dir():
            continue
        path = Path(entry.path)
        temp = _TEMP_RE.match(entry.name)
        uncommitted = _CKPT_RE.match(entry.name) and not (path / COMMIT).exists()
        if temp and temp.group(1) == "old":
            final = run_dir / f"checkpoint-{temp.group(2)}"
            if not final.exists() and _is_complete(path):
                os.rename(path, final)
                log.warning("restored %s from %s (a replace of that step was interrupted)", final, path)
                continue
        elif not (temp or uncommitted):
            continue
        try:
            shutil.rmtree(path)
        except OSError as e:
            raise CheckpointError(f"{path}: cannot remove this leftover of an interrupted save ({e}); "
                                  "delete it by hand") from e
        removed.append(path)
    if removed:
        fsync_dir(run_dir)
    return removed


# ------------------------------------------------------------------------------------------ training state


_PLAIN_LEAVES = (type(None), bool, int, float, complex, str, bytes)


def _check_loadable(obj: Any, where: str) -> None:
    """Reject what torch.load(weights_only=True) would refuse, naming the key, before anything is written."""
    import torch

    if isinstance(obj, _PLAIN_LEAVES) or isinstance(obj, (torch.Tensor, torch.dtype, torch.device)):
        return
    if type(obj) in (dict, OrderedDict):
        for key, value in obj.items():
            _check_loadable(key, f"{where} key {key!r}")
            _check_loadable(value, f"{where}[{key!r}]")
        return
    if type(obj) in (list, tuple, set, torch.Size):
        for i, value in enumerate(obj):
            _check_loadable(value, f"{where}[{i}]")
        return
    raise TypeError(f"{where} is a {type(obj).__module__}.{type(obj).__qualname__}, which "
                    "torch.load(weights_only=True) refuses; store tensors, numbers, strings and plain containers "
                    "(e.g. RNG states via torch.get_rng_state() or Generator.bit_generator.state)")


def save_state(path: str | os.PathLike, obj: Any) -> None:
    """torch.save a training-state object made only of tensors, numbers, strings and plain containers.

    Optimizer, LambdaLR and GradScaler state dicts qualify as they are. Anything else raises CheckpointError
    here rather than making a checkpoint that `load_state` would later refuse.
    """
    import torch

    try:
        _check_loadable(obj, "state")
    except TypeError as e:
        raise CheckpointError(f"{path}: cannot save training state: {e}") from None
    write_through(Path(path), lambda f: torch.save(obj, f))  # a full disk raises its OSError, not torch's


def load_state(path: str | os.PathLike, data: bytes | None = None) -> Any:
    """Load a `save_state` file onto the CPU with weights_only=True. Any failure becomes a CheckpointError.
    `data`: the file's bytes when the caller has read (and checked) them already.

    weights_only refuses every pickle global outside tensors and plain containers, so a crafted file is
    rejected without running its code (torch >= 2.6, which pyproject requires: CVE-2025-32434).
    """
    import torch

    path = Path(path)
    if data is None and not path.is_file():
        raise CheckpointError(f"{path}: training-state file not found")
    try:
        with warnings.catch_warnings():  # its "Detected pickle protocol N" advice is about files torch did not write
            warnings.filterwarnings("ignore", message="Detected pickle protocol", category=UserWarning)
            return torch.load(path if data is None else io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as e:  # truncated zip (RuntimeError), empty file (EOFError), refused global (UnpicklingError)
        calls = _pickle_globals(path.read_bytes() if data is None else data)
        what = f"its pickle imports {', '.join(calls)}, which a training state never holds: refused, never executed" \
            if calls else "the file is truncated, corrupt, or holds objects other than tensors and plain containers " \
                          "(those are refused, never executed)"
        raise CheckpointError(f"{path}: cannot load training state ({type(e).__name__}: {_why(e)}); {what}; resume "
                              "from an earlier checkpoint") from e


def _why(exc: Exception) -> str:
    """The reason in torch.load's message, without its advice to re-run with weights_only=False or to allowlist
    the global (either would run the file's code: the one thing a refused file must never get). torch words the
    reason on a line of its own, or (some refusals) only in the exception it re-raises from."""
    inner = exc.__cause__ or exc.__context__
    texts = [str(exc)] + ([str(inner)] if inner is not None and str(inner).strip() else [])
    lines = [line.strip() for text in texts for line in text.strip().splitlines() if line.strip()]
    named = [line.split("WeightsUnpickler error:", 1)[1].strip() for line in lines if "WeightsUnpickler error:" in line]
    plain = [line for line in lines if "weights_only" not in line and "trust the source" not in line
             and "Weights only load failed" not in line and "Check the documentation" not in line]
    reason = next((line for line in named + plain if line), type(exc).__name__)
    return reason.split(" Please use `torch.serialization", 1)[0][:300]


# torch's own rebuild functions, the containers and the bytes codec its writer uses: what a training state may name.
_TORCH_PICKLE_MODULES = ("torch", "collections", "_codecs")


def _pickle_globals(data: bytes) -> list[str]:
    """The callables and classes a pickle (or torch's zip of one) imports other than torch's own, read from its
    opcodes without running any (pickletools); [] when it names none or cannot be read."""
    import pickletools
    import zipfile

    if data[:4] == b"PK\x03\x04":
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as zf:
                name = next((n for n in zf.namelist() if n.endswith("data.pkl")), None)
                data = zf.read(name) if name else b""
        except (zipfile.BadZipFile, OSError, KeyError):
            return []
    found, strings, stream = [], [], io.BytesIO(data)
    try:
        while stream.tell() < len(data):  # torch's legacy format is several pickles in a row
            for op, arg, _ in pickletools.genops(stream):
                if op.name == "GLOBAL":  # "module name" in one argument (protocols 0-3)
                    found.append(".".join(str(arg).split(" ", 1)))
                elif op.name == "STACK_GLOBAL" and len(strings) >= 2:  # the two strings pushed just before (4+)
                    found.append(f"{strings[-2]}.{strings[-1]}")
                if isinstance(arg, str):
                    strings.append(arg)
    except Exception:  # a damaged pickle, or raw tensor bytes after the pickles: what was read so far
        pass
    found = [g.replace("__builtin__.", "builtins.", 1) if g.startswith("__builtin__.") else g for g in found]  # (py2)
    return sorted({g for g in found if g.split(".", 1)[0] not in _TORCH_PICKLE_MODULES})


# ------------------------------------------------------------------------------------------ weights


def check_state_dict(expected: Mapping[str, Any], got: Mapping[str, Any], file: str | os.PathLike,
                     allow_unexpected: bool = False) -> None:
    """Raise CheckpointError naming `file` and the tensors that are missing, unexpected or of the wrong shape.

    `expected` maps names to shapes (tuples / torch.Size) or tensors; `got` maps names to tensors or shapes.
    """
    def shape(x: Any) -> tuple[int, ...]:
        return tuple(x.shape) if hasattr(x, "shape") else tuple(x)

    missing = [n for n in expected if n not in got]
    unexpected = [] if allow_unexpected else [n for n in got if n not in expected]
    wrong = [f"{n} {shape(got[n])} (expected {shape(expected[n])})"
             for n in expected if n in got and shape(got[n]) != shape(expected[n])]
    problems = [f"{label}: {_some(items)}" for label, items in
                (("missing tensors", missing), ("unexpected tensors", unexpected), ("wrong shapes", wrong)) if items]
    if problems:
        raise CheckpointError(f"{file}: does not match the model; " + "; ".join(problems))


def _some(items: list[str], limit: int = 5) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")
