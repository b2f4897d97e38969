"""Golden scenario results. The toy scenario is checked against the seed's arithmetic; the Qwen3
decode grid against numbers stored in tests/golden/ (regenerate deliberately with
LAUNCHSIM_REGEN_GOLDEN=1 when the model changes, and say why in the commit)."""

import json
import os

import pytest

from simulator.config import load_scenario
from simulator.studies.runner import run_scenario
from tests.paths import GOLDEN



def test_s13_launch_bound_reproduces_seed_arithmetic(tmp_path):
    res = run_scenario(load_scenario("scenarios/s13_launch_bound.yaml"), tmp_path)
    nine, eleven = res["rows"]
    assert nine["launches"] == 288 and eleven["launches"] == 352
    assert nine["cpu_ms"] == pytest.approx(1.728) and eleven["cpu_ms"] == pytest.approx(2.112)
    assert nine["gpu_ms"] == pytest.approx(0.89)
    assert nine["bound"] == eleven["bound"] == "cpu"
    # step = host time + the last kernel; utilisation = 0.89 / 1.731 (the seed rounds to 52%)
    assert nine["step_ms"] == pytest.approx(1.728 + 0.89 / 288)
    assert nine["gpu_utilization"] == pytest.approx(0.514, abs=0.001)


def _qwen_grid():
    sc = load_scenario("scenarios/qwen3_0p6b_decode.yaml")
    # pin the datasheet profile so calibration updates do not move this golden file
    return sc.model_copy(update={"profile": "datasheet-h200", "replicates": 0, "batch": [1, 8, 64, 512]})


def test_qwen3_decode_grid_golden():
    res = run_scenario(_qwen_grid(), None)
    got = [{k: r[k] for k in ("fusion", "graph", "batch", "step_ms", "cpu_ms", "gpu_ms", "kernels", "launches",
                              "bound")} for r in res["rows"]]
    path = GOLDEN / "qwen3_0p6b_decode_datasheet.json"
    if os.environ.get("LAUNCHSIM_REGEN_GOLDEN"):
        path.write_text(json.dumps(got, indent=1) + "\n")
    want = json.loads(path.read_text())
    assert len(got) == len(want)
    for g, w in zip(got, want):
        for k, v in w.items():
            assert g[k] == (pytest.approx(v, rel=1e-9) if isinstance(v, float) else v), (k, g, w)
    # structure the golden numbers must keep: graphs never slower, eager batch 1 CPU-bound
    by = {(r["fusion"], r["graph"], r["batch"]): r for r in got}
    for (f, g, b), r in by.items():
        if g == "none":
            assert by[(f, "full", b)]["step_ms"] <= r["step_ms"]
    assert by[("none", "none", 1)]["bound"] == "cpu"
