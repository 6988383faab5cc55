"""Pretraining (issue 5): the loop learns, a non-finite step is stopped or skipped before the optimizer touches
anything, and every bad option or mismatched resume is a LitebertError naming the option or file (exit code 2).

The crash, resume, elastic, NaN-across-ranks and disk tests are in tests/reliability/; the LAMB step is checked
against the official definition in tests/test_optim.py.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent / "reliability"))
from harness import TINY_MODEL, config_args, pretrain_args, write_pydoc_corpus  # noqa: E402

from litebert.checkpoint import validate_checkpoint  # noqa: E402
from litebert.cli import main as cli_main  # noqa: E402
from litebert.errors import TrainingError  # noqa: E402
from litebert.health import COLLAPSE_SPREAD  # noqa: E402
from litebert.pretrain import PretrainConfig, pretrain, train_step  # noqa: E402
from litebert.pretrain_setup import setup  # noqa: E402


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory):
    """A 500-piece vocab and a 100-document store of pydoc text, and the tiny model config."""
    from litebert.data.store_build import build_store
    from litebert.tokenizer_train import train_sentencepiece

    root = tmp_path_factory.mktemp("pretrain_data")
    write_pydoc_corpus(root / "all.txt")
    write_pydoc_corpus(root / "corpus.txt", 100)
    train_sentencepiece([root / "all.txt"], root / "tokenizer", vocab_size=500)
    store = build_store([root / "corpus.txt"], root / "tokenizer", root / "store", validation_fraction=0.05)
    (root / "model.json").write_text(json.dumps({**TINY_MODEL, "vocab_size": store.vocab_size}))
    return root / "store", root / "tokenizer", root / "model.json"


# --------------------------------------------------------------------------------------------- non-finite steps


def one_step_run(tiny_data, tmp_path, **overrides):
    run = setup(PretrainConfig(**config_args(tiny_data, tmp_path / "run", **overrides)))
    batches = [run.stream.next(0) for _ in range(run.accum)]
    before = {k: v.clone() for k, v in run.raw_model.state_dict().items()}
    return run, batches, before


def unchanged(run, before) -> bool:
    return all(torch.equal(v, before[k]) for k, v in run.raw_model.state_dict().items())


def test_a_real_overflow_stops_before_the_optimizer_step(tiny_data, tmp_path):
    run, batches, _ = one_step_run(tiny_data, tmp_path, nan_policy="error")
    with torch.no_grad():
        run.raw_model.mlm.dense.weight[0, 0] = float("inf")  # the MLM logits, loss and gradients go NaN
    before = {k: v.clone() for k, v in run.raw_model.state_dict().items()}
    with pytest.raises(TrainingError, match=r"^step 1: non-finite loss or gradient .*--nan-policy skip"):
        train_step(run, batches)
    assert unchanged(run, before) and not run.optimizer.state  # the optimizer never stepped


def test_skip_policy_leaves_weights_and_optimizer_alone(tiny_data, tmp_path, monkeypatch):
    run, batches, before = one_step_run(tiny_data, tmp_path, nan_policy="skip", nan_budget=1)
    monkeypatch.setenv("LITEBERT_FAULT", "nan_loss:0")
    stats = train_step(run, batches)
    assert stats["skipped"] and run.nan_skipped == 1 and math.isnan(stats["grad_norm"])
    assert unchanged(run, before) and not run.optimizer.state
    assert all(p.grad is None for p in run.raw_model.parameters())  # nothing left over for the next step
    monkeypatch.delenv("LITEBERT_FAULT")
    stats = train_step(run, batches)  # the next finite step trains normally
    assert not stats["skipped"] and not unchanged(run, before)


# --------------------------------------------------------------------------------------------- bad options


BAD_OPTIONS = [
    (dict(steps=0), r"--steps 0: must be >= 1"),
    (dict(lr=float("nan")), r"--lr nan: must be a finite number"),
    (dict(batch_size=12), r"--batch-size 12 is not a multiple of --micro-batch-size 8"),
    (dict(max_seq_length=256), r"--max-seq-length exceeds the model's max_position_embeddings 128"),
    (dict(phases="0.5:32,0.4:64"), r"--phases '0.5:32,0.4:64': fractions must be positive and sum to 1"),
    (dict(phases="half:32"), r"--phases 'half:32': expected FRACTION:LENGTH"),
    (dict(nan_policy="maybe"), r"--nan-policy maybe: must be error or skip"),
    (dict(objective="mlm"), r"--objective mlm: must be sop, nsp or none"),
    (dict(optimizer="sgd"), r"--optimizer sgd: must be lamb, adamw or adamw_official"),
    (dict(precision="fp8"), r"--precision fp8: must be auto, "),
    (dict(device="tpu"), r"--device 'tpu': not a device"),
    (dict(num_workers=-1), r"--num-workers -1: must be >= 0"),
    (dict(threads=0), r"--threads 0: must be >= 1"),
    (dict(seed=-1), r"--seed -1: must be >= 0"),
    (dict(weight_decay=-0.1), r"--weight-decay -0.1: must be >= 0"),
    (dict(eval_batches=0), r"--eval-batches 0: must be >= 1"),
    (dict(warmup_steps=99), r"--warmup-steps 99: must be in \[0, steps\]"),
    (dict(keep=0), r"--keep 0: must be >= 1"),
    (dict(masked_lm_prob=1.5), r"--masked-lm-prob 1.5: must be in \(0, 1\)"),
    (dict(model="no-such-model.json"), r"'no-such-model.json' is neither a preset"),
    (dict(data="{missing}"), r"{missing}/meta.json: not found: .* is not a token store"),
    (dict(tokenizer="{missing}"), r"{missing}: no tokenizer directory"),
    (dict(resume="{missing}"), r"{missing}: not a checkpoint directory"),
]


@pytest.mark.parametrize("overrides, message", BAD_OPTIONS, ids=[next(iter(o)) for o, _ in BAD_OPTIONS])
def test_bad_options_are_exit_code_2_with_the_option_named(tiny_data, tmp_path, capsys, overrides, message):
    missing = str(tmp_path / "missing")
    overrides = {k: v.format(missing=missing) if isinstance(v, str) else v for k, v in overrides.items()}
    assert cli_main(pretrain_args(tiny_data, tmp_path / "run", **overrides)) == 2
    err = capsys.readouterr().err
    assert re.search(message.format(missing=re.escape(missing)), err), err
    assert err.startswith("litebert: error: ") and "Traceback" not in err


def test_a_model_dir_without_weights_is_refused_not_trained_from_scratch(tiny_data, tmp_path, capsys):
    # A directory means "continue from its weights"; with none there, the run used to start from random init.
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    shutil.copy(tiny_data[2], model_dir / "config.json")
    assert cli_main(pretrain_args(tiny_data, tmp_path / "run", model=str(model_dir))) == 2
    err = capsys.readouterr().err
    assert "has no model.safetensors" in err and f"--model {model_dir / 'config.json'}" in err
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


def test_a_store_smaller_than_one_micro_batch(tiny_data, tmp_path, capsys):
    assert cli_main(pretrain_args(tiny_data, tmp_path / "run", micro_batch_size=512, batch_size=512)) == 2
    assert "fewer than one global micro-batch" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------- budgets, final/, run dirs


def test_a_time_budget_stops_cleanly_with_a_checkpoint_and_a_final_model(tiny_data, tmp_path, capsys):
    from litebert.checkpoint import load_state

    run = tmp_path / "run"
    assert cli_main(pretrain_args(tiny_data, run, steps=100000, save_every=100000, max_time="2s")) == 0
    err = capsys.readouterr().err
    stopped = re.search(r"stopping at step (\d+) of 100000: --max-time 2s reached; checkpoint-\1 saved", err)
    assert stopped, err
    step = int(stopped.group(1))
    validate_checkpoint(run / f"checkpoint-{step}")  # complete, or it raises
    assert (run / "final" / "model.safetensors").is_file() and (run / "final" / "spiece.model").is_file()
    assert (run / "final" / "step.txt").read_text().strip() == str(step)
    lines = [x for x in err.splitlines() if x.startswith("step ")]
    assert lines and all(re.search(r" elapsed=\d+:\d\d eta=(\d+:)?\d+:\d\d$", x) for x in lines), lines[:3]
    # The eta is the time budget's, not 100,000 steps at this pace (which would read hours).
    etas = [re.search(r" eta=(\S+)$", x).group(1) for x in lines]
    assert all(e in ("0:00", "0:01", "0:02") for e in etas), etas
    # The schedule followed the wall clock: it is at its end when the budget stops the run, and the checkpoint
    # records the seconds spent (a resume continues that clock).
    assert "over the budget's fraction used: wall clock (--max-time 2s)" in err
    assert "residual branches x 0.5 (--branch-init-scale; default (8 x 2 layers)^-1/4)" in err  # a fresh model
    state = load_state(run / f"checkpoint-{step}" / "trainer_state.pt")
    assert state["scheduler"]["progress"] == 1.0 and state["budget_elapsed"] >= 2.0
    assert [g["lr"] for g in state["optimizer"]["param_groups"]] == [0.0, 0.0]


def test_held_out_mlm_is_scored_with_15_percent_masking_whatever_the_training_rate(tiny_data, tmp_path):
    """A run that trains with 40% masking reports held-out MLM on ALBERT's 15% masking (at most ceil(0.15 x 32)
    = 5 predictions per example), so its figure compares with a 15%-masking run's; not on its own 40%."""
    from litebert.model import AlbertForPreTraining
    from litebert.pretrain_eval import eval_protocol, evaluate_checkpoint

    cfg = PretrainConfig(**config_args(tiny_data, tmp_path / "run", steps=2, masked_lm_prob=0.4,
                                       max_predictions_per_seq=13))
    result = pretrain(cfg)
    model = AlbertForPreTraining.from_pretrained(tmp_path / "run" / "final")
    store = tiny_data[0]

    def score(masked_lm_prob, max_predictions):
        protocol = PretrainConfig(max_seq_length=32, masked_lm_prob=masked_lm_prob,
                                  max_predictions_per_seq=max_predictions)
        return evaluate_checkpoint(model, store, "sop", 32, batches=1, batch_size=8, seed=0, cfg=protocol)

    assert result["eval_mlm_loss"] == pytest.approx(score(0.15, 5)["eval_mlm_loss"], rel=1e-6)
    assert result["eval_mlm_loss"] != pytest.approx(score(0.4, 13)["eval_mlm_loss"], rel=1e-6)
    # The cap: the run's own when lower, ceil(15% of the length) otherwise (0.15 x 20 is 3, not 4).
    assert eval_protocol(cfg).max_predictions_per_seq == 5
    assert eval_protocol(PretrainConfig(max_seq_length=32, max_predictions_per_seq=3)).max_predictions_per_seq == 3
    assert eval_protocol(PretrainConfig(max_seq_length=20, max_predictions_per_seq=8)).max_predictions_per_seq == 3


