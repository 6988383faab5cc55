"""litebert.runlife: the pieces of a run's life that pretrain and finetune share, tested on their own (the
trainers' use of them is tested end to end in tests/reliability)."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from litebert.checkpoint import load_state, save_state
from litebert.errors import ConfigError
from litebert.runlife import budget_reached, changed_fields, parse_duration, restore_rng, rng_state


def draws() -> tuple:
    """One draw from each global generator a training step could use (dropout's is torch's)."""
    return (random.random(), float(np.random.rand()), np.random.standard_normal(), torch.rand(3).tolist(),
            torch.nn.functional.dropout(torch.ones(8), 0.5).tolist())


def test_every_generator_comes_back_through_a_weights_only_load(tmp_path):
    """rng_state, saved with save_state and read back with torch.load(weights_only=True), restores python's,
    numpy's (a Gaussian half-drawn: its cached second value too) and torch's generators: the draws after the
    restore repeat the draws after the save."""
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    np.random.standard_normal()  # numpy now holds a cached Gaussian (has_gauss): part of its state
    save_state(tmp_path / "state.pt", {"rng": rng_state()})
    expected = draws()
    random.seed(9), np.random.seed(9), torch.manual_seed(9)  # move every generator elsewhere
    assert draws() != expected
    restore_rng(load_state(tmp_path / "state.pt")["rng"])
    assert draws() == expected


def test_an_older_checkpoints_bare_torch_state_still_restores():
    """Checkpoints before rng_state held torch.get_rng_state() alone: that generator is restored."""
    torch.manual_seed(5)
    old = torch.get_rng_state()
    expected = torch.rand(4)
    torch.manual_seed(6)
    restore_rng(old)
    assert torch.equal(torch.rand(4), expected)


def test_durations_and_budgets():
    assert [parse_duration(x, "--max-time") for x in ("90", "90s", "30m", "2h", "1h30m", 1.5)] == \
        [90, 90, 1800, 7200, 5400, 1.5]
    for bad in ("", "1d", "0", "-5m"):
        with pytest.raises(ConfigError, match="--max-time"):
            parse_duration(bad, "--max-time")
    assert budget_reached(10.0, "10s", 10.0) == "--max-time 10s reached"
    assert budget_reached(9.9, "10s", 10.0) == ""
    assert budget_reached(0.0, None, None, 1536.0, 1200, "tokens") == "--max-tokens 1,200 reached (1,536 tokens)"


def test_changed_fields_names_each_flag_with_both_values():
    saved, now = {"lr": 0.001, "seed": 0, "old_only": 1}, {"lr": 0.002, "seed": 0, "new_only": 2}
    assert changed_fields(saved, now, ["lr", "seed", "old_only", "new_only"]) == ["--lr 0.001 (now 0.002)"]
