"""Precision "auto": bf16 on a CPU only where its matmul is measured faster than fp32."""

import math

import pytest
import torch

from litebert import device as dev


@pytest.mark.parametrize("flags, speedup, expected", [
    (frozenset({"avx512f", "avx512_bf16"}), 0.6, "fp32"),  # bf16 instructions, but its matmul is slower
    (frozenset({"avx512f", "avx512_bf16"}), 1.05, "fp32"),  # inside the probe's noise margin: keep exact fp32
    (frozenset({"avx512_bf16", "amx_bf16", "amx_tile"}), 4.5, "bf16"),
])
def test_auto_precision_on_cpu_follows_the_measured_bf16_speed(monkeypatch, flags, speedup, expected):
    monkeypatch.setattr(dev, "cpu_flags", lambda: flags)
    monkeypatch.setattr(dev, "cpu_bf16_speedup", lambda: speedup)
    assert dev.resolve_precision("auto", torch.device("cpu")) == expected
    assert dev.resolve_precision("bf16", torch.device("cpu")) == "bf16"  # an explicit choice is never overridden


def test_auto_precision_without_bf16_instructions_does_not_probe(monkeypatch):
    def probe():
        raise AssertionError("probed a CPU without bf16 instructions")

    monkeypatch.setattr(dev, "cpu_flags", lambda: frozenset({"avx2"}))
    monkeypatch.setattr(dev, "cpu_bf16_speedup", probe)
    assert dev.resolve_precision("auto", torch.device("cpu")) == "fp32"


def test_bf16_probe_measures_and_leaves_the_thread_count_alone():
    before = torch.get_num_threads()
    speedup = dev.cpu_bf16_speedup.__wrapped__(size=64, rounds=3)
    assert math.isfinite(speedup) and speedup > 0
    assert torch.get_num_threads() == before
