"""`launchsim serve`'s study: the serving run of one `serve` scenario (simulator/serving/study.py), its outputs
written to a folder when one is given, and the flat record the command prints (config, metrics, KV, timing and
every assumption)."""

from __future__ import annotations

from pathlib import Path


def run_serve_record(sc, out: Path | None = None) -> dict:
    """Serve scenario `sc`; with `out`, write result.json, metrics.csv, batch_log.csv and report.html there (the
    caller holds the folder's lock). Returns {config..., metrics..., kv..., simulated_s, wall_s, step_evals,
    events, assumptions}."""
    from simulator.serving.study import serve, write_outputs

    result = serve(sc)
    samples = result.pop("_samples")
    if out is not None:
        write_outputs(result, samples, out, sc.name, sc.description)
    return {**result["config"], **result["metrics"], **result["kv"], "simulated_s": result["simulated_s"],
            "wall_s": result["wall_s"], "step_evals": result["step_evals"], "events": result["events"],
            "assumptions": result["assumptions"]}


def header(cmd: str, model: str, profile: str, fusion, graph) -> str:
    """The first line a command prints: what ran and the defaults it used (one set across commands)."""
    from simulator.common import vocab as V

    return f"{cmd} {model} on {profile}: {V.defaults_note(fusion, graph)}"