def test_a_token_budget_stops_at_the_step_that_reaches_it_with_its_schedule_finished(tiny_data, tmp_path, capsys):
    # 2 micro-batches of 8 x 32 positions per step: 512 tokens a step, so 1,200 tokens are reached at step 3.
    from litebert.checkpoint import load_state
    from litebert.optim import budget_factor

    run = tmp_path / "run"
    assert cli_main(pretrain_args(tiny_data, run, steps=50, max_tokens=1200)) == 0
    err = capsys.readouterr().err
    assert "stopping at step 3 of 50: --max-tokens 1,200 reached (1,536 tokens)" in err
    assert "over the budget's fraction used: tokens (--max-tokens 1,200)" in err  # the start line names the clock
    assert (run / "final" / "step.txt").read_text().strip() == "3"
    # Each step's lr follows the tokens before it (warm-up: 1 step of 50 = 2% of the budget), not the step count;
    # after the last step the schedule is at its end: the lr is 0.
    peak = PretrainConfig(**config_args(tiny_data, run)).lr
    logged = [r["lr"] for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if "loss" in r]
    assert logged == pytest.approx([peak * budget_factor(t / 1200, 0.02) for t in (0, 512, 1024)], rel=1e-12)
    state = load_state(run / "checkpoint-3" / "trainer_state.pt")
    assert state["schedule"] == "budget" and state["scheduler"]["progress"] == 1.0
    assert [g["lr"] for g in state["optimizer"]["param_groups"]] == [0.0, 0.0]


