"""The seed's toy, complete (issue 14, item 8): fusion and graph toggles, a batch axis, speedup against both toggles
off, the 11 -> 4 fusion table; and import-trace's per-aten-op launch histogram. Expected numbers are worked by hand
from the seed's arithmetic (s13_cuda_graphs.py: 32 layers, 6 µs per launch, 0.89 ms of GPU time over 288 kernels)."""

from __future__ import annotations


import pytest
import yaml

from simulator.config import load_scenario, parse_scenario
from simulator.studies.runner import run_scenario
from tests.conftest import cli_error
from tests.paths import ROOT

K = 0.89 / 288  # ms per kernel at batch 1


def _toy(engine="des", **case):
    c = {"label": "c", "layers": 32, "kernels_per_layer": 9, "launch_us": 6, "kernel_us": K * 1e3, **case}
    return {"kind": "toy", "name": "t", "engine": engine, "cases": [c]}


def _rows(doc, **grid):
    res = run_scenario(parse_scenario({**doc, **grid}, "t"), None)
    return {(r["fusion"], r["graph"] == "full", r["batch"]): r for r in res["rows"]}, res


@pytest.mark.parametrize("engine", ["des", "fast"])
def test_toggles_and_speedup_by_hand(engine):
    rows, res = _rows(_toy(engine, fused_kernels_per_layer=3), fusion=[False, True], graph=[False, True])
    off = rows[(False, False, 1)]
    assert off["launches"] == 288 and off["step_ms"] == pytest.approx(1.728 + K)  # host-bound: 288 x 6 µs + 1 kernel
    assert off["speedup_vs_unoptimised"] == 1.0
    g = rows[(False, True, 1)]  # one 6 µs replay, then 288 kernels back to back
    assert g["launches"] == 1 and g["cpu_ms"] == pytest.approx(0.006)
    assert g["step_ms"] == pytest.approx(0.006 + 0.89)
    assert g["speedup_vs_unoptimised"] == pytest.approx((1.728 + K) / 0.896)
    f = rows[(True, False, 1)]  # 96 launches of 3 kernels' worth of GPU time (9.27 µs > 6 µs): GPU-bound
    assert f["launches"] == 96 and f["cpu_ms"] == pytest.approx(0.576)
    assert f["step_ms"] == pytest.approx(0.006 + 0.89) and f["bound"] == "gpu"
    assert rows[(True, True, 1)]["step_ms"] == pytest.approx(0.896)
    assert "speedup_vs_unoptimised" in res["summary_columns"] and "toggles" in res["summary_columns"]


def test_batch_axis_closes_the_gaps():
    rows, _ = _rows(_toy(kernel_us_per_seq=0.05), graph=[False, True], batch=[1, 128])
    k128 = K + 127 * 0.05e-3  # 9.44 µs per kernel: longer than a 6 µs launch
    assert rows[(False, False, 128)]["step_ms"] == pytest.approx(0.006 + 288 * k128)
    assert rows[(False, False, 128)]["bound"] == "gpu"
    assert rows[(False, True, 128)]["speedup_vs_unoptimised"] == pytest.approx(1.0)
    assert rows[(False, True, 1)]["speedup_vs_unoptimised"] > 1.9


def test_speedup_is_against_both_off_even_when_the_grid_leaves_it_out():
    rows, _ = _rows(_toy(), graph=[True])
    assert rows[(False, True, 1)]["speedup_vs_unoptimised"] == pytest.approx((1.728 + K) / 0.896)


def test_shipped_fusion_table_case():
    res = run_scenario(load_scenario(ROOT / "scenarios/s13_fusion_graphs.yaml"), None)
    rows = {(r["fusion"], r["graph"] == "full", r["batch"]): r for r in res["rows"]}
    k = 0.89 / 288
    assert rows[(False, False, 1)]["launches"] == 352 and rows[(False, False, 1)]["cpu_ms"] == pytest.approx(2.112)
    fused = rows[(True, False, 1)]
    assert fused["kernels_per_layer"] == 4 and fused["launches"] == 128 and fused["cpu_ms"] == pytest.approx(0.768)
    # the layer's GPU time (11 x 3.09 µs) in 4 kernels of 8.5 µs: the GPU is the bottleneck
    assert fused["step_ms"] == pytest.approx(0.006 + 352 * k)
    assert fused["speedup_vs_unoptimised"] == pytest.approx((2.112 + k) / (0.006 + 352 * k))
    tab = res["fusion_tables"]
    assert [t["kernels"] for t in tab] == [4, 2, 2, 3]


def test_shipped_toy_report(tmp_path):
    run_scenario(load_scenario(ROOT / "scenarios/s13_fusion_graphs.yaml"), tmp_path)
    html = (tmp_path / "report.html").read_text()
    assert "fusion table, 11 -&gt; 4 kernels per layer" in html and "speedup_vs_unoptimised" in html


@pytest.mark.parametrize("case, grid, needle", [
    ({"fusion_table": [{"name": "a", "replaces": ["x", "y"]}]}, {}, "fusion_table replaces 2 kernels"),
    ({}, {"fusion": [True]}, "fused_kernels_per_layer or fusion_table"),
    ({"fused_kernels_per_layer": 2, "fusion_table": [{"name": "a", "replaces": ["x"] * 9}]}, {}, "differs"),
    ({"fused_gpu_scale": 0}, {}, "fused_gpu_scale"),
])
def test_bad_toy_fields_give_one_line(tmp_path, capsys, case, grid, needle):
    p = tmp_path / "toy.yaml"
    p.write_text(yaml.safe_dump({**_toy(**case), **grid}))
    err = cli_error(capsys, ["run", str(p), "--out", str(tmp_path / "o")])
    assert "toy.yaml" in err and needle in err, err


HF = ROOT / "calibration/measured/h200-round-a/hf_qwen3-0.6b_eager_b1.trace.json.gz"


def test_import_trace_prints_the_aten_op_histogram(tmp_path, capsys):
    from simulator.cli import main
    from simulator.traces.importer import import_trace, op_histogram
    from simulator.traces.read import read_trace

    hist = {r["op"]: r for r in op_histogram(import_trace(read_trace(HF)))}
    # the seed's counts for this model (mini_llm): mul 368, linear 197, mean 113, pow 114
    assert hist["aten::mul"]["calls"] == 368 and hist["aten::linear"]["calls"] == 197
    assert hist["aten::mean"]["calls"] == hist["aten::rsqrt"]["calls"] == 113
    with pytest.raises(SystemExit) as e:
        main(["import-trace", str(HF), "--out", str(tmp_path / "w.json"), "--top-ops", "3"])
    assert e.value.code == 0
    out = capsys.readouterr().out.replace("\n", " ")
    assert "launches by aten op, per step" in out and "mul 368, add 255" in out and "3 of 20 ops shown" in out
