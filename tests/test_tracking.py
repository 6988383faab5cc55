"""--report-to: the trackers get what metrics.jsonl holds (read back through each tracker's own reader), and a
tracker that fails never stops training."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "reliability"))
from harness import config_args, pretrain_args, tiny_setup  # noqa: E402

from litebert import tracking  # noqa: E402
from litebert.cli import main as cli_main  # noqa: E402
from litebert.errors import ConfigError  # noqa: E402
from litebert.finetune import FinetuneConfig, finetune  # noqa: E402
from litebert.pretrain import PretrainConfig, pretrain  # noqa: E402
from tiny_models import save_model, tokenizer  # noqa: E402


def records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def mlflow_run(run_dir: Path):
    """The one MLflow run in the run dir's file store, read back with MLflow's own client."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=(run_dir / "mlruns").resolve().as_uri())
    (run,) = client.search_runs(["0"])  # the Default experiment: MLFLOW_EXPERIMENT_* are unset here
    return client, run


def history(client, run, key: str) -> list[tuple[int, float]]:
    return sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, key))


def logged(recs: list[dict], key: str, split: str | None = None) -> list[tuple[int, float]]:
    return [(r["step"], r[key]) for r in recs if r.get(key) is not None and r.get("split") == split]


@pytest.fixture(autouse=True)
def _own_mlflow_settings(monkeypatch):
    for name in ("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_EXPERIMENT_ID"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory):
    return tiny_setup(tmp_path_factory.mktemp("tracking_data"))


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, shared_data):
    return save_model(tmp_path_factory.mktemp("tracking_model"), "AlbertForPreTraining", tokenizer(shared_data),
                      max_position_embeddings=128)


def finetune_cfg(tmp_path, model_dir, shared_data, **kw) -> FinetuneConfig:
    return FinetuneConfig(task="sst-2", model=str(model_dir), data=str(shared_data / "glue" / "SST-2"),
                          out=str(tmp_path / "run"), steps=4, eval_every=2, batch_size=4, max_seq_length=32,
                          max_train_examples=16, max_eval_examples=8, precision="fp32", lr=1e-4, log_every=1,
                          threads=1, **kw)


def test_a_pretraining_run_appears_in_mlflow_with_its_record_and_every_figure(tiny_data, tmp_path):
    pytest.importorskip("mlflow")
    out = tmp_path / "run"
    result = pretrain(PretrainConfig(**config_args(tiny_data, out, steps=4, eval_every=2, report_to="mlflow")))
    client, run = mlflow_run(out)
    assert run.info.status == "FINISHED" and run.info.run_name == "run"
    record = json.loads((out / "run.json").read_text())
    assert run.data.params["train.lr"] == str(record["train"]["lr"])
    assert run.data.params["model_config.hidden_size"] == str(record["model_config"]["hidden_size"])
    assert run.data.params["store_fingerprint"] == record["store_fingerprint"]
    recs = records(out)
    for key in ("loss", "mlm_acc", "lr", "eval_mlm_loss", "eval_mlm_acc"):
        assert history(client, run, key) == logged(recs, key), key
    assert [s for s, _ in history(client, run, "eval_mlm_acc")] == [2, 4]  # held-out, per evaluation step
    assert [s for s, _ in history(client, run, "loss")] == [1, 2, 3, 4]
    for key in ("eval_mlm_acc", "loss"):
        assert history(client, run, f"final/{key}") == [(4, result[key])]