def test_a_pretraining_run_dir_is_a_model_and_its_record_repeats_it(tiny_data, finished_run, tmp_path, capsys):
    run = tmp_path / "again"
    # --config: the run record holds every option; the command line overrides --out and --steps
    assert cli_main(["pretrain", "--config", str(finished_run / "run.json"), "--out", str(run), "--steps", "3",
                     "--model", str(finished_run)]) == 0
    err = capsys.readouterr().err
    assert f"--model {finished_run}: using {finished_run / 'checkpoint-2'}" in err
    saved = json.loads((run / "run.json").read_text())["train"]
    before = json.loads((finished_run / "run.json").read_text())["train"]
    assert {k: v for k, v in saved.items() if k not in ("out", "steps", "model")} == \
        {k: v for k, v in before.items() if k not in ("out", "steps", "model")}


def test_a_config_file_with_an_unknown_option_is_refused(tiny_data, tmp_path, capsys):
    config = tmp_path / "run.json"
    config.write_text(json.dumps({"data": str(tiny_data[0]), "setps": 5}))
    assert cli_main(["pretrain", "--config", str(config)]) == 2
    assert "unknown option(s) setps" in capsys.readouterr().err


def legend_clear_of_curves(fig) -> bool:
    """No legend box overlaps any panel's plotting area."""
    fig.canvas.draw()
    boxes = [ax.get_window_extent() for ax in fig.axes]
    legends = [ax.get_legend().get_window_extent() for ax in fig.axes if ax.get_legend()]
    return bool(legends) and not any(lg.overlaps(box) for lg in legends for box in boxes)


def test_plot_draws_held_out_mlm_loss_beside_the_training_loss(finished_run, tmp_path):
    pytest.importorskip("matplotlib")
    from litebert.plot import build_figure, plot_run, read_metrics

    fig = build_figure(read_metrics(finished_run), "run")
    loss = fig.axes[0]
    assert {"loss", "held-out mlm_loss"} <= {line.get_label() for line in loss.lines}
    # the fill-in figure at [MASK] positions, with the no-model guesses on the same targets beside it
    mask_panel = next(ax for ax in fig.axes if ax.get_title() == "held-out MLM at [MASK] positions")
    assert {"model at [MASK]", "commonest piece at [MASK]", "bigram table at [MASK]"} <= \
        {line.get_label() for line in mask_panel.lines}
    final = [r for r in read_metrics(finished_run) if "eval_mlm_acc_mask" in r][-1]
    drawn = next(line for line in mask_panel.lines if line.get_label() == "bigram table at [MASK]")
    assert drawn.get_ydata()[-1] == final["eval_base_mask_bigram"]
    assert legend_clear_of_curves(fig)
    assert plot_run(finished_run, tmp_path / "c.png").stat().st_size > 0


