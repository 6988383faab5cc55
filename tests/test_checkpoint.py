"""Crash safety, pruning and safe loading of checkpoints (promises P1 and P11 of the reliability notes)."""

import errno
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from litebert.checkpoint import (COMMIT, check_state_dict, cleanup_incomplete, find_latest_checkpoint, load_state,
                                 save_checkpoint, save_state, validate_checkpoint)
from litebert.errors import CheckpointError

FILES = ("model.safetensors", "training_state.pt", "trainer_state.json")


def _writers(version: str) -> dict:
    """Byte writers whose content says which save made them (so a test can tell old from new)."""
    return {name: (lambda path, name=name: path.write_bytes(f"{name}:{version}\n".encode() * 50)) for name in FILES}


def _content(ckpt: Path) -> str:
    return (ckpt / FILES[0]).read_bytes().decode().splitlines()[0].split(":")[1]


def _listing(run_dir: Path) -> list[str]:
    return sorted(p.name for p in run_dir.iterdir())


# ------------------------------------------------------------------------------------------ save / find


def test_save_writes_manifest_and_finds_latest(tmp_path):
    assert find_latest_checkpoint(tmp_path / "absent") is None
    for step in (10, 20):
        path = save_checkpoint(tmp_path, step, _writers(f"v{step}"))
        assert path == tmp_path / f"checkpoint-{step}"
    assert _listing(tmp_path) == ["checkpoint-10", "checkpoint-20"]  # no temp dirs left
    latest = find_latest_checkpoint(tmp_path, verify=True)
    assert latest == tmp_path / "checkpoint-20" and _content(latest) == "v20"
    manifest = json.loads((latest / COMMIT).read_text())
    assert manifest["step"] == 20 and sorted(manifest["files"]) == sorted(FILES)
    import hashlib

    for name, info in manifest["files"].items():
        data = (latest / name).read_bytes()
        assert info == {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def test_keep_prunes_only_older_complete_checkpoints(tmp_path):
    for step in range(1, 6):
        save_checkpoint(tmp_path, step, _writers("x"), keep=2)
    assert _listing(tmp_path) == ["checkpoint-4", "checkpoint-5"]
    # A lower step (a run rolled back to an earlier checkpoint) never deletes higher ones.
    save_checkpoint(tmp_path, 3, _writers("y"), keep=1)
    assert _listing(tmp_path) == ["checkpoint-3", "checkpoint-4", "checkpoint-5"]
    save_checkpoint(tmp_path, 9, _writers("z"), keep=None)
    save_checkpoint(tmp_path, 10, _writers("z"), keep=1)
    assert _listing(tmp_path) == ["checkpoint-10"]


def test_resave_same_step_replaces_it(tmp_path):
    save_checkpoint(tmp_path, 5, _writers("old"))
    save_checkpoint(tmp_path, 5, _writers("new"))
    assert _listing(tmp_path) == ["checkpoint-5"]
    assert _content(find_latest_checkpoint(tmp_path, verify=True)) == "new"


def test_damaged_checkpoints_are_skipped(tmp_path):
    save_checkpoint(tmp_path, 1, _writers("one"))
    newest = save_checkpoint(tmp_path, 2, _writers("two"))
    target = newest / FILES[1]
    data = bytearray(target.read_bytes())
    data[3] ^= 0xFF  # same size: only the sha256 check sees it
    target.write_bytes(bytes(data))
    assert find_latest_checkpoint(tmp_path) == newest
    assert find_latest_checkpoint(tmp_path, verify=True) == tmp_path / "checkpoint-1"
    with pytest.raises(CheckpointError, match=f"{target}: sha256"):
        validate_checkpoint(newest, verify=True)
    target.write_bytes(bytes(data[:10]))  # truncated
    with pytest.raises(CheckpointError, match=f"{target}: 10 bytes"):
        validate_checkpoint(newest)
    assert find_latest_checkpoint(tmp_path) == tmp_path / "checkpoint-1"
    (newest / FILES[2]).unlink()
    with pytest.raises(CheckpointError, match="missing"):
        validate_checkpoint(newest)
    assert newest not in cleanup_incomplete(tmp_path)  # committed checkpoints are never removed


@pytest.mark.parametrize("err,reason", [(errno.ENOSPC, "the disk is full"),
                                        (errno.EROFS, "the file system is read-only")])
def test_oserror_during_save_keeps_previous(tmp_path, err, reason):
    save_checkpoint(tmp_path, 1, _writers("good"))

    def failing(path):
        path.write_bytes(b"partial")
        raise OSError(err, os.strerror(err), str(path))

    writers = {**_writers("bad"), "training_state.pt": failing}
    with pytest.raises(CheckpointError, match=reason) as info:
        save_checkpoint(tmp_path, 2, writers)
    assert "checkpoint-2" in str(info.value) and "training_state.pt" in str(info.value)
    assert _listing(tmp_path) == ["checkpoint-1"]
    assert _content(find_latest_checkpoint(tmp_path, verify=True)) == "good"


def test_other_writer_errors_clean_up_and_propagate(tmp_path):
    save_checkpoint(tmp_path, 1, _writers("good"))

    def buggy(path):
        raise ValueError("bug in writer")

    with pytest.raises(ValueError, match="bug in writer"):
        save_checkpoint(tmp_path, 1, {"a.bin": buggy})
    with pytest.raises(CheckpointError, match="without creating the file"):
        save_checkpoint(tmp_path, 2, {"a.bin": lambda path: None})
    assert _listing(tmp_path) == ["checkpoint-1"] and _content(tmp_path / "checkpoint-1") == "good"


def test_cleanup_only_touches_our_names(tmp_path):
    save_checkpoint(tmp_path, 1, _writers("one"))
    ours = [tmp_path / ".tmp-checkpoint-2-123", tmp_path / ".trash-checkpoint-0-9", tmp_path / "checkpoint-3"]
    theirs = [tmp_path / "checkpoint-final", tmp_path / "my-checkpoint-4", tmp_path / ".tmp-other"]
    for d in ours + theirs:
        d.mkdir()
        (d / "f").write_text("x")
    (tmp_path / "checkpoint-7").symlink_to(tmp_path / "my-checkpoint-4")
    (tmp_path / "notes.txt").write_text("keep me")
    assert sorted(cleanup_incomplete(tmp_path)) == sorted(ours)
    assert all(d.exists() for d in theirs) and (tmp_path / "notes.txt").exists()
    assert (tmp_path / "checkpoint-7").is_symlink()
    assert find_latest_checkpoint(tmp_path) == tmp_path / "checkpoint-1"


# ------------------------------------------------------------------------------------------ crash simulation

# Runs one save in a fresh interpreter that kills itself at a chosen point: after writing file i
# ("file0".."file2"), at the n-th os.rename ("rename1", ...) or inside the prune's delete ("rmtree").
CRASH_SCRIPT = r"""
import os, shutil, signal, sys
from pathlib import Path
from litebert.checkpoint import save_checkpoint

run_dir, step, version, point, how = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]

def die():
    if how == "exit":
        os._exit(1)
    os.kill(os.getpid(), signal.SIGKILL)

names = ["model.safetensors", "training_state.pt", "trainer_state.json"]

def writer(i, name):
    def write(path):
        path.write_bytes(f"{name}:{version}\n".encode() * 50)
        if point == f"file{i}":
            die()
    return write

if point.startswith("rename"):
    target, real_rename, calls = int(point[6:]), os.rename, [0]
    def rename(src, dst):
        calls[0] += 1
        if calls[0] == target:
            die()
        return real_rename(src, dst)
    os.rename = rename
if point == "rmtree":
    shutil.rmtree = lambda *a, **k: die()
save_checkpoint(run_dir, step, {n: writer(i, n) for i, n in enumerate(names)}, keep=2)
print("survived")
"""


def _crash_save(run_dir: Path, step: int, version: str, point: str, how: str = "kill") -> None:
    proc = subprocess.run([sys.executable, "-c", CRASH_SCRIPT, str(run_dir), str(step), version, point, how],
                          capture_output=True, text=True, timeout=120)
    expected = 1 if how == "exit" else -signal.SIGKILL
    assert proc.returncode == expected, proc.stdout + proc.stderr


@pytest.mark.parametrize("point,how", [("file0", "kill"), ("file1", "exit"), ("file2", "kill"),
                                       ("rename1", "kill")])
def test_crash_during_new_step_leaves_previous(tmp_path, point, how):
    save_checkpoint(tmp_path, 1, _writers("one"))
    save_checkpoint(tmp_path, 2, _writers("two"))
    _crash_save(tmp_path, 3, "three", point, how)
    (tmp,) = [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-checkpoint-3-")]
    # The crash landed where intended: after file i, or with the temp dir complete (COMMIT in) but not renamed.
    written = sorted(p.name for p in tmp.iterdir())
    assert written == (sorted(FILES + (COMMIT,)) if point == "rename1" else sorted(FILES[: int(point[4:]) + 1]))
    latest = find_latest_checkpoint(tmp_path, verify=True)
    assert latest == tmp_path / "checkpoint-2" and _content(latest) == "two"
    removed = cleanup_incomplete(tmp_path)
    assert [p.name.startswith(".tmp-checkpoint-3-") for p in removed] == [True]
    assert _listing(tmp_path) == ["checkpoint-1", "checkpoint-2"]
    # The next save goes through and prunes as usual.
    save_checkpoint(tmp_path, 3, _writers("three"), keep=2)
    assert _listing(tmp_path) == ["checkpoint-2", "checkpoint-3"]


def test_crash_while_pruning_keeps_new_checkpoint(tmp_path):
    save_checkpoint(tmp_path, 1, _writers("one"))
    save_checkpoint(tmp_path, 2, _writers("two"))
    _crash_save(tmp_path, 3, "three", "rmtree")  # killed after checkpoint-1 was renamed to .trash-
    assert _content(find_latest_checkpoint(tmp_path, verify=True)) == "three"
    assert [p.name.startswith(".trash-checkpoint-1-") for p in cleanup_incomplete(tmp_path)] == [True]
    assert _listing(tmp_path) == ["checkpoint-2", "checkpoint-3"]


@pytest.mark.parametrize("point,visible", [("file1", "old"), ("rename1", "old"), ("rename2", "one")])
def test_crash_while_resaving_same_step(tmp_path, point, visible):
    save_checkpoint(tmp_path, 1, _writers("one"))
    save_checkpoint(tmp_path, 2, _writers("old"))
    # rename1 = moving the old checkpoint-2 aside; rename2 = moving the new one in, with the old one aside:
    # then no checkpoint-2 exists until cleanup_incomplete renames the aside copy back.
    _crash_save(tmp_path, 2, "new", point)
    assert _content(find_latest_checkpoint(tmp_path, verify=True)) == visible
    assert (tmp_path / "checkpoint-2").exists() == (point != "rename2")
    cleanup_incomplete(tmp_path)
    assert _listing(tmp_path) == ["checkpoint-1", "checkpoint-2"]
    assert _content(find_latest_checkpoint(tmp_path, verify=True)) == "old"


# ------------------------------------------------------------------------------------------ training state


class _Payload:
    """Unpickling this calls open(marker, "w"), i.e. creates the marker file: a stand-in for any code."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_malicious_training_state_is_refused_without_running(tmp_path):
    marker = tmp_path / "pwned"
    run_dir = tmp_path / "run"
    ckpt = save_checkpoint(run_dir, 1, {"training_state.pt": lambda p: torch.save({"x": _Payload(marker)}, p)})
    assert find_latest_checkpoint(run_dir, verify=True) == ckpt  # the file itself is intact
    with pytest.raises(CheckpointError, match=r"training_state\.pt: cannot load training state"):
        load_state(ckpt / "training_state.pt")
    assert not marker.exists()
    # The payload is real: an unsafe load does run it.
    torch.load(ckpt / "training_state.pt", weights_only=False)["x"].close()
    assert marker.exists()


def test_training_state_round_trips_with_weights_only(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.LayerNorm(3))
    from litebert.optim import build_optimizer, make_scheduler

    opt = build_optimizer(model, "lamb", lr=1e-3)
    sched = make_scheduler(opt, warmup_steps=2, total_steps=10)
    model(torch.randn(2, 3)).sum().backward()
    opt.step()
    sched.step()
    rng = np.random.default_rng(7)
    state = {"optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
             "scaler": torch.amp.GradScaler("cpu", enabled=False).state_dict(),
             "rng": {"torch": torch.get_rng_state(), "numpy": rng.bit_generator.state},
             "data": {"epoch": 1, "position": 12345}}
    path = tmp_path / "training_state.pt"
    save_state(path, state)
    loaded = torch.load(path, weights_only=True)  # plain torch.load, no allowlist
    assert loaded["data"] == state["data"]
    assert torch.equal(loaded["rng"]["torch"], state["rng"]["torch"])
    restored = np.random.default_rng()
    restored.bit_generator.state = load_state(path)["rng"]["numpy"]
    assert restored.integers(1 << 30, size=5).tolist() == rng.integers(1 << 30, size=5).tolist()
    assert loaded["scheduler"]["last_epoch"] == 1


def test_save_state_rejects_what_weights_only_refuses(tmp_path):
    with pytest.raises(CheckpointError, match=r"state\['rng'\]\['numpy'\] is a numpy.ndarray"):
        save_state(tmp_path / "s.pt", {"rng": {"numpy": np.zeros(3)}})
    assert not (tmp_path / "s.pt").exists()


def test_truncated_or_missing_training_state(tmp_path):
    path = tmp_path / "training_state.pt"
    save_state(path, {"w": torch.arange(1000)})
    data = path.read_bytes()
    for size in (len(data) // 2, 0):
        path.write_bytes(data[:size])
        with pytest.raises(CheckpointError, match=f"{path}: cannot load training state"):
            load_state(path)
    with pytest.raises(CheckpointError, match="not found"):
        load_state(tmp_path / "nope.pt")


# ------------------------------------------------------------------------------------------ weights


def test_weights_round_trip_and_corruption(tmp_path):
    """A checkpoint's weights are written and read as a model directory's (pretrained.model_files, load_tensors)."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    from litebert.pretrained import _write_safetensors, load_tensors

    path = tmp_path / "model.safetensors"
    tensors = {"a": torch.randn(4, 3), "b": torch.arange(5), "t": torch.randn(3, 4).t()}  # t: non-contiguous
    _write_safetensors(tensors, path)
    loaded = load_tensors(path)
    assert loaded.keys() == tensors.keys() and all(torch.equal(loaded[k], tensors[k]) for k in tensors)
    with safe_open(str(path), framework="pt") as f:
        assert f.metadata() == {"format": "pt"}  # HF's convention
    assert torch.equal(load_file(path)["t"], tensors["t"])  # readable by the reference loader
    data = path.read_bytes()
    assert torch.equal(load_tensors(tmp_path / "never-read", data)["a"], tensors["a"])  # bytes read_verified checked
    for size in (len(data) - 8, 40, 3):
        path.write_bytes(data[:size])
        with pytest.raises(CheckpointError, match=f"{path}: cannot read safetensors"):
            load_tensors(path)
    with pytest.raises(CheckpointError, match="not found"):
        load_tensors(tmp_path / "missing.safetensors")


def test_check_state_dict_names_file_and_tensors():
    expected = {"emb.weight": (10, 4), "dense.weight": (4, 4), "dense.bias": (4,)}
    good = {"emb.weight": torch.zeros(10, 4), "dense.weight": torch.zeros(4, 4), "dense.bias": torch.zeros(4)}
    check_state_dict(expected, good, "m.safetensors")
    bad = {"emb.weight": torch.zeros(4, 10), "dense.weight": torch.zeros(4, 4), "extra": torch.zeros(1)}
    with pytest.raises(CheckpointError) as info:
        check_state_dict(expected, bad, "m.safetensors")
    msg = str(info.value)
    assert msg.startswith("m.safetensors: ")
    assert "missing tensors: dense.bias" in msg and "unexpected tensors: extra" in msg
    assert "emb.weight (4, 10) (expected (10, 4))" in msg
    partial = {"emb.weight": torch.zeros(10, 4), "dense.weight": torch.zeros(4, 4), "extra": torch.zeros(1)}
    with pytest.raises(CheckpointError, match="missing tensors: dense.bias$"):
        check_state_dict(expected, partial, "m.safetensors", allow_unexpected=True)
