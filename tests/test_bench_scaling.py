"""benchmarks/bench_scaling.py (the cost-growth sweep) and run_all.py's sweep plumbing. Nothing here asserts a
timing: a measured point must be complete and self-consistent, the sweep must keep and resume what it measured,
refuse a point that does not fit in memory, and run_all.py must put a sweep's results into the page."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def benchmark_module(name: str):
    """Import a script of benchmarks/ (they import each other by bare name, as when run from there)."""
    import importlib

    sys.path.insert(0, str(BENCH))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCH))


@pytest.fixture(scope="module")
def scaling():
    return benchmark_module("bench_scaling")


@pytest.fixture(scope="module")
def run_all():
    return benchmark_module("run_all")


def tiny_point(**kw):
    point = dict(group="seq", model="albert-tiny", seq=16, batch=2, ranks=1, threads=1, checkpointing=False,
                 steps=2, repeats=1, repeat=0)
    return {**point, **kw}


def test_a_point_measures_the_real_train_step(scaling):
    r = scaling.measure(tiny_point(checkpointing=True))
    assert len(r["seconds"]) == 2 and all(s > 0 for s in r["seconds"])
    assert r["tokens_per_step"] == 32 and r["tokens_per_s"] == pytest.approx(32 / r["step_s"])
    assert r["flops_per_token"] > 0
    assert r["peak_rss_mb"] >= r["baseline_rss_mb"] > 0  # VmHWM only grows


def test_sweep_keeps_each_point_resumes_and_renders(scaling, tmp_path, monkeypatch):
    points = [tiny_point(), tiny_point(seq=32, batch=1)]
    monkeypatch.setattr(scaling, "sweep", lambda quick, threads, max_repeats: [dict(p) for p in points])
    out = tmp_path / "s"
    assert scaling.main(["--out", str(out), "--nice", "0"]) == 0
    data = json.loads((out / "scaling.json").read_text())
    assert [p["key"] for p in data["points"]] == [scaling.key(dict(p, precision=r["precision"]))
                                                  for p, r in zip(points, data["points"])]
    assert all("error" not in p and p["peak_rss_mb"] > 0 for p in data["points"])
    # --resume: both points are there, so nothing runs again (the records stay as they were).
    assert scaling.main(["--json", str(out / "scaling.json"), "--resume", "--nice", "0"]) == 0
    again = json.loads((out / "scaling.json").read_text())
    assert [p["wall_s"] for p in again["points"]] == [p["wall_s"] for p in data["points"]]
    md = (out / "scaling.md").read_text()
    assert "albert-tiny, seq 16, batch 2, 1 rank(s) x 1 thread(s)" in md and "seq 32, batch 1" in md
    assert (out / "scaling.png").stat().st_size > 0


def test_a_point_that_does_not_fit_is_recorded_and_not_run(scaling, tmp_path, monkeypatch):
    monkeypatch.setattr(scaling, "sweep", lambda quick, threads, max_repeats: [tiny_point()])
    monkeypatch.setattr(scaling, "available_bytes", lambda: 2**20)  # 1 MiB free
    assert scaling.main(["--out", str(tmp_path), "--max-wait", "0", "--nice", "0"]) == 1
    (point,) = json.loads((tmp_path / "scaling.json").read_text())["points"]
    assert point["error"].startswith("not run: MemAvailable stayed below") and "tokens_per_s" not in point
    assert "not run: MemAvailable" in (tmp_path / "scaling.md").read_text()


def test_estimate_covers_the_library_lower_bound_per_rank(scaling):
    lower1, need1 = scaling.estimate_bytes(tiny_point(model="albert-base", seq=128, batch=16))
    lower2, need2 = scaling.estimate_bytes(tiny_point(model="albert-base", seq=128, batch=16, ranks=2))
    assert need1 > lower1 and need2 > lower2
    assert lower2 > lower1  # two ranks hold two copies of the weights and optimizer state


FAKE_SWEEP = '''
import argparse, json, pathlib, sys
p = argparse.ArgumentParser(); p.add_argument("--out"); p.add_argument("--quick", action="store_true")
a = p.parse_args(); out = pathlib.Path(a.out)
(out / "x.md").write_text("| a | b |\\n|---|---|\\n| quick | %s |\\n" % a.quick)
(out / "x.json").write_text(json.dumps({"quick": a.quick}))
(out / "x.png").write_bytes(b"png")
sys.exit(int(not a.quick))
'''


def test_run_all_puts_a_sweep_into_the_page_and_keeps_hand_written_text(run_all, tmp_path, monkeypatch):
    (tmp_path / "fake_sweep.py").write_text(FAKE_SWEEP)
    monkeypatch.setattr(run_all, "HERE", tmp_path)
    monkeypatch.setattr(run_all, "SWEEPS", [("fake", "A fake sweep", "fake_sweep.py", ["--quick"])])
    page = tmp_path / "docs" / "benchmarks.md"
    page.parent.mkdir()
    page.write_text("# Benchmarks\n\nwritten by hand\n")
    assert run_all.main(["--only", "fake", "--out", str(page), "--quick"]) == 0
    assert run_all.main(["--only", "fake", "--out", str(page), "--quick"]) == 0  # replaced, not appended
    text = page.read_text()
    assert text.count("## A fake sweep") == 1 and "written by hand" in text
    assert "| quick | True |" in text and "![A fake sweep](benchmarks_fake.png)" in text
    assert (page.parent / "benchmarks_fake.png").read_bytes() == b"png"
    assert json.loads((page.parent / "benchmarks_fake.json").read_text()) == {"quick": True}
    # A page in a folder that does not exist yet: the folder is made (the chart is copied there first).
    fresh = tmp_path / "new" / "benchmarks.md"
    assert run_all.main(["--only", "fake", "--out", str(fresh), "--quick"]) == 0
    assert (fresh.parent / "benchmarks_fake.png").is_file() and "## A fake sweep" in fresh.read_text()
    # A failing sweep fails the run and says so on the page, keeping what it wrote.
    assert run_all.main(["--only", "fake", "--out", str(page)]) == 1
    assert "**FAILED (exit 1)**" in page.read_text() and "| quick | False |" in page.read_text()


def test_run_all_names_an_unknown_workload(run_all, capsys):
    with pytest.raises(SystemExit) as e:
        run_all.main(["--only", "pretrain-128,nope"])
    assert e.value.code == 2 and "--only nope: unknown" in capsys.readouterr().err


FAKE_RUN = '''
import argparse, json
p = argparse.ArgumentParser()
for flag in ("--threads", "--model", "--json"):
    p.add_argument(flag)
p.add_argument("--quick", action="store_true")
a = p.parse_args()
target = {"name": "fake ratio", "value": 2.5, "min": 2.0, "max": 3.0, "target": 2.0, "comparison": ">=", "met": True,
          "command": "python benchmarks/fake_run.py"}
json.dump({"command": "python benchmarks/fake_run.py", "machine": {"cpu": "fake"}, "targets": [target],
           "sections": [{"title": "Fake workload", "headers": ["side", "model"], "rows": [["ours", a.model]]}]},
          open(a.json, "w"))
'''


def test_run_all_comparisons_land_in_their_thread_block(run_all, tmp_path, monkeypatch):
    (tmp_path / "fake_run.py").write_text(FAKE_RUN)
    monkeypatch.setattr(run_all, "HERE", tmp_path)
    monkeypatch.setattr(run_all, "RUNS", [("fake", "fake_run.py", [])])
    monkeypatch.setattr(run_all, "SWEEPS", [])
    page = tmp_path / "benchmarks.md"
    page.write_text("# Benchmarks\n\nwritten by hand\n")
    for _ in range(2):  # the second run replaces the block
        assert run_all.main(["--smoke", "--out", str(page), "--threads", "1"]) == 0
    text = page.read_text()
    assert text.count("## Results at 1 thread(s) per side") == 1 and "written by hand" in text
    assert "| ours | albert-tiny |" in text  # --smoke runs the comparisons on albert-tiny
    assert "fake ratio" in text and (tmp_path / "benchmarks.png").stat().st_size > 0


def test_run_all_keeps_one_block_per_host_kind(run_all, tmp_path, monkeypatch):
    """A run on another kind of host (another bf16 arithmetic) adds its own table beside the first, instead of
    replacing it: figures from different hosts are never read as one table."""
    import litebert.lab.bench as bench

    (tmp_path / "fake_run.py").write_text(FAKE_RUN)
    monkeypatch.setattr(run_all, "HERE", tmp_path)
    monkeypatch.setattr(run_all, "RUNS", [("fake", "fake_run.py", [])])
    monkeypatch.setattr(run_all, "SWEEPS", [])
    page = tmp_path / "benchmarks.md"
    for kind in ("AMX, auto bf16", "AVX512-BF16 no AMX, auto fp32", "AMX, auto bf16"):
        monkeypatch.setattr(bench, "host_kind", lambda kind=kind: kind)
        assert run_all.main(["--smoke", "--out", str(page), "--threads", "1"]) == 0
    text = page.read_text()
    assert text.count("## Results at 1 thread(s) per side, host kind: AMX, auto bf16") == 1
    assert text.count("## Results at 1 thread(s) per side, host kind: AVX512-BF16 no AMX, auto fp32") == 1


def test_a_points_precision_is_measured_recorded_and_part_of_its_key(scaling, tmp_path, monkeypatch):
    """--precision is what each point runs and records; a point measured in another precision stands beside the
    first instead of being skipped by --resume as already done (the library's "auto" differs between hosts)."""
    monkeypatch.setattr(scaling, "sweep", lambda quick, threads, max_repeats: [tiny_point()])
    results = tmp_path / "scaling.json"
    assert scaling.main(["--json", str(results), "--precision", "fp32", "--nice", "0"]) == 0
    assert scaling.main(["--json", str(results), "--resume", "--precision", "bf16", "--nice", "0",
                         "--markdown", str(tmp_path / "s.md")]) == 0
    points = json.loads(results.read_text())["points"]
    assert [p["precision"] for p in points] == ["fp32", "bf16"]
    assert [p["key"].split("/")[-2] for p in points] == ["fp32", "bf16"]
    md = (tmp_path / "s.md").read_text()
    assert "1 thread(s), fp32 |" in md and "1 thread(s), bf16 |" in md