# --------------------------------------------------------------------------------------------- bad resumes


@pytest.fixture(scope="module")
def finished_run(tiny_data, tmp_path_factory):
    """A 2-step run with checkpoint-2, copied by each test that damages it."""
    run = tmp_path_factory.mktemp("finished") / "run"
    pretrain(PretrainConfig(**config_args(tiny_data, run, steps=2)))
    return run


def copy_run(finished_run, tmp_path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    return run


@pytest.mark.parametrize("change, message", [
    (dict(optimizer="adamw"), r"trainer_state.pt: saved with --optimizer lamb, this run has --optimizer adamw"),
    (dict(model="{bigger}"), r"model.safetensors: does not match the model; wrong shapes"),
    (dict(resume="none"), r"already holds checkpoints; use --resume auto or another --out"),
    (dict(steps=1), r"checkpoint-2: saved at step 2, past this run's --steps 1; pass --steps 2 or more"),
    # before: the saved optimizer state's learning rate won and the new one was ignored without a word
    (dict(lr=0.05), r"run.json: this run was made with --lr 0.002 \(now 0.05\);"),
    (dict(seed=7, masked_lm_prob=0.4), r"made with --masked-lm-prob 0.15 \(now 0.4\), --seed 0 \(now 7\);"),
], ids=["optimizer", "model", "resume-none", "fewer-steps", "lr", "seed-and-masking"])
def test_a_resume_that_does_not_fit_is_refused(tiny_data, finished_run, tmp_path, capsys, change, message):
    run = copy_run(finished_run, tmp_path)
    bigger = tmp_path / "bigger.json"
    bigger.write_text(json.dumps({**json.loads(tiny_data[2].read_text()), "hidden_size": 64, "intermediate_size": 128}))
    change = {"steps": 4, **{k: v.format(bigger=bigger) if isinstance(v, str) else v for k, v in change.items()}}
    assert cli_main(pretrain_args(tiny_data, run, **change)) == 2
    assert re.search(message, capsys.readouterr().err)


def test_a_budget_on_resume_stops_a_step_scheduled_run_without_changing_its_schedule(tiny_data, finished_run,
                                                                                       tmp_path, capsys):
    """A run started without a budget keeps its --steps schedule when resumed with one (a scheduler's wall-time
    limit, say): the lrs are those of the run straight through. A budgeted run resumed without its budget is
    refused: its schedule would lose its clock."""
    from litebert.optim import warmup_poly_decay

    run = copy_run(finished_run, tmp_path)
    assert cli_main(pretrain_args(tiny_data, run, steps=6, max_tokens=2500)) == 0  # 512 tokens a step
    err = capsys.readouterr().err
    assert "keeps its schedule over --steps" in err and "schedule: warm-up 16.7%, then decay to 0 (power 1) over " \
        "--steps 6" in err and "stopping at step 5 of 6: --max-tokens 2,500 reached" in err
    lrs = {r["step"]: r["lr"] for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if "loss" in r}
    peak = PretrainConfig(**config_args(tiny_data, run)).lr
    # step 3 takes the lr the checkpoint saved; from step 4 on, the step schedule over the new --steps
    for step in (4, 5):
        assert lrs[step] == pytest.approx(warmup_poly_decay(step - 1, warmup_steps=1, total_steps=6, peak_lr=peak),
                                          rel=1e-12)

    budgeted = tmp_path / "budgeted"
    assert cli_main(pretrain_args(tiny_data, budgeted, steps=50, max_tokens=1000)) == 0
    assert cli_main(pretrain_args(tiny_data, budgeted, steps=50)) == 2
    assert "follows its --max-time/--max-tokens budget; resume it with its budget flags" in capsys.readouterr().err


def test_a_resume_on_other_text_is_refused_but_a_moved_store_resumes(tiny_data, finished_run, tmp_path, capsys):
    """Before, a store rebuilt from other text with the same tokenizer resumed silently: the saved data position
    indexed the new store's examples, mixing two corpora in one run."""
    from litebert.data.store_build import build_store

    store, tokenizer, _ = tiny_data
    other = build_store([store.parent / "all.txt"], tokenizer, tmp_path / "other", validation_fraction=0.05)
    run = copy_run(finished_run, tmp_path)
    with pytest.raises(TrainingError, match=r"run.json: this run was made with another token store than .*other"):
        pretrain(PretrainConfig(**config_args(tiny_data, run, steps=3, data=str(other.path))))
    moved = tmp_path / "moved"
    shutil.copytree(store, moved)  # the same store somewhere else is the same data
    pretrain(PretrainConfig(**config_args(tiny_data, run, steps=3, data=str(moved))))
    assert f"resumed from {run / 'checkpoint-2'} at step 2" in capsys.readouterr().err


def test_a_run_recorded_before_gradient_checkpointing_left_the_model_config_resumes(tiny_data, finished_run,
                                                                                    tmp_path, capsys):
    """A run.json written when the model config still held gradient_checkpointing resumes (here with it on: a
    training option, which no longer makes the run's model config another one)."""
    run = copy_run(finished_run, tmp_path)
    record = json.loads((run / "run.json").read_text())
    record["model_config"]["gradient_checkpointing"] = False
    (run / "run.json").write_text(json.dumps(record))
    pretrain(PretrainConfig(**config_args(tiny_data, run, steps=3, gradient_checkpointing=True)))
    assert f"resumed from {run / 'checkpoint-2'} at step 2" in capsys.readouterr().err
    record = json.loads((run / "run.json").read_text())
    assert record["train"]["gradient_checkpointing"] and "gradient_checkpointing" not in record["model_config"]


def test_an_explicit_resume_of_an_incomplete_checkpoint_is_refused(tiny_data, finished_run, tmp_path, capsys):
    run = copy_run(finished_run, tmp_path)
    (run / "checkpoint-2" / "COMMIT").unlink()
    assert cli_main(pretrain_args(tiny_data, run, steps=4, resume=run / "checkpoint-2")) == 2
    assert "checkpoint-2: no COMMIT marker, so its save never finished" in capsys.readouterr().err


def test_a_damaged_run_record_is_refused_naming_it(tiny_data, finished_run, tmp_path, capsys):
    """run.json was read with a bare json.loads: a damaged one ended a resume in a traceback."""
    run = copy_run(finished_run, tmp_path)
    (run / "run.json").write_text('{"model_config": ')
    assert cli_main(pretrain_args(tiny_data, run, steps=4)) == 2
    assert re.search(r"run\.json:1: not valid JSON \(.*\); use a new --out", capsys.readouterr().err)


def test_a_training_state_that_is_not_ours_is_refused(tiny_data, finished_run, tmp_path, capsys):
    import hashlib

    run = copy_run(finished_run, tmp_path)
    ckpt = run / "checkpoint-2"
    torch.save({"step": 2}, ckpt / "trainer_state.pt")  # loadable with weights_only, but not a training state
    manifest = json.loads((ckpt / "COMMIT").read_text())
    data = (ckpt / "trainer_state.pt").read_bytes()
    manifest["files"]["trainer_state.pt"] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    (ckpt / "COMMIT").write_text(json.dumps(manifest))
    assert cli_main(pretrain_args(tiny_data, run, steps=4)) == 2
    assert "trainer_state.pt: not a litebert pretraining state (missing ['optimizer'" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------- resources


@pytest.mark.parametrize("field, value", [("max_position_embeddings", 10 ** 9), ("intermediate_size", 10 ** 10)])
def test_a_config_too_big_for_memory_is_refused_before_allocating(tiny_data, tmp_path, capsys, field, value):
    """An absurd but well-typed size: exit 2 naming the field, before the allocator is asked (it used to fail
    there with a traceback)."""
    model = tmp_path / "huge.json"
    model.write_text(json.dumps({**json.loads(tiny_data[2].read_text()), field: value}))
    assert cli_main(pretrain_args(tiny_data, tmp_path / "run", model=model)) == 2
    err = capsys.readouterr().err
    assert f"config field '{field}' = {value}: training would need at least" in err and "Traceback" not in err, err
    assert not list((tmp_path / "run").glob("checkpoint-*"))


@pytest.mark.parametrize("field, value", [("vocab_size", 10 ** 8), ("num_hidden_layers", 10 ** 9),
                                          ("intermediate_size", 10 ** 10), ("max_position_embeddings", 10 ** 9)])
def test_the_memory_estimate_names_the_field_that_does_not_fit(field, value):
    import torch as _torch

    from litebert.config import AlbertConfig
    from litebert.errors import ConfigError
    from litebert.memory import check_training_memory, training_bytes

    base = AlbertConfig.from_preset("albert-base")
    assert training_bytes(base, 32, 128, 20) < 8 << 30  # albert-base at micro-batch 32 fits in 8 GiB
    huge = base.replace(**{field: value})
    with pytest.raises(ConfigError, match=f"config field '{field}' = {value}: training would need at least"):
        check_training_memory(huge, 32, 128, 20, False, _torch.device("cpu"), "model.json")


def test_out_of_memory_in_a_step_says_what_to_lower(tiny_data, tmp_path, capsys, monkeypatch):
    """A real allocator failure inside step 2 (LITEBERT_FAULT=oom:1 asks for 4 EiB): exit 2 with the step and the
    two options that lower memory, no traceback."""
    monkeypatch.setenv("LITEBERT_FAULT", "oom:1")
    assert cli_main(pretrain_args(tiny_data, tmp_path / "run")) == 2
    err = capsys.readouterr().err
    assert "litebert: error: step 2: out of memory (" in err and "Traceback" not in err
    assert "lower --micro-batch-size (now 8;" in err and "--gradient-checkpointing" in err


def damaged_store(tiny_data, tmp_path, legacy: bool) -> Path:
    """A copy of the store whose first train shard holds token id 60000 (the vocab has 500) every 7 tokens;
    `legacy`: meta.json without the checksums and maximum ids (a store built before they were recorded)."""
    import numpy as np

    store = tmp_path / "store"
    shutil.copytree(tiny_data[0], store)
    tokens = store / "train" / "00000.tokens.bin"
    ids = np.fromfile(tokens, dtype="<u2")
    ids[::7] = 60000
    ids.tofile(tokens)
    if legacy:
        meta = json.loads((store / "meta.json").read_text())
        for split in meta["splits"].values():
            for shard in split["shards"]:
                shard.pop("sha256"), shard.pop("max_token_id")
        (store / "meta.json").write_text(json.dumps(meta))
    return store


@pytest.mark.parametrize("legacy, message", [
    (False, r"train/00000.tokens.bin: sha256 differs from meta.json: the shard is corrupt"),
    (True, r"train/00000.tokens.bin: holds token id 60000, outside the model's vocabulary of 500"),
], ids=["checksum", "max-id"])
def test_a_store_with_token_ids_outside_the_vocab_is_refused_at_start(tiny_data, tmp_path, capsys, legacy, message):
    store = damaged_store(tiny_data, tmp_path, legacy)
    assert cli_main(pretrain_args(tiny_data, tmp_path / "run", data=store)) == 2
    err = capsys.readouterr().err
    assert re.search(message, err) and "Traceback" not in err, err
    assert not (tmp_path / "run" / "metrics.jsonl").exists()  # refused before the first step


def test_the_store_records_each_shards_checksums_and_largest_id(tiny_data):
    import hashlib

    import numpy as np

    store = tiny_data[0]
    meta = json.loads((store / "meta.json").read_text())
    for split in meta["splits"].values():
        for shard in split["shards"]:
            tokens = np.fromfile(store / f"{shard['name']}.tokens.bin", dtype=meta["dtype"])
            assert shard["max_token_id"] == int(tokens.max()) < meta["tokenizer"]["vocab_size"]
            for kind, digest in shard["sha256"].items():
                assert hashlib.sha256((store / f"{shard['name']}.{kind}").read_bytes()).hexdigest() == digest


# --------------------------------------------------------------------------------------------- budgets


def test_step_timing_leaves_out_set_up_and_cleans_up(tiny_data, tmp_path, monkeypatch):
    """A time budget becomes a step count from per-step time alone: a slow set-up (here, a 3 s calibration GEMM,
    called twice) must not count. Timing set-up in, as the demo once did, gives >= 6 s / 8 steps = 0.75 s; a tiny
    model's step stays far below the 0.6 s bound even on a loaded 2-core machine (the bound tells the two apart,
    it does not time the step)."""
    import tempfile
    import time

    import litebert.pretrain as pretrain_module
    from litebert.errors import ConfigError
    from litebert.pretrain import measure_seconds_per_step

    def slow_calibration(*args, **kwargs):
        time.sleep(3.0)
        return 1e12

    monkeypatch.setattr(pretrain_module, "measure_peak_flops", slow_calibration)
    user_run = tmp_path / "run"
    (user_run / "checkpoint-5").mkdir(parents=True)  # a real run of the user's, which the probe must not touch
    (user_run / "checkpoint-5" / "model.safetensors").write_bytes(b"weights")
    cfg = PretrainConfig(**config_args(tiny_data, user_run))
    probes_before = set(Path(tempfile.gettempdir()).glob("litebert-probe-*"))
    per_step = measure_seconds_per_step(cfg, steps=8)
    assert 0 < per_step < 0.6, per_step
    assert set(Path(tempfile.gettempdir()).glob("litebert-probe-*")) == probes_before  # the throw-away run is gone
    assert sorted(p.name for p in user_run.rglob("*")) == ["checkpoint-5", "model.safetensors"]
    with pytest.raises(ConfigError, match="at least 3 steps"):
        measure_seconds_per_step(cfg, steps=2)


# --------------------------------------------------------------------------------------------- learning


def write_gutenberg_corpus(source: Path, out: Path, sample: Path, sentences_per_document: int = 16) -> None:
    """The NLTK Gutenberg texts hold one tokenized sentence per line: documents of 16 consecutive sentences.
    Every 10th document also goes to `sample` (enough to train a 2000-piece vocab, and 10x faster)."""
    with out.open("w", encoding="utf-8") as f, sample.open("w", encoding="utf-8") as g:
        for path in sorted(source.glob("*.txt")):
            lines = [" ".join(line.split()) for line in path.read_text(encoding="utf-8").splitlines()]
            lines = [line for line in lines if line]
            for n, i in enumerate(range(0, len(lines), sentences_per_document)):
                doc = lines[i:i + sentences_per_document]
                if len(doc) >= 2:
                    f.write("\n".join(doc) + "\n\n")
                    if n % 10 == 0:
                        g.write("\n".join(doc) + "\n\n")


@torch.no_grad()
def balanced_sop_accuracy(model, store, max_seq_length: int, pairs: int = 400) -> float:
    """SOP accuracy on held-out chunks of two or more sentences, each scored in both orders: chance is exactly 50%,
    and so is the score of a model that always gives the same answer (about two thirds of the training labels are
    1 here: one-sentence chunks take their second segment from another document)."""
    from litebert.data.pretraining import PretrainingDataset, collate_pretraining

    data = PretrainingDataset(store, split="validation", max_seq_length=max_seq_length, max_predictions_per_seq=10)
    chunks = data.chunk_index(0)
    several = [i for i in range(len(chunks)) if chunks.ends[i] - chunks.starts[i] >= 2][:pairs]
    assert len(several) >= 200
    batch = collate_pretraining([data.example(i, swap=s) for i in several for s in (False, True)],
                                pad_id=store.token_id("pad"))
    model.eval()
    out = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"],
                masked_positions=batch["masked_positions"])
    return (out.sop_logits.argmax(-1) == batch["sop_labels"]).float().mean().item()


