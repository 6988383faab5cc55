"""The benchmarks' target lines (benchmarks/_common.py, run_all.py) and the pretraining lever rows
(bench_pretrain.py): which sides a ratio compares, and how a line that is not a target is shown. Built from
hand-made `Measured` records (no timing is measured or asserted here)."""

from __future__ import annotations

import json

import pytest
import torch

from litebert.lab.bench import Measured
from test_bench_scaling import benchmark_module


@pytest.fixture(scope="module")
def common():
    return benchmark_module("_common")


def side(name: str, seconds: list[float]) -> Measured:
    return Measured(name, "", units_per_step=100.0, flops_per_step=0.0, seconds=seconds)


def test_a_context_line_compares_with_the_reference_s_fastest_precision(common):
    ours = side("ours", [1.0, 1.0, 1.0])
    bf16, fp32 = side("HF bf16 autocast", [3.0, 3.0, 3.0]), side("HF fp32", [1.5, 1.5, 1.5])
    (line,) = common.fastest_reference_entry("x: ours / {ref}", ours, bf16, [bf16, fp32], 2.0)
    assert line["context"] and line["name"].startswith("x: ours / HF fp32 (")
    assert line["value"] == pytest.approx(1.5) and not line["met"]
    # The target's own reference is the fastest: nothing to add.
    assert common.fastest_reference_entry("x: {ref}", ours, fp32, [bf16, fp32], 2.0) == []
    # Latency (lower is better): the ratio is ours' time over the reference's.
    (lat,) = common.fastest_reference_entry("y: {ref}", ours, bf16, [bf16, fp32], 0.5, higher_is_better=False)
    assert lat["value"] == pytest.approx(1 / 1.5) and lat["comparison"] == "<="


def test_run_all_shows_a_context_line_apart_from_the_targets_and_off_the_chart(common):
    run_all = benchmark_module("run_all")
    ours, ref = side("ours", [1.0, 1.0]), side("HF bf16 autocast", [3.0, 3.0])
    goal = common.target_entry("goal line", ours, ref, 2.0, command="cmd")
    extra = common.target_entry("context line", ours, side("HF fp32", [1.5, 1.5]), 2.0, command="cmd",
                                context=True)
    block = run_all.results_block([{"machine": {"cpu": "x"}, "targets": [goal, extra], "sections": []}], 1,
                                  "AMX, auto bf16", "cmd", 60.0)
    rows = {line.split("|")[1].strip(): line.split("|")[5].strip() for line in block.splitlines()
            if line.startswith("| goal line") or line.startswith("| context line")}
    assert rows == {"goal line": "yes", "context line": "context"}
    chart = json.loads(block.split("chart-data:", 1)[1].split("-->", 1)[0])
    assert [t["name"] for t in chart["targets"]] == ["goal line"]


@pytest.mark.parametrize("precision", ["bf16", "fp32"])
def test_the_lever_rows_run_the_precision_ours_runs(precision):
    """Where "auto" resolved to fp32, the lever rows build on fp32 (bf16 autocast becomes a trade-off row), so the
    table measures what ours runs; in bf16 the math attention path is a lever (it is taken for bf16 only)."""
    pretrain = benchmark_module("bench_pretrain")
    eager, rows = pretrain.lever_variants(precision, 1.0, 2.0)
    names = [name for name, _, _ in rows]
    assert any(n.startswith(eager + " ") for n in names)
    levers = [kw["precision"] for name, kw, _ in rows if name.startswith("L") and not name.startswith("L0")]
    assert set(levers) == {precision}
    assert any("math attention" in n for n in names) == (precision == "bf16")
    assert any(kw["precision"] == "bf16" for _, kw, _ in rows)  # bf16 is measured either way


def test_the_profile_counts_a_compiled_graph_call_as_inductor_kernels():
    """On CPU the profiler names a call of an inductor graph "## Call CompiledFxGraph <hash>": its fused kernels
    (LayerNorm, GELU, softmax, adds) belong with inductor's, not with "other ops"."""
    profile = benchmark_module("profile_step")
    inductor = profile.category("cpp_fused_add_0")
    assert profile.category("## Call CompiledFxGraph fdt6deqmiy5s345hkmdc4bxvhfvl2sml6kco3gb5jdhgxr") == inductor
    assert profile.category("aten::addmm") == "matmul (GEMM)"


def test_host_kind_names_the_bf16_instructions_and_the_probes_choice(monkeypatch):
    """Every benchmark's machine line says which arithmetic the figures come from: the bf16 instructions and the
    precision "auto" picks by the probe (hosts with the same flags differ in the latter)."""
    import litebert.lab.bench as bench
    from litebert.device import resolve_precision

    auto = resolve_precision("auto", torch.device("cpu"))
    for flags, isa in ((frozenset({"amx_bf16", "avx512_bf16"}), "AMX"), (frozenset({"avx512_bf16"}),
                       "AVX512-BF16 no AMX"), (frozenset({"avx2"}), "no bf16 instructions")):
        monkeypatch.setattr(bench, "cpu_flags", lambda flags=flags: flags)
        assert bench.host_kind() == f"{isa}, auto {auto}"
    monkeypatch.undo()
    line = bench.host_line()
    assert f"host kind: {bench.host_kind()} (bf16 matmul " in line and "x fp32 by the probe" in line
    assert bench.machine_info()["host_kind"] == bench.host_kind()
