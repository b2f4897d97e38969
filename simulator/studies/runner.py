"""Dispatch a validated scenario to the study that runs it. Each scenario kind names one function
`(scenario, out_dir | None) -> result dict` here, imported only when a scenario of that kind runs (a step
scenario does not pay for importing the serving, sweep or optimizer studies)."""

from __future__ import annotations

from importlib import import_module
from pathlib import Path

RUNNERS: dict[str, tuple[str, str]] = {  # scenario kind -> (module, function)
    "step": ("simulator.studies.step", "run_step_scenario"),
    "toy": ("simulator.studies.step", "run_toy_scenario"),
    "serve": ("simulator.serving.study", "run_serve_scenario"),
    "capacity": ("simulator.studies.capacity", "run_capacity_scenario"),
    "sweep": ("simulator.studies.sweep", "run_sweep_scenario"),
    "workload": ("simulator.studies.trace", "run_workload_scenario"),
    "buckets": ("simulator.studies.optimize", "run_buckets_scenario"),
    "predict": ("simulator.studies.predict", "run_predict_scenario"),
    "startup": ("simulator.studies.capture", "run_startup_scenario"),
    "graph_memory": ("simulator.studies.capture", "run_graph_memory_scenario"),
}


def run_scenario(sc, out: Path | None) -> dict:
    module, fn = RUNNERS[sc.kind]
    return getattr(import_module(module), fn)(sc, out)
