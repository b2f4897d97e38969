"""Capacity studies optimize layouts at their own operating point (issue 14, item 5): serve at the layout's best
rate, optimize for the batch mix there under the preset's graph memory and count, re-check, iterate to a fixed
point; the preset stays a candidate, so the optimized answer never loses to it, and the report says which won."""

from __future__ import annotations


import pytest
import yaml

from simulator.config import parse_scenario
from simulator.studies.runner import run_scenario
from tests.conftest import cli_error
from tests.paths import ROOT



def _doc(**extra):
    data = yaml.safe_load((ROOT / "scenarios/capacity_qwen3_0p6b.yaml").read_text())
    data.update({"duration_s": 6, "replications": 1, "graph": ["full_and_piecewise"],
                 "profiles": ["datasheet-h200"], "slo": {"percentile": 99, "tpot_ms": 2.5, "ttft_s": 0.5},
                 "curve_fractions": [0.5],
                 "layouts": [{"label": "vllm", "sizes": "vllm"},
                             {"label": "optimized", "optimize": {"against": "vllm", "iterations": 2}}], **extra})
    data["search"].update({"tolerance": 0.1, "max_runs": 6})
    return data


def test_optimized_layout_never_loses_to_its_preset(tmp_path):
    res = run_scenario(parse_scenario(_doc(), "t"), tmp_path)
    by = {f["layout_label"]: f for f in res["configs"]}
    pre, opt = by["vllm"], by["optimized"]
    assert pre["best_rate"] and opt["best_rate"] >= pre["best_rate"]
    assert opt["kv"]["graph_gib"] <= pre["kv"]["graph_gib"] + 1e-9  # given the preset's memory, no more
    o = opt["optimize"]
    assert o["against"] == "vllm" and 1 <= len(o["rounds"]) <= 2
    assert o["rounds"][0]["served_rate"] == pre["best_rate"]
    assert o["memory_budget_gib"] == pytest.approx(pre["kv"]["graph_gib"], rel=1e-6)
    assert o["chosen"] in ("preset", "round 1", "round 2")
    assert o["note"] in opt["layout_note"] and "optimized at its own operating point" in opt["layout_note"]
    if o["chosen"] == "preset":
        assert opt["sizes"] == pre["sizes"] and "kept vllm's sizes" in o["note"]
    html = (tmp_path / "report.html").read_text()
    assert "Layouts optimized at their own operating point" in html


@pytest.mark.parametrize("layouts, needle", [
    ([{"label": "a", "sizes": "vllm"}, {"label": "b", "optimize": {"against": "nope"}}], "optimize.against"),
    ([{"label": "a", "sizes": "vllm", "optimize": {"against": "a"}}], "exactly one of sizes or optimize"),
    ([{"label": "a", "sizes": "vllm"}, {"label": "a", "sizes": [1, 2]}], "labels must differ"),
    ([{"label": "a", "sizes": "vllm"}, {"label": "b", "optimize": {"against": "a", "iterations": 0}}], "iterations"),
])
def test_bad_optimize_layouts_give_one_line(tmp_path, capsys, layouts, needle):
    p = tmp_path / "cap.yaml"
    p.write_text(yaml.safe_dump(_doc(layouts=layouts)))
    err = cli_error(capsys, ["run", str(p), "--out", str(tmp_path / "o")])
    assert "cap.yaml" in err and needle in err, err