@pytest.mark.parametrize("experiment", [None, "sst2-runs"])
def test_the_mlflow_run_is_found_by_mlflow_search_runs_at_the_documented_uri(tiny_data, tmp_path, experiment):
    """`litebert pretrain --report-to mlflow` (a real process), then MLflow's own fluent API in a fresh process with
    only the documented settings (the tracking URI OUT/mlruns as written, MLFLOW_ALLOW_FILE_STORE=true, and the same
    MLFLOW_EXPERIMENT_NAME if the run had one): `mlflow.search_runs()` finds the run, finished, with its figures.
    (Before: the run sat in an experiment "litebert" that a plain search_runs() does not look in.)"""
    import os
    import subprocess

    pytest.importorskip("mlflow")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    if experiment:
        env["MLFLOW_EXPERIMENT_NAME"] = experiment
    done = subprocess.run([sys.executable, "-m", "litebert", *pretrain_args(tiny_data, Path("run"), steps=2),
                           "--report-to", "mlflow"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"at {(tmp_path / 'run' / 'mlruns').resolve().as_uri()}" in done.stderr, done.stderr[-3000:]
    read = ("import json, mlflow; mlflow.set_tracking_uri('run/mlruns'); runs = mlflow.search_runs(output_format="
            "'list'); print(json.dumps([[r.info.run_name, r.info.status, r.data.metrics.get('final/loss')] for r in "
            "runs]))")
    found = subprocess.run([sys.executable, "-c", read], cwd=tmp_path, env={**env, "MLFLOW_ALLOW_FILE_STORE": "true"},
                           capture_output=True, text=True, timeout=300)
    assert found.returncode == 0, found.stderr[-3000:]
    final_loss = next(r["loss"] for r in records(tmp_path / "run") if r.get("step") == 2 and "loss" in r)
    assert json.loads(found.stdout.strip().splitlines()[-1]) == [["run", "FINISHED", pytest.approx(final_loss)]]


def test_a_finetuning_run_appears_in_mlflow_and_tensorboard_with_its_dev_figures(model_dir, shared_data, tmp_path):
    pytest.importorskip("mlflow")
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    result = finetune(finetune_cfg(tmp_path, model_dir, shared_data, report_to="mlflow,tensorboard"))
    out = tmp_path / "run"
    recs = records(out)
    client, run = mlflow_run(out)
    assert run.info.status == "FINISHED"
    assert run.data.params == {k: str(v) for k, v in json.loads((out / "finetune.json").read_text()).items()}
    for key, split in (("loss", None), ("grad_norm", None), ("accuracy", "dev")):
        tag = f"{split}/{key}" if split else key
        assert history(client, run, tag) == logged(recs, key, split), tag
    assert [s for s, _ in history(client, run, "dev/accuracy")] == [2, 4]
    assert history(client, run, "best/accuracy") == [(4, result["best"]["accuracy"])]
    assert history(client, run, "best/step") == [(4, result["best_step"])]

    events = EventAccumulator(str(out / "tb"))
    events.Reload()
    for key, split in (("loss", None), ("accuracy", "dev")):
        tag = f"{split}/{key}" if split else key
        steps, values = zip(*logged(recs, key, split))
        assert [e.step for e in events.Scalars(tag)] == list(steps), tag
        assert [e.value for e in events.Scalars(tag)] == pytest.approx(values, rel=1e-6), tag  # float32 there


def test_a_tracker_that_raises_warns_once_and_the_run_goes_on(model_dir, shared_data, tmp_path, monkeypatch,
                                                              capsys):
    pytest.importorskip("mlflow")
    pytest.importorskip("tensorboard")
    calls = []

    def failing_log(self, metrics, step):
        calls.append(step)
        if len(calls) >= 2:
            raise OSError("the tracking store went away")
    monkeypatch.setattr(tracking.MLflowTracker, "log", failing_log)
    plain = finetune(finetune_cfg(tmp_path / "plain", model_dir, shared_data))
    capsys.readouterr()
    result = finetune(finetune_cfg(tmp_path, model_dir, shared_data, report_to="mlflow,tensorboard"))
    err = capsys.readouterr().err
    assert err.count("the mlflow tracker failed (OSError: the tracking store went away)") == 1
    assert len(calls) == 2  # dropped after its failure: not called again
    assert result == plain  # the run itself is untouched
    timeless = [[{k: v for k, v in r.items() if k != "elapsed"} for r in records(run)]
                for run in (tmp_path / "plain" / "run", tmp_path / "run")]
    assert timeless[0] == timeless[1]
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path / "run" / "tb"))
    events.Reload()
    assert [e.step for e in events.Scalars("loss")] == [1, 2, 3, 4]  # the other tracker got everything


def test_a_tracker_that_cannot_start_warns_and_the_run_goes_on(model_dir, shared_data, tmp_path, monkeypatch,
                                                              capsys):
    pytest.importorskip("mlflow")
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the store's folder should be\n")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", (blocker / "mlruns").as_uri())
    result = finetune(finetune_cfg(tmp_path, model_dir, shared_data, report_to="mlflow"))
    assert "the mlflow tracker did not start" in capsys.readouterr().err
    assert result["steps"] == 4 and (tmp_path / "run" / "best" / "model.safetensors").is_file()


def test_report_to_is_checked_before_any_work(tmp_path, capsys, monkeypatch):
    with pytest.raises(ConfigError, match="unknown tracker 'comet'"):
        tracking.parse_report_to("mlflow,comet")
    assert tracking.parse_report_to(" MLflow , tensorboard,mlflow") == ("mlflow", "tensorboard")
    assert tracking.parse_report_to("none") == tracking.parse_report_to(None) == ()
    monkeypatch.setattr(tracking.importlib.util, "find_spec", lambda name: None)  # as without the extras
    with pytest.raises(ConfigError, match=r"pip install 'litebert\[mlflow,wandb\]'"):
        tracking.parse_report_to("mlflow,wandb")
    assert cli_main(["pretrain", "--data", str(tmp_path), "--out", str(tmp_path / "run"),
                     "--report-to", "tensorboard"]) == 2
    assert "litebert[tb]" in capsys.readouterr().err
