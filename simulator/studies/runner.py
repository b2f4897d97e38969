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
    "import_trace": ("simulator.studies.trace", "run_import_trace_scenario"),
    "export_trace": ("simulator.studies.trace", "run_export_trace_scenario"),
}


def run_scenario(sc, out: Path | None) -> dict:
    """Run `sc`, writing into `out`. A run that fails (an error, a full disk, Ctrl-C) removes the files it
    created there, so no half set of results (a cache.jsonl, a result.json without its CSVs) looks like a
    finished run; files that were there before it are left alone (the writes are atomic: each is the old or
    the new whole file)."""
    module, fn = RUNNERS[sc.kind]
    before = _files(out)
    try:
        return getattr(import_module(module), fn)(sc, out)
    except BaseException:
        for f in _files(out) - before:
            try:
                f.unlink()
            except OSError:
                pass
        raise


def _files(out: Path | None) -> set[Path]:
    if out is None or not Path(out).is_dir():
        return set()
    from simulator.common.outpaths import LOCK_NAME

    return {p for p in Path(out).rglob("*") if p.is_file() and p.name != LOCK_NAME}