@pytest.mark.slow
def test_pretraining_learns_mlm_and_sentence_order(shared_data, tmp_path):
    """A 0.36M-parameter ALBERT (E 64, H 128, 2 layers) pretrained for 500 steps of 64 x 64 tokens (LAMB, lr 5e-3)
    on the Gutenberg texts (2.4M tokens, 2% of the documents held out): the MLM loss falls by over a nat and the
    SOP accuracy on held-out, balanced sentence pairs goes from chance to over 60% (63% at 400 steps and 67% at
    step 400 of an 800-step run, when this test was written)."""
    from litebert.config import AlbertConfig
    from litebert.data.store_build import build_store
    from litebert.model import AlbertForPreTraining
    from litebert.tokenizer_train import train_sentencepiece

    corpus, sample = tmp_path / "gutenberg.txt", tmp_path / "sample.txt"
    write_gutenberg_corpus(shared_data / "gutenberg", corpus, sample)
    train_sentencepiece([sample], tmp_path / "tokenizer", vocab_size=2000)
    store = build_store([corpus], tmp_path / "tokenizer", tmp_path / "store", validation_fraction=0.02)
    config = AlbertConfig(vocab_size=store.vocab_size, embedding_size=64, hidden_size=128, num_hidden_layers=2,
                          num_attention_heads=2, intermediate_size=512, max_position_embeddings=128)
    config.to_json(tmp_path / "model.json")
    run = tmp_path / "run"
    pretrain(PretrainConfig(model=str(tmp_path / "model.json"), data=str(tmp_path / "store"), out=str(run),
                            max_seq_length=64, max_predictions_per_seq=10, batch_size=64, micro_batch_size=64,
                            steps=500, lr=5e-3, warmup_steps=50, precision="auto", log_every=10,
                            save_every=500, eval_batches=4))

    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if "loss" in r]
    first, last = train[:3], train[-3:]  # steps 10-30 and 480-500
    assert sum(r["mlm_loss"] for r in first) / 3 - sum(r["mlm_loss"] for r in last) / 3 > 1.0
    assert sum(r["mlm_acc"] for r in last) / 3 > sum(r["mlm_acc"] for r in first) / 3 + 0.03
    # Issue 43: the run must not end collapsed (albert-base at the official lr did, within 100 updates). At the
    # held-out [MASK] positions this run is level with the commonest-piece guess (7.5% against 7.4% when written):
    # the [MASK] target is not reached at this budget, so it is reported here, not asserted.
    assert all(r["health_spread"] > 10 * COLLAPSE_SPREAD for r in last), [r["health_spread"] for r in last]

    torch.manual_seed(0)
    before = balanced_sop_accuracy(AlbertForPreTraining(config), store, 64)
    after = balanced_sop_accuracy(AlbertForPreTraining.from_pretrained(run / "checkpoint-500"), store, 64)
    assert abs(before - 0.5) < 0.06 and after > 0.6, (before, after)


