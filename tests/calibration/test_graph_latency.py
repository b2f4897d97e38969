"""calibration/build_graph_latency.py: the graph-launch latency from round n, by hand on small inputs, and the shipped
profile carrying exactly what the committed round gives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calibration.build_graph_latency import MIN_DISTINCT, add_graph_latency, latency

ROOT = Path(__file__).resolve().parents[2]
ROUND_N = ROOT / "calibration" / "measured" / "h200-round-n"


def _round(after: dict[int, float], chain: dict[int, float], ok: bool = True) -> dict:
    cycles = [{"nodes_kind": "layer", "graphs": k, "per_graph_boundary_after_eager_us": v,
               "per_graph_boundary_us": chain[k]} for k, v in after.items()]
    cycles.append({"nodes_kind": "tiny", "graphs": 8, "per_graph_boundary_after_eager_us": 99.0,
                   "per_graph_boundary_us": 99.0})  # another content: never read
    return {"cycles": cycles, "canary": {"host_start_us": 6.5, "host_end_us": 6.9, "ok": ok}}


def test_median_over_enough_distinct_graphs_plus_the_node_gap():
    r = _round({1: 0.4, 2: 0.8, 4: 2.0, 8: 3.0, 16: 5.0}, {1: 0.2, 2: 0.7, 4: 2.4, 8: 4.5, 16: 8.3})
    lat, note = latency(r, 0.3)
    assert MIN_DISTINCT == 4
    assert lat == pytest.approx(3.0 + 0.3)  # median of 2.0, 3.0, 5.0 (k >= 4); k = 1, 2 and tiny content left out
    assert "3.30 us" in note and "0.20 us a boundary at 1 graph" in note and "(ok)" in note


def test_a_failed_canary_is_named_and_too_few_cycles_refused():
    _, note = latency(_round({4: 2.0, 8: 3.0}, {4: 1.0, 8: 2.0}, ok=False), 0.3)
    assert "FAILED" in note
    with pytest.raises(ValueError, match="no layer cycle"):
        latency(_round({1: 0.4, 2: 0.8}, {1: 0.2, 2: 0.7}), 0.3)


def test_add_graph_latency_replaces_the_figure_and_appends_its_source(tmp_path):
    (tmp_path / "timing.json").write_text(json.dumps(_round({4: 2.0, 8: 4.0}, {4: 1.0, 8: 2.0})))
    p = {"device": {"graph_launch_latency_us": 8.34, "graph_node_us": 0.25, "source": "round b."}}
    add_graph_latency(p, tmp_path)
    assert p["device"]["graph_launch_latency_us"] == pytest.approx(3.0 + 0.25)
    assert p["device"]["source"].startswith("round b.; graph_launch_latency_us 3.25 us: round n")


def test_the_shipped_profile_carries_round_n():
    prof = json.loads((ROOT / "simulator" / "profiles" / "h200.json").read_text())["device"]
    lat, _ = latency(json.loads((ROUND_N / "timing.json").read_text()), prof["graph_node_us"])
    assert prof["graph_launch_latency_us"] == lat
    assert 2.0 < lat < 5.0  # what round n measured, far below round b's idle-GPU 8.34 us
