"""The engine-loop validation (calibration/validate_engine.py) reproduces from the committed measurement, and
the engine figures in the shipped profile are the measured ones (calibration/build_engine.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calibration.build_engine import engine_section
from calibration.validate_engine import ENGINE, MEASURED, loop_rows
from simulator.model.profile import load_profile

COMMITTED = Path("calibration/validation/engine_loop_validation.json")


@pytest.mark.parametrize("name", ["h200-engine", "h200-round-c", "h200-round-e"])
def test_loop_validation_reproduces_the_committed_report(name):
    path = MEASURED / name / "engine_loop.json"
    data = json.loads(path.read_text())
    rows = loop_rows(data, load_profile("h200"), inputs_round=path.resolve() == ENGINE.resolve())
    committed = {r["name"]: r for r in json.loads(COMMITTED.read_text())["rounds"]}[name]["loop"]
    assert len(rows) == len(committed) == 18
    assert sum(r["engine_inputs_from_this_row"] for r in rows) == (6 if name == "h200-engine" else 0)
    for got, want in zip(rows, committed):
        assert {k: got[k] for k in ("batch", "graph", "sampling", "scheduling")} == \
               {k: want[k] for k in ("batch", "graph", "sampling", "scheduling")}
        assert got["predicted_ms"] == pytest.approx(want["predicted_ms"], rel=1e-9)
        assert got["measured_ms"] == want["measured_ms"]
    # the loop model's own invariants on measured inputs: async never slower than sync, graph faster than eager
    by = {(r["batch"], r["graph"], r["sampling"], r["scheduling"]): r["predicted_ms"] for r in rows}
    for (b, g, s, sched), v in by.items():
        if sched == "async":
            assert v <= by[(b, g, s, "sync")] + 1e-12
        if g == "full" and s == "greedy":
            assert v < by[(b, "none", s, sched)]


def test_shipped_engine_figures_are_the_measured_medians():
    data = json.loads(ENGINE.read_text())
    sec = engine_section(data)
    prof = load_profile("h200")
    es = prof.host.engine_step_us
    assert es is not None
    assert list(es.schedule.us) == pytest.approx(sec["schedule"]["us"])
    assert es.copy_launch_us == pytest.approx(sec["copy_launch_us"])
    # schedule at batch 1 is the p50 of the graph/greedy/sync parts pass, read directly
    run = next(r for r in data["loop"][0]["runs"]
               if (r["graph"], r["sampling"], r["scheduling"]) == ("full", "greedy", "sync"))
    assert es.schedule.us[0] == pytest.approx(run["parts_us"]["schedule"]["p50"])