@pytest.mark.slow
def test_pretraining_learns_to_read_the_neighbours_of_a_mask(tmp_path):
    """Issue 43's missing check: a run must leave the commonest-piece guess at [MASK], on text where only the
    neighbours help (litebert.lab.synthetic.write_markov_corpus), through the whole pretrain path (store, SOP pairs,
    whole-word n-gram masks, the loop, the held-out evaluator). ALBERT's shape (E 64 -> H 128, 2 layers, all
    shared), AdamW 2e-3 with the E -> H projection started at unit scale and trained at 0.03x the lr
    (docs/recipes.md, "Session 16"), 600 updates of 64 x 32 tokens. When written (experiments/markov_text.py, one
    thread): 44.0% / 41.5% / 42.3% at [MASK] for seeds 0 / 1 / 2, against 10.1% / 9.1% / 8.2% for the commonest
    word and 31.5% / 41.5% / 34.7% for the bigram table (the model reads the word after, too); LAMB at 1e-2 (the
    demo's optimizer) 13.7% and pretrain's defaults the commonest word (at 64 tokens: docs/recipes.md). Those runs
    drew the official init; with the residual branches at pretrain's default since (0.5 for 2 applications) seed 0
    gives 43.2%."""
    from litebert.config import AlbertConfig
    from litebert.data.store_build import build_store
    from litebert.lab.synthetic import write_markov_corpus
    from litebert.tokenizer import WordPieceTokenizer

    write_markov_corpus(tmp_path / "corpus.txt", tmp_path / "vocab.txt")
    WordPieceTokenizer(tmp_path / "vocab.txt").save_pretrained(tmp_path / "tokenizer")
    store = build_store([tmp_path / "corpus.txt"], tmp_path / "tokenizer", tmp_path / "store",
                        validation_fraction=0.02)
    AlbertConfig(vocab_size=store.vocab_size, embedding_size=64, hidden_size=128, num_hidden_layers=2,
                 num_attention_heads=2, intermediate_size=512, max_position_embeddings=64).to_json(tmp_path / "m.json")
    run = tmp_path / "run"
    pretrain(PretrainConfig(model=str(tmp_path / "m.json"), data=str(store.path), out=str(run), max_seq_length=32,
                            max_predictions_per_seq=10, batch_size=64, micro_batch_size=64, steps=600, lr=2e-3,
                            optimizer="adamw", warmup_steps=60, projection_init="unit", projection_lr_scale=0.03,
                            log_every=50, save_every=600, eval_batches=8))

    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    held_out = [r for r in rows if "eval_mlm_acc_mask" in r][-1]
    acc, commonest, bigram = (held_out[k] for k in ("eval_mlm_acc_mask", "eval_base_mask_commonest",
                                                     "eval_base_mask_bigram"))
    assert 0.05 < commonest < 0.12 and bigram > 0.3, held_out  # the corpus is what the docstring says
    assert acc > 3 * commonest and acc > 0.9 * bigram, held_out
    assert all(r["health_spread"] > 10 * COLLAPSE_SPREAD for r in rows if "health_spread" in r)


