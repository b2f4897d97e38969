"""Dispatch a validated scenario to the study that runs it. Each scenario kind registers one
function `(scenario, out_dir | None) -> result dict` here."""

from __future__ import annotations

from pathlib import Path

from .config.step import StepScenario, ToyScenario
from .study_step import run_step_scenario, run_toy_scenario
from .config.serve import ServeScenario
from .config.capacity import CapacityScenario
from .serving.study import run_serve_scenario
from .study_capacity import run_capacity_scenario
from .config.sweep import SweepScenario
from .study_sweep import run_sweep_scenario
from .config.trace_workload import WorkloadScenario
from .trace_study import run_workload_scenario
from .config.buckets import BucketsScenario
from .study_optimize import run_buckets_scenario

RUNNERS: dict[type, object] = {
    StepScenario: run_step_scenario,
    ToyScenario: run_toy_scenario,
    ServeScenario: run_serve_scenario,
    CapacityScenario: run_capacity_scenario,
    SweepScenario: run_sweep_scenario,
    WorkloadScenario: run_workload_scenario,
    BucketsScenario: run_buckets_scenario,
}


def run_scenario(sc, out: Path | None) -> dict:
    return RUNNERS[type(sc)](sc, out)
