"""The GPU tier's runs (`pytest -m gpu`; device from the `gpu_device` fixture, tests/conftest.py): `litebert
pretrain` on the device with --compile, resumed on the CPU and back; the pipeline and `serve` with --device; and
a 2-process NCCL run where two GPUs are visible (gloo on 2 CPU processes under LITEBERT_GPU_TEST_DEVICE=cpu).

Every run is the reliability suite's tiny setup (tests/reliability/harness.py) in a subprocess, as a user runs it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import litebert
from tiny_models import TEXTS, same, save_model, tokenizer

sys.path.insert(0, str(Path(__file__).parent / "reliability"))
from harness import assert_same_weights, losses, pretrain_args, run_litebert, tiny_setup  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_setup(tmp_path_factory.mktemp("gpu_tiny"))


def pretrain(tiny, out: Path, device, *extra: str, nproc: int = 1, kill_at: int | None = None):
    """8 steps of the tiny setup on `device`, a checkpoint every 2; `kill_at`: SIGKILLed at the start of the step
    after that one (the schedule stays the 8 steps' whoever finishes them)."""
    args = pretrain_args(tiny, out, steps=8, save_every=2, device=str(device), eval_batches=2)
    done = run_litebert(args + list(extra), nproc=nproc, fault=f"kill:{kill_at}" if kill_at else None)
    assert done.returncode == (-9 if kill_at else 0), done.stderr[-3000:]
    return done


def test_checkpoint_moves_between_the_device_and_the_cpu(gpu_device, tiny, tmp_path):
    """Steps 1-4 on the device (--compile), 5-6 resumed on the CPU, 7-8 back on the device: the run continues
    each time from the checkpoint, and ends where 8 uninterrupted CPU steps end (within the two devices'
    rounding: 1e-3; 1e-5 when both are the CPU, where only compiled and eager kernels round differently)."""
    run = tmp_path / "moved"
    first = pretrain(tiny, run, gpu_device, "--compile", kill_at=4)
    assert "first step (with compilation)" in first.stderr
    second = pretrain(tiny, run, torch.device("cpu"), kill_at=6)
    assert f"resumed from {run / 'checkpoint-4'} at step 4" in second.stderr
    third = pretrain(tiny, run, gpu_device)
    assert f"resumed from {run / 'checkpoint-6'} at step 6" in third.stderr
    reference = tmp_path / "cpu"
    pretrain(tiny, reference, torch.device("cpu"))
    got, want = losses(run), losses(reference)
    assert len(got) == len(want) == 8
    tol = 1e-5 if gpu_device.type == "cpu" else 1e-3
    assert got == pytest.approx(want, rel=tol)
    assert_same_weights(run / "final", reference / "final", atol=tol)


@pytest.fixture(scope="module")
def classifier_dir(tmp_path_factory, shared_data):
    return save_model(tmp_path_factory.mktemp("gpu_serve") / "clf", "AlbertForSequenceClassification",
                      tokenizer(shared_data), num_labels=2, label_names=["neg", "pos"])


@pytest.mark.parametrize("backend, atol", [("fp32", 1e-4), ("bf16", 2e-2)])
def test_pipeline_on_the_device_answers_as_on_the_cpu(gpu_device, classifier_dir, backend, atol):
    on_device = litebert.pipeline(None, classifier_dir, backend, device=str(gpu_device))
    assert next(on_device.runner.model.parameters()).device.type == gpu_device.type
    on_cpu = litebert.pipeline(None, classifier_dir, backend)
    same(on_device(TEXTS), on_cpu(TEXTS), atol=atol)
    same(on_device.embeddings()(TEXTS), on_cpu.embeddings()(TEXTS), atol=atol)


def test_serve_on_the_device_answers_as_the_cpu_pipeline(gpu_device, classifier_dir):
    from test_serve import Server, post

    server = Server(classifier_dir, "--backend", "fp32", "--device", str(gpu_device))
    try:
        server.wait_ready()
        r = post(server, {"inputs": [{"text": t} for t in TEXTS]})
        assert r.status_code == 200, r.text
        same(r.json()["outputs"], litebert.pipeline(None, classifier_dir, "fp32")(TEXTS), atol=1e-4)
    finally:
        server.stop()


def test_two_processes(gpu_device, tiny, tmp_path):
    """torchrun with 2 ranks (NCCL on 2 GPUs; gloo on the CPU): the run finishes and trains the same model as one
    process with the same global batch (DDP's averaged gradients, the loss's global counts)."""
    if gpu_device.type == "cuda" and torch.cuda.device_count() < 2:
        pytest.skip(f"a 2-process NCCL run needs 2 GPUs; {torch.cuda.device_count()} visible")
    two = tmp_path / "two"
    # each rank takes cuda:LOCAL_RANK (distributed.init_distributed): --device cuda, not cuda:0
    device = torch.device(gpu_device.type)
    pretrain(tiny, two, device, nproc=2)
    one = tmp_path / "one"
    pretrain(tiny, one, device)  # micro-batches of 8: 2 accumulated, where each rank runs one
    assert losses(two) == pytest.approx(losses(one), rel=1e-4)
    assert_same_weights(two / "final", one / "final", atol=1e-4)