@pytest.mark.parametrize("given, scale", [(None, 0.5), (1.0, 1.0), (0.25, 0.25)])
def test_a_fresh_run_scales_its_residual_branches_for_its_depth(tiny_data, tmp_path, given, scale):
    """By default a run from scratch starts its residual branches at branch_scale_for_depth (0.5 for the tiny
    model's 2 applications; issue 43), --branch-init-scale sets another factor (1: the official draw), and the
    model card's recipe records the factor used. Everything else is the official draw of the same seed."""
    from litebert.model import AlbertForPreTraining
    from litebert.pretrain import training_record

    run = setup(PretrainConfig(**config_args(tiny_data, tmp_path / "run", branch_init_scale=given)))
    torch.manual_seed(0)
    official = AlbertForPreTraining(run.raw_model.config).state_dict()
    for name, value in run.raw_model.state_dict().items():
        factor = scale if name.endswith(("out.weight", "up.weight", "down.weight")) else 1.0
        if name.endswith("qkv.weight"):
            rows = value.shape[1]  # [3H, H]: the value rows are 2H:3H
            assert torch.equal(value[:2 * rows], official[name][:2 * rows])
            value, official[name], factor = value[2 * rows:], official[name][2 * rows:], scale
        assert torch.allclose(value, factor * official[name]), name
    assert training_record(run, {}).recipe["branch_init_scale"] == scale


