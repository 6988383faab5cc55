"""Promise 1 (continued): resume loads only what verifies, and the metrics log never holds a step twice.

- Every file of a checkpoint is checked against the sha256 its COMMIT records while it is read, and the weights
  and state are loaded from those checked bytes. A damaged newest checkpoint (a same-size bit flip, or a
  training state that cannot be read) is skipped with the reason on stderr, and the run resumes from the newest
  one that verifies; an explicit --resume of a damaged checkpoint is refused.
- At every start, metrics.jsonl is cut back to the step the run continues from (0 for a fresh start), so a crash
  before the first checkpoint leaves no duplicates; a torn last line (a write cut short) is dropped and counted.
"""

from __future__ import annotations

import json
import shutil

import pytest

from harness import assert_same_weights, losses, pretrain_args, read_metrics, run_litebert


def copy_until(single, tmp_path, step: int):
    """The reference run as it was right after checkpoint-`step` (later checkpoints and log lines removed)."""
    run = tmp_path / "run"
    shutil.copytree(single, run)
    for ckpt in run.glob("checkpoint-*"):
        if int(ckpt.name.split("-")[1]) > step:
            shutil.rmtree(ckpt)
    lines = [line for line in (run / "metrics.jsonl").read_text().splitlines()
             if json.loads(line)["step"] <= step]
    (run / "metrics.jsonl").write_text("".join(line + "\n" for line in lines))
    return run


def flip_byte(file, offset: int) -> None:
    data = bytearray(file.read_bytes())
    data[offset] ^= 0x01
    file.write_bytes(bytes(data))


def largest_record_middle(zip_file) -> int:
    """Offset of a byte in the middle of the largest record of torch.save's zip (an optimizer moment tensor)."""
    import zipfile

    with zipfile.ZipFile(zip_file) as z:
        info = max(z.infolist(), key=lambda i: i.file_size)
    # a stored (uncompressed) record: local header (30 bytes + name + extra), then the data
    with open(zip_file, "rb") as f:
        f.seek(info.header_offset + 26)
        name_len, extra_len = int.from_bytes(f.read(2), "little"), int.from_bytes(f.read(2), "little")
    return info.header_offset + 30 + name_len + extra_len + info.file_size // 2


@pytest.mark.parametrize("damage", ["weights bit flip", "optimizer bit flip", "unreadable state"])
def test_a_damaged_newest_checkpoint_falls_back_to_the_one_before(tiny_data, reference_runs, tmp_path, damage):
    single = reference_runs["single"]
    run = copy_until(single, tmp_path, 6)
    ckpt = run / "checkpoint-6"
    if damage == "weights bit flip":
        flip_byte(ckpt / "model.safetensors", -100)  # inside the last tensor's data: loads fine, other weights
    elif damage == "optimizer bit flip":
        flip_byte(ckpt / "trainer_state.pt", largest_record_middle(ckpt / "trainer_state.pt"))
    else:
        size = (ckpt / "trainer_state.pt").stat().st_size
        (ckpt / "trainer_state.pt").write_bytes(b"\0" * size)  # same size, nothing readable
    done = run_litebert(pretrain_args(tiny_data, run))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "skipping checkpoint-6: " in done.stderr and "sha256 differs" in done.stderr
    assert "resuming from checkpoint-4 instead" in done.stderr and f"resumed from {run / 'checkpoint-4'}" in done.stderr
    assert losses(run) == losses(single)  # steps 5-8 retrained from checkpoint-4: the uninterrupted run's figures
    assert_same_weights(run / "checkpoint-8", single / "checkpoint-8")


def test_an_explicit_resume_of_a_damaged_checkpoint_is_refused(tiny_data, reference_runs, tmp_path):
    run = copy_until(reference_runs["single"], tmp_path, 6)
    flip_byte(run / "checkpoint-6" / "model.safetensors", -100)
    done = run_litebert(pretrain_args(tiny_data, run, resume=run / "checkpoint-6"))
    assert done.returncode == 2
    assert f"{run / 'checkpoint-6' / 'model.safetensors'}: sha256 differs from" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_crash_before_the_first_checkpoint_leaves_no_duplicate_steps(tiny_data, reference_runs, tmp_path):
    """Killed at the start of step 4 with no checkpoint yet (save every 4): the restart begins at step 0 and the
    log holds each step once, with the uninterrupted run's losses."""
    run = tmp_path / "run"
    killed = run_litebert(pretrain_args(tiny_data, run, save_every=4), fault="kill:3")
    assert killed.returncode < 0 and len(read_metrics(run)) == 3
    done = run_litebert(pretrain_args(tiny_data, run, save_every=4))
    assert done.returncode == 0, done.stderr[-3000:]
    assert losses(run) == losses(reference_runs["single"])  # read_metrics fails on a step logged twice


def test_a_torn_last_metrics_line_is_dropped_on_resume(tiny_data, reference_runs, tmp_path):
    """The disk filled up in the middle of step 5's log line: the resume drops the torn line, says so, and the
    run ends with the uninterrupted run's log."""
    single = reference_runs["single"]
    run = copy_until(single, tmp_path, 4)
    step5 = next(line for line in (single / "metrics.jsonl").read_text().splitlines() if json.loads(line)["step"] == 5)
    with open(run / "metrics.jsonl", "a") as f:
        f.write(step5[: len(step5) // 2])  # no newline: the write was cut short
    done = run_litebert(pretrain_args(tiny_data, run))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "dropped 1 unreadable line(s)" in done.stderr
    assert losses(run) == losses(single)
