"""Runs `step` and `toy` scenarios: a grid of predictions, a summary, and the report's figures."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from . import charts
from .config.step import StepScenario, ToyScenario
from .costs import CostModel
from .models import load_model
from .plan import LaunchPlan
from .predict import host_band, run_engine, simulate
from .profile import load_profile
from .report import table_html, write_html, write_json
from .sweep_eval import tiled_plan
from .timeline import summarize
from .workload import build_step, decode, kernels_per_layer, toy_step


def _grid(sc: StepScenario, model, costs, advance) -> list[dict]:
    """One row per (fusion, graph, batch) of the scenario."""
    rows = []
    for fusion in sc.fusion:
        for graph in sc.graph:
            for b in sc.batch:
                # the plan by layer tiling: bitwise build_plan(build_step(...)) from 1- and 2-layer builds
                plan = tiled_plan(model, decode(b, sc.ctx), fusion, costs, graph)
                res = summarize(run_engine(plan, sc.engine))
                row = {"model": model.name, "fusion": fusion, "graph": graph, "batch": b, "ctx": sc.ctx}
                row.update(res.as_dict())
                if sc.replicates:
                    # the full step only where host noise is sampled per op (eager launches)
                    step = build_step(model, decode(b, sc.ctx), fusion) if plan.graph_mode == "none" else None
                    band = host_band(step, costs, graph, sc.replicates, sc.seed, plan=plan)
                    row.update({"step_ms_p10": band["p10"], "step_ms_p90": band["p90"]})
                rows.append(row)
                advance()
    return rows


def run_step_scenario(sc: StepScenario, out: Path | None) -> dict:
    model = load_model(sc.model)
    prof = load_profile(sc.profile)
    costs = CostModel(prof)
    from .progress import task

    with task(f"{sc.name}: step grid", total=len(sc.fusion) * len(sc.graph) * len(sc.batch)) as advance:
        rows = _grid(sc, model, costs, advance)
    tl_spec = sc.timeline
    tl_step = build_step(model, decode(tl_spec.batch, sc.ctx), tl_spec.fusion)
    _, tl = simulate(tl_step, costs, tl_spec.graph, "des")
    kpl = {f: kernels_per_layer(model, f) for f in ("none", "packed", "compiled", "fused")}
    result = {
        "scenario": sc.model_dump(mode="json"),
        "profile": {"name": prof.name, "source": prof.source, "date": prof.date},
        "model": model.__dict__,
        "kernels_per_layer": kpl,
        "rows": rows,
        "crossover": _crossovers(rows),
        "summary_columns": ["fusion", "graph", "batch", "step_ms", "cpu_ms", "gpu_ms", "kernels", "launches", "bound"],
    }
    if out is not None:
        write_json(out / "result.json", result)
        figs = [
            charts.timeline_figure(tl, tl_spec.launches,
                                   f"{model.name}, {tl_spec.fusion}, graph {tl_spec.graph}, batch {tl_spec.batch}: "
                                   f"first {tl_spec.launches} launches"),
            _split_figure(rows, model.name),
            charts.bars_figure(list(kpl), [float(v) for v in kpl.values()],
                               f"{model.name}: kernels per decoder layer by fusion level", "kernels / layer"),
        ]
        write_html(out / "report.html", f"launchsim: {sc.name}", figs,
                   [table_html(rows, "All grid points (times in ms)")],
                   intro=f"{sc.description} Profile: {prof.name} ({prof.source}, {prof.date}). Context {sc.ctx}.")
    return result


def _crossovers(rows: list[dict]) -> list[dict]:
    """Per (fusion, graph): the smallest batch at which the step stops being CPU-bound."""
    out = []
    keys = sorted({(r["fusion"], r["graph"]) for r in rows})
    for f, g in keys:
        rs = sorted((r for r in rows if r["fusion"] == f and r["graph"] == g), key=lambda r: r["batch"])
        first_gpu = next((r["batch"] for r in rs if r["bound"] == "gpu"), None)
        out.append({"fusion": f, "graph": g, "first_gpu_bound_batch": first_gpu})
    return out


def _split_figure(rows: list[dict], model: str):
    """Per fusion level: step time per graph mode, and the eager step's host and GPU lane totals."""
    panels: dict[str, dict] = {}
    dash = {"host launch time (eager)": "dot", "GPU kernel time": "dash"}
    for r in rows:
        pan = panels.setdefault(f"fusion {r['fusion']}", {})
        series = [(f"step, graph {r['graph']}", r["step_ms"], r.get("step_ms_p10"), r.get("step_ms_p90"))]
        if r["graph"] == "none":
            series += [("host launch time (eager)", r["cpu_ms"], None, None), ("GPU kernel time", r["gpu_ms"], None, None)]
        for name, y, lo, hi in series:
            xs, ys, los, his = pan.setdefault(name, ([], [], [], []))
            xs.append(r["batch"])
            ys.append(y)
            los.append(lo)
            his.append(hi)
    return charts.panels_figure(panels, f"{model}: step time and its CPU/GPU split across batch sizes "
                                "(launch-bound where the dotted host line is above the dashed GPU line; "
                                "bars: p10-p90 under host noise)",
                                "batch", "ms", log_x=True, dash=dash)


def run_toy_scenario(sc: ToyScenario, out: Path | None) -> dict:
    rows, first_tl = [], None
    for case in sc.cases:
        step = toy_step(case.layers, case.kernels_per_layer, case.launch_us * 1e-6, case.kernel_s)
        n = step.kernels
        plan = LaunchPlan(
            host_s=np.full(n, case.launch_us * 1e-6), kernels_per_launch=np.ones(n, dtype=np.int64),
            gpu_s=np.full(n, case.kernel_s), gap_s=np.full(n, case.gap_us * 1e-6), queue_depth=case.queue_depth,
            launch_labels=[f"launch {i}" for i in range(n)], kernel_names=[f"kernel {i}" for i in range(n)],
            host_calls=n,
        )
        tl = run_engine(plan, sc.engine)
        res = summarize(tl)
        first_tl = first_tl or tl
        d = res.as_dict()
        rows.append({"case": case.label, "layers": case.layers, "kernels_per_layer": case.kernels_per_layer,
                     "launch_us": case.launch_us, "kernel_us": case.kernel_s * 1e6, **d,
                     "gpu_utilization": d["gpu_ms"] / d["step_ms"] if d["step_ms"] > 0 else 0.0})
    result = {"scenario": sc.model_dump(mode="json"), "rows": rows,
              "summary_columns": ["case", "launches", "cpu_ms", "gpu_ms", "step_ms", "gpu_utilization", "bound"]}
    if out is not None:
        write_json(out / "result.json", result)
        figs = [charts.timeline_figure(first_tl, sc.timeline_launches, f"{rows[0]['case']}: first "
                                       f"{sc.timeline_launches} launches")]
        write_html(out / "report.html", f"launchsim: {sc.name}", figs, [table_html(rows, "Cases (times in ms)")],
                   intro=sc.description)
    return result
