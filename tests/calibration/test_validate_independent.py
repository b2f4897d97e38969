"""calibration/validate_independent.py: the committed independent_compile.json is what round h's measured files and
launchsim's predict give today (regenerated here, not read back); the decoder and round h's script import on a
machine without torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from calibration.validate_independent import RH, ROOT, load, markdown, predict, report
from tests.paths import ROOT as REPO


@pytest.fixture(scope="module")
def fresh():
    return report()


def _same(a, b, where):
    if isinstance(a, float) and isinstance(b, float):
        assert b == pytest.approx(a, rel=1e-9), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


def test_committed_report_is_regenerated_from_the_measured_files(fresh):
    committed = json.loads((ROOT / "validation" / "independent_compile.json").read_text())
    _same(committed, json.loads(json.dumps(fresh)), "independent_compile")
    md = (ROOT / "validation" / "independent_compile.md").read_text()
    assert md == markdown(fresh["rows"], fresh["summary"], fresh["targets"])


def test_every_measured_row_is_predicted_and_measured_figures_are_the_files(fresh):
    timing, counts = load(RH)
    n = sum(len(t["rows"]) for t in timing.values())
    assert len(fresh["rows"]) == n > 0
    for r in fresh["rows"]:
        src = next(x for x in timing[r["model"]]["rows"]
                   if (x["mode"], x["dynamic"], x["batch"]) == (r["mode"], r["dynamic"], r["batch"]))
        assert r["eager_measured_ms"] == src["step_ms"]["median"]
        if r["mode"] == "compiled":
            assert r["graph_measured_ms"] == src["graph_ms"]["median"]
        k = [x for x in counts[r["model"]]["rows"]
             if (x["mode"], x["dynamic"], x["batch"]) == (r["mode"], r["dynamic"], r["batch"])]
        assert r["kernels_measured"] == (k[0]["kernels"] if k else None)
        assert r["impl"] == "reference"


def test_a_row_is_the_users_predict_command(fresh):
    """One compiled + graph row through the command line a user types gives the report's figure."""
    r = next(x for x in fresh["rows"] if x["model"] == "llama-3.2-1b" and x["mode"] == "compiled"
             and x["dynamic"] is False and x["batch"] == 64)
    p = subprocess.run([sys.executable, "-m", "simulator.cli", "predict", "--model",
                        "calibration/configs/hf/llama-3.2-1b.json", "--fusion", "compiled", "--graph", "full",
                        "--batch", "64", "--ctx", "512", "--no-compile-dynamic", "--json"], cwd=REPO,
                       capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert p.returncode == 0, p.stderr[-2000:]
    assert json.loads(p.stdout)["step_ms"] == pytest.approx(r["graph_predicted_ms"], rel=1e-12)


def test_own_host_prediction_moves_only_the_host_lane(fresh):
    """The row's canary enters as --host-canary-us: compiled + graph (one launch) barely moves, eager host work does."""
    slow = predict("qwen3-0.6b", "compiled", "none", 1, 512, False, 13.0)
    base = predict("qwen3-0.6b", "compiled", "none", 1, 512, False, None)
    assert slow["cpu_ms"] == pytest.approx(base["cpu_ms"] * 13.0 / base["host_canary_us"], rel=1e-6)
    assert slow["gpu_ms"] == pytest.approx(base["gpu_ms"], rel=1e-9)


def test_targets_are_stated_from_the_summary(fresh):
    s, vs = fresh["summary"], fresh["targets"]
    assert {v["target"] for v in vs} == {"compiled + graph", "compiled eager", "kernels"}
    for v in vs:
        assert v["met"] == (v["value_pct"] <= v["limit_pct"])
    assert vs[0]["value_pct"] == s["compiled + full graph"]["mape_pct"]


@pytest.mark.parametrize("cmd", [
    "import calibration.independent_decoder as D; D.config('llama-3.2-1b', 2); D._inv_freq(D.config('llama-3.2-1b'))",
    "import runpy, sys; sys.argv = ['round_h.py', '--help']; runpy.run_path('calibration/scripts/round_h.py', "
    "run_name='__main__')",
])
def test_decoder_and_round_script_import_without_torch(cmd):
    block = "import sys; sys.modules['torch'] = None; sys.modules['triton'] = None; "
    p = subprocess.run([sys.executable, "-c", block + cmd], cwd=REPO, capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
    assert p.returncode == 0, p.stderr[-2000:]
    assert "torch" not in p.stderr