def test_mlm_only_pretraining_leaves_the_pooler_and_sop_head_as_they_started(tiny_data, tmp_path):
    """--objective none trains neither the pooler nor the SOP head; LAMB's weight decay used to erase them anyway
    (a pure-decay update under the trust ratio is a step of lr * w), so fine-tuning got an all-zero pooler."""
    from litebert.pretrained import read_model_state

    args = config_args(tiny_data, tmp_path / "run", objective="none", steps=6, save_every=6, lr=5e-2)
    start = {k: v.clone() for k, v in setup(PretrainConfig(**args)).raw_model.state_dict().items()}
    pretrain(PretrainConfig(**args))
    end = read_model_state(tmp_path / "run" / "checkpoint-6")[2]
    untrained = [k for k in start if k.startswith(("albert.pooler.", "sop."))]
    assert len(untrained) == 4 and all(torch.equal(end[k], start[k]) for k in untrained)
    assert not torch.equal(end["albert.embeddings.word_embeddings.weight"],
                           start["albert.embeddings.word_embeddings.weight"])  # the rest did train


def test_checkpoints_and_final_carry_a_tokenizer_transformers_reads_as_we_do(tiny_data, finished_run):
    """A checkpoint and final/ write the tokenizer's own files (`files()`, the list save_pretrained writes), not a
    copy of the store's tokenizer folder: tokenizer.json included, so stock transformers gives litebert's ids for
    this run's own 500-piece vocabulary (user-defined symbols and all)."""
    transformers = pytest.importorskip("transformers")
    from litebert.tokenizer import load_tokenizer

    texts = [line for line in (tiny_data[0].parent / "corpus.txt").read_text().splitlines() if line.strip()][:300]
    for folder in (finished_run / "checkpoint-2", finished_run / "final"):
        assert (folder / "tokenizer.json").is_file() and (folder / "spiece.model").is_file()
        ours = load_tokenizer(folder).batch_encode(texts)["input_ids"]
        assert transformers.AutoTokenizer.from_pretrained(folder)(texts)["input_ids"] == ours
