"""Dispatch a validated scenario to the study that runs it. Each scenario kind registers one
function `(scenario, out_dir | None) -> result dict` here."""

from __future__ import annotations

from pathlib import Path

from simulator.config.step import StepScenario
from simulator.config.toy import ToyScenario
from simulator.studies.step import run_step_scenario, run_toy_scenario
from simulator.config.serve import ServeScenario
from simulator.config.capacity import CapacityScenario
from simulator.serving.study import run_serve_scenario
from simulator.studies.capacity import run_capacity_scenario
from simulator.config.sweep import SweepScenario
from simulator.studies.sweep import run_sweep_scenario
from simulator.config.trace_workload import WorkloadScenario
from simulator.studies.trace import run_workload_scenario
from simulator.config.buckets import BucketsScenario
from simulator.studies.optimize import run_buckets_scenario

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
