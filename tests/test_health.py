"""Representation health (issue 23): a collapsed model is named as such in pretraining and before fine-tuning.

The collapsed model is built deliberately: the shared block's output LayerNorm gets gain 0, so every layer's
output is that LayerNorm's bias, the same vector at every position of every input.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent / "reliability"))
from harness import TINY_MODEL, config_args, tiny_setup  # noqa: E402

from litebert import AlbertConfig, AlbertForPreTraining  # noqa: E402
from litebert.finetune import FinetuneConfig, finetune  # noqa: E402
from litebert.health import (COLLAPSE_SPREAD, CollapseWatch, is_collapsed, representation_health,  # noqa: E402
                             store_health_batch)
from litebert.pretrain import PretrainConfig, pretrain  # noqa: E402

CONFIG = {k: v for k, v in TINY_MODEL.items() if k != "format"}


def collapse(model: AlbertForPreTraining) -> AlbertForPreTraining:
    """Zero the gain of every LayerNorm that ends a block: all hidden states become its bias."""
    with torch.no_grad():
        for _name, module in model.albert.encoder.named_modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.weight.zero_()
                module.bias.normal_(0.0, 1.0)  # a non-zero constant: the collapse must not hide behind zeros
    return model


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_setup(tmp_path_factory.mktemp("health"), vocab_size=400)


def model_dirs(tiny, root: Path) -> tuple[Path, Path]:
    from litebert.tokenizer import load_tokenizer

    tok = load_tokenizer(tiny[1])
    torch.manual_seed(0)
    healthy = AlbertForPreTraining(AlbertConfig(vocab_size=tok.vocab_size, **CONFIG))
    healthy.save_pretrained(root / "healthy", tokenizer=tok)
    collapse(healthy).save_pretrained(root / "collapsed", tokenizer=tok)
    return root / "healthy", root / "collapsed"


def test_health_tells_collapsed_from_fresh(tiny):
    from litebert.data.store import TokenStore

    batch = store_health_batch(TokenStore.open(tiny[0]), 32)
    assert batch["input_ids"].shape == (16, 32) and bool((batch["attention_mask"].sum(1) > 2).all())
    torch.manual_seed(0)
    model = AlbertForPreTraining(AlbertConfig(vocab_size=400, **CONFIG))
    fresh = representation_health(model.albert, batch)
    assert fresh["health_spread"] > 10 * COLLAPSE_SPREAD and not is_collapsed(fresh)
    dead = representation_health(collapse(model).albert, batch)
    assert dead["health_spread"] < 1e-6 and dead["health_pooled_cos"] > 1 - 1e-9 and is_collapsed(dead)


# albert-base on the books, batch 8 x 64, LAMB 1.76e-3 with 25 warm-up steps, health_spread every 5-10 updates
# (experiments/recipe_records/control_base/): from the official draw, and with the residual branches at 0.32.
OFFICIAL_DRAW = {5: 0.1, 10: 0.05, 15: 0.016, 20: 0.0038, 25: 0.00055, 30: 7.5e-5, 35: 1.2e-5, 40: 2.4e-6,
                 45: 4.7e-7, 50: 1.1e-7, 60: 2.9e-8, 80: 2.6e-8}
SCALED_BRANCHES = {10: 0.091, 20: 0.024, 30: 0.0074, 40: 0.0036, 60: 0.0015, 80: 0.0011, 100: 0.00097,
                   130: 0.00085, 160: 0.0012, 190: 0.002, 220: 0.004, 250: 0.014, 300: 0.023}


def watch_events(curve: dict[int, float], warmup: int) -> dict[int, str]:
    watch = CollapseWatch()
    events = {step: watch.update(step, {"health_spread": spread}, step > warmup) for step, spread in curve.items()}
    return {step: event for step, event in events.items() if event}


def test_the_watch_calls_a_deep_fall_a_collapse_and_a_dip_that_climbs_back_a_dip():
    """The measured curves: the official draw's fall is called collapsed at its third check under 1e-4 past the
    warm-up (the dip is noted first); the scaled branches' dip, which climbed back, is noted once and never called
    a collapse. Checks in the warm-up count for neither."""
    assert watch_events(OFFICIAL_DRAW, warmup=25) == {30: "dip", 40: "collapsed"}
    assert watch_events(SCALED_BRANCHES, warmup=25) == {30: "dip"}
    assert watch_events(OFFICIAL_DRAW, warmup=100) == {}


def test_pretrain_logs_health_and_says_at_once_when_a_run_stays_collapsed(tiny, tmp_path, capsys):
    _, collapsed = model_dirs(tiny, tmp_path)
    # Continued pretraining of the collapsed model at a learning rate too small to move it: it stays collapsed.
    # Warm-up 2 steps, a health check every step: checks 3, 4 and 5 are the three past the warm-up.
    args = config_args(tiny, tmp_path / "run", model=str(collapsed), steps=8, lr=1e-9, save_every=8,
                       log_every=1, warmup_steps=2)
    result = pretrain(PretrainConfig(**args))
    logs = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in logs if "loss" in r]
    assert [r["step"] for r in steps] == list(range(1, 9))
    assert all(r["health_spread"] < COLLAPSE_SPREAD and r["health_pooled_cos"] > 0.999 for r in steps)
    err = capsys.readouterr().err
    assert "health_spread=" in err  # the progress line
    # Said once, at the third check past the warm-up, with what happened and the run's own settings to change.
    assert err.count("the run has collapsed") == 1
    assert "step 5: the run has collapsed" in err and "since step 1" in err
    assert err.count("in a dip") == 1 and "note: step 3: health_spread" in err  # the first check past warm-up
    assert "--lr (now 1e-09)" in err and "--warmup-steps 2" in err
    assert "the final model (step 8)" in err and result["health_spread"] < COLLAPSE_SPREAD
    assert "fine-tuning from it tends to stay" in err


def test_on_collapse_stop_ends_the_run_with_a_checkpoint(tiny, tmp_path, capsys):
    from litebert.errors import TrainingError

    _, collapsed = model_dirs(tiny, tmp_path)
    args = config_args(tiny, tmp_path / "run", model=str(collapsed), steps=40, lr=1e-9, save_every=40,
                       log_every=1, warmup_steps=2, on_collapse="stop")
    with pytest.raises(TrainingError, match=r"stopped at step 5 \(--on-collapse stop\)"):
        pretrain(PretrainConfig(**args))
    assert (tmp_path / "run" / "checkpoint-5").is_dir()  # saved before stopping: nothing is lost


def test_a_collapse_during_warmup_is_not_called_one(tiny, tmp_path, capsys):
    _, collapsed = model_dirs(tiny, tmp_path)
    args = config_args(tiny, tmp_path / "run", model=str(collapsed), steps=4, lr=1e-9, save_every=4,
                       log_every=1, warmup_steps=4)
    pretrain(PretrainConfig(**args))
    assert "the run has collapsed" not in capsys.readouterr().err


def test_pretrain_of_a_healthy_model_does_not_warn(tiny, tmp_path, capsys):
    pretrain(PretrainConfig(**config_args(tiny, tmp_path / "run", steps=2, save_every=2, log_every=1)))
    logs = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert all(r["health_spread"] > COLLAPSE_SPREAD for r in logs if "loss" in r)
    assert "collapsed" not in capsys.readouterr().err


def write_keyword_task(root: Path) -> Path:
    """A 2-way custom task: does the sentence mention a file or a list?"""
    rows = ["text,label"] + [f"the {w} number {i} is here,{w}" for i in range(12) for w in ("file", "list")]
    for split in ("train", "dev"):
        (root / f"{split}.csv").write_text("\n".join(rows) + "\n")
    return root


@pytest.mark.parametrize("which", ["collapsed", "healthy"])
def test_finetune_warns_at_start_from_a_collapsed_checkpoint(tiny, tmp_path, capsys, which):
    dirs = dict(zip(("healthy", "collapsed"), model_dirs(tiny, tmp_path)))
    data = write_keyword_task(tmp_path)
    result = finetune(FinetuneConfig(task="custom", model=str(dirs[which]), data=str(data), out=str(tmp_path / "ft"),
                                     format="csv", text_columns="text", label_column="label", steps=1,
                                     batch_size=4, max_seq_length=32, precision="fp32", lr=1e-4, threads=1))
    err = capsys.readouterr().err
    warned = f"--model {dirs[which]}: the model's representations are collapsed" in err
    assert warned == (which == "collapsed")
    assert is_collapsed(result["start_health"]) == (which == "collapsed")


def test_reinit_pooler_draws_a_fresh_pooler(tiny, tmp_path):
    from litebert.model import AlbertForSequenceClassification

    _, collapsed = model_dirs(tiny, tmp_path)
    data = write_keyword_task(tmp_path)
    kept = AlbertForPreTraining.from_pretrained(collapsed).albert.pooler.dense.weight
    for reinit in (False, True):
        finetune(FinetuneConfig(task="custom", model=str(collapsed), data=str(data), out=str(tmp_path / f"ft{reinit}"),
                                format="csv", text_columns="text", label_column="label", steps=1, eval_every=1,
                                batch_size=4, max_seq_length=32, precision="fp32", lr=1e-9, threads=1,
                                reinit_pooler=reinit))
        saved = AlbertForSequenceClassification.from_pretrained(tmp_path / f"ft{reinit}" / "best")
        moved = (saved.albert.pooler.dense.weight - kept).abs().max().item()
        assert (moved > 1e-3) == reinit  # lr 1e-9: only a re-initialisation moves it
