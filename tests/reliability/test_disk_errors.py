"""Promise 6: a full disk or a read-only output directory gives a clear error, and the previous checkpoint is
intact.

The tests run as root in CI, where chmod blocks nothing, so the failures are simulated in-process at the
system-call layer the checkpoint code uses (os.mkdir, os.open) or in the weights writer, with the errno a real
file system returns. Each run is otherwise the "single" reference run (same config, 1 process, 1 thread), so what
survives can be compared with it bit for bit.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

import litebert.pretrained
from harness import assert_same_weights, checkpoint_steps, config_args, leftovers, losses, pretrain_args
from litebert.checkpoint import validate_checkpoint
from litebert.cli import main as cli_main
from litebert.errors import CheckpointError
from litebert.pretrain import PretrainConfig, pretrain


def fail_under(monkeypatch, module, name: str, root: Path, err: int, when=lambda path: True) -> None:
    """Make module.name(path, ...) raise OSError(err) for paths inside `root` for which when(path) holds."""
    real = getattr(module, name)

    def failing(path, *args, **kwargs):
        p = Path(os.fsdecode(path))
        if p.is_relative_to(root) and when(p):
            raise OSError(err, os.strerror(err), str(p))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(module, name, failing)


def test_disk_full_while_writing_a_checkpoint(tiny_data, reference_runs, tmp_path, monkeypatch):
    run, single = tmp_path / "run", reference_runs["single"]
    real_write = litebert.pretrained._write_safetensors

    def write_then_fill_the_disk(tensors, path):
        if ".tmp-checkpoint-4-" in str(path):  # half the file lands, then the disk is full
            real_write(tensors, path)
            data = path.read_bytes()
            path.write_bytes(data[: len(data) // 2])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        real_write(tensors, path)

    monkeypatch.setattr(litebert.pretrained, "_write_safetensors", write_then_fill_the_disk)
    with pytest.raises(CheckpointError, match=r"could not save checkpoint-4: the disk is full") as info:
        pretrain(PretrainConfig(**config_args(tiny_data, run)))
    assert "earlier checkpoints" in str(info.value) and "intact" in str(info.value)
    assert checkpoint_steps(run) == [2] and not leftovers(run)  # the partial save is gone
    validate_checkpoint(run / "checkpoint-2", verify=True)
    assert_same_weights(run / "checkpoint-2", single / "checkpoint-2")

    # Space again: --resume auto carries on from checkpoint-2 to the end the uninterrupted run reached.
    monkeypatch.undo()
    pretrain(PretrainConfig(**config_args(tiny_data, run)))
    assert losses(run) == losses(single)
    assert_same_weights(run / "checkpoint-8", single / "checkpoint-8")


def test_file_system_turns_read_only_during_a_run(tiny_data, reference_runs, tmp_path, monkeypatch):
    run = tmp_path / "run"
    fail_under(monkeypatch, os, "mkdir", run, errno.EROFS, when=lambda p: p.name.startswith(".tmp-checkpoint-4-"))
    with pytest.raises(CheckpointError, match=r"could not save checkpoint-4: the file system is read-only"):
        pretrain(PretrainConfig(**config_args(tiny_data, run)))
    assert checkpoint_steps(run) == [2] and not leftovers(run)
    validate_checkpoint(run / "checkpoint-2", verify=True)
    assert_same_weights(run / "checkpoint-2", reference_runs["single"] / "checkpoint-2")


@pytest.mark.parametrize("err", [errno.EROFS, errno.ENOSPC])
def test_unwritable_output_directory_fails_before_training(tiny_data, tmp_path, monkeypatch, capsys, err):
    run = tmp_path / "run"
    run.mkdir()
    fail_under(monkeypatch, os, "open", run, err)
    assert cli_main(pretrain_args(tiny_data, run)) == 2
    message = capsys.readouterr().err
    assert f"litebert: error: --out {run}: cannot write there ({os.strerror(err)})" in message
    assert "Traceback" not in message and not (run / "metrics.jsonl").exists()


def test_disk_full_while_appending_the_metrics_log(tiny_data, reference_runs, tmp_path, monkeypatch):
    """The log line after step 3 hits a full disk: a TrainingError naming metrics.jsonl, checkpoint-2 intact."""
    from litebert.errors import TrainingError

    run = tmp_path / "run"
    real_open, lines = Path.open, []

    def open_until_full(self, mode="r", *args, **kwargs):
        if self.name == "metrics.jsonl" and "a" in mode:
            lines.append(1)
            if len(lines) > 3:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))
        return real_open(self, mode, *args, **kwargs)

    monkeypatch.setattr(Path, "open", open_until_full)
    with pytest.raises(TrainingError, match=r"metrics\.jsonl: cannot write the metrics log \(No space left on "
                                            r"device\); the last checkpoint is intact"):
        pretrain(PretrainConfig(**config_args(tiny_data, run)))
    assert 2 in checkpoint_steps(run) and not leftovers(run)
    validate_checkpoint(run / "checkpoint-2", verify=True)
    assert_same_weights(run / "checkpoint-2", reference_runs["single"] / "checkpoint-2")
