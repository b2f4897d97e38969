"""Round ak's canary-scaled figures (calibration/measured/h100-round-ak/*/predicted_h100-sxm_canary.json, quoted in
calibration/validation/lora.md) are what `round_ag_predict --host-canary-us` makes from today's h100-sxm profile:
the host lane moved to the timing process's canary (the mean of its start and end), nothing else."""

from __future__ import annotations

import json

import pytest

from calibration.scripts.round_ag import ROW_SETS
from calibration.scripts.round_ag_predict import predict_rows
from simulator.model.costs import CostModel
from simulator.model.profile import host_scaled, load_profile
from tests.paths import ROOT

AK = ROOT / "calibration" / "measured" / "h100-round-ak"


@pytest.mark.parametrize("folder,rows", [("ai", "unseen"), ("ag", "ag")])
def test_canary_figures_are_the_scripts(folder, rows):
    saved = json.loads((AK / folder / "predicted_h100-sxm_canary.json").read_text())
    timing = json.loads((AK / folder / "time_ag.json").read_text())["canary"]
    canary = (timing["host_start_us"] + timing["host_end_us"]) / 2
    assert saved["host_canary_us"] == pytest.approx(canary, abs=1e-4)
    assert saved["made_before_measuring"] is False and saved["row_set"] == rows
    made = predict_rows(CostModel(host_scaled(load_profile("h100-sxm"), saved["host_canary_us"])), ROW_SETS[rows])
    assert made == saved["rows"]
