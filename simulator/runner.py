"""Dispatch a validated scenario to the study that runs it. Each scenario kind registers one
function `(scenario, out_dir | None) -> result dict` here."""

from __future__ import annotations

from pathlib import Path

from .config.step import StepScenario, ToyScenario
from .study_step import run_step_scenario, run_toy_scenario
from .config.sweep import SweepScenario
from .study_sweep import run_sweep_scenario

RUNNERS: dict[type, object] = {
    StepScenario: run_step_scenario,
    ToyScenario: run_toy_scenario,
    SweepScenario: run_sweep_scenario,
}


def run_scenario(sc, out: Path | None) -> dict:
    return RUNNERS[type(sc)](sc, out)
