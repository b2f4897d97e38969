"""Runs `step` and `toy` scenarios: a grid of predictions, a summary, and the report's figures."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from simulator.report import charts
from simulator.config.step import StepScenario
from simulator.config.toy import ToyScenario
from simulator.engine.plan import LaunchPlan
from simulator.engine.predict import host_band, run_engine
from simulator.report.html import table_html, write_html
from simulator.common.jsonfile import write_json
from simulator.engine.timeline import summarize
from simulator.model.workload import decode


def _grid(sc: StepScenario, base, advance) -> list[dict]:
    """One row per (fusion, graph, batch) of the scenario; `base`: the scenario's `StepSetup` (config/stepopts.py)."""
    from simulator.engine.setup import Capture
    from simulator.engine.tiling import tiled_lower

    rows, model, costs = [], base.model, base.costs
    # the 1- and 2-layer builds and their ops' costs, shared by the graph modes of a fusion level (tiled_lower's
    # memos: keyed by the setup's build key and shape, and by op object; the same plans)
    small: dict = {}
    op_costs: dict = {}
    for fusion in sc.fusion:
        for graph in sc.graph:
            setup = base.with_fusion(fusion).with_capture(Capture(graph))
            for b in sc.batch:
                shape = decode(b, sc.ctx)
                # routed once; the plan by layer tiling: bitwise plan.lower(setup.build(...)) from 1- and 2-layer builds
                plan = tiled_lower(setup, shape, setup.capture.route(shape).mode, small, op_costs)
                res = summarize(run_engine(plan, sc.engine))
                row = {"model": model.name, "fusion": fusion, "graph": graph, "batch": b, "ctx": sc.ctx}
                row.update(res.as_dict())
                if sc.replicates:
                    # the full step only where host noise is sampled per op (eager launches)
                    step = setup.build(shape) if plan.graph_mode == "none" else None
                    band = host_band(step, costs, graph, sc.replicates, sc.seed, plan=plan)
                    row.update({"step_ms_p10": band["p10"], "step_ms_p90": band["p90"]})
                rows.append(row)
                advance()
    return rows


def run_step_scenario(sc: StepScenario, out: Path | None) -> dict:
    from simulator.config.stepopts import build_setup
    from simulator.model.parallel import tp_fields

    base = build_setup(sc, sc.model, sc.profile, sc.fusion[0])
    model, costs = base.model, base.costs
    prof = costs.profile
    from simulator.report.progress import task

    with task(f"{sc.name}: step grid", total=len(sc.fusion) * len(sc.graph) * len(sc.batch)) as advance:
        rows = _grid(sc, base, advance)
    tl_spec = sc.timeline
    from simulator.engine.predict import predict_setup
    from simulator.engine.setup import Capture

    tl = predict_setup(base.with_fusion(tl_spec.fusion).with_capture(Capture(tl_spec.graph)),
                       decode(tl_spec.batch, sc.ctx), "des").timeline
    # the scenario's implementation (impl hf: its levels none / compiled and its cache), not always the reference's
    kpl = {f: base.with_fusion(f).kernels_per_layer() for f in base.fusion_levels}
    result = {
        "scenario": sc.model_dump(mode="json"),
        "profile": {"name": prof.name, "source": prof.source, "date": prof.date},
        "model": model.__dict__,
        **tp_fields(model, prof),
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


def toy_plan(case, fusion: bool, graph: bool, batch: int) -> LaunchPlan:
    """The seed toy (s13_cuda_graphs.py) as a launch plan. Eager: one launch of `launch_us` per kernel; fusion:
    each layer launches `fused_per_layer` kernels sharing the layer's GPU time (times `fused_gpu_scale`); graph:
    one replay of `graph_launch_us` submits every kernel of the step. Kernel time grows with the batch by
    `kernel_us_per_seq` per extra sequence."""
    k_layer = case.fused_per_layer if fusion else case.kernels_per_layer
    layer_gpu = case.kernels_per_layer * case.kernel_s_at(batch) * (case.fused_gpu_scale if fusion else 1.0)
    n = case.layers * k_layer
    if graph:
        g_us = case.launch_us if case.graph_launch_us is None else case.graph_launch_us
        host, per_launch, labels = np.array([g_us * 1e-6]), np.array([n], dtype=np.int64), ["graph replay"]
    else:
        host, per_launch = np.full(n, case.launch_us * 1e-6), np.ones(n, dtype=np.int64)
        labels = [f"launch {i}" for i in range(n)]
    names = ([k.name for k in case.fusion_table] if fusion and case.fusion_table else
             [f"kernel {i}" for i in range(k_layer)])
    return LaunchPlan(
        host_s=host, kernels_per_launch=per_launch, gpu_s=np.full(n, layer_gpu / k_layer),
        gap_s=np.full(n, case.gap_us * 1e-6), queue_depth=case.queue_depth, launch_labels=labels,
        kernel_names=[f"L{i // k_layer} {names[i % k_layer]}" for i in range(n)], host_calls=len(host),
        graph_mode="full" if graph else "none")


def _toggles(fusion: bool, graph: bool) -> str:
    return {(False, False): "unoptimised", (True, False): "fusion", (False, True): "graph",
            (True, True): "fusion + graph"}[(fusion, graph)]


def run_toy_scenario(sc: ToyScenario, out: Path | None) -> dict:
    """Rows: case x fusion x graph x batch (in that order), each with its speedup over the same case and batch
    with both toggles off (simulated even when the grid leaves it out). A row's `fusion` is the toggle (true or
    false), its `graph` the plan's graph mode (none, or full: one replay per step)."""
    rows, first_tl = [], None
    fusions, graphs, batches = list(dict.fromkeys(sc.fusion)), list(dict.fromkeys(sc.graph)), list(dict.fromkeys(sc.batch))
    for case in sc.cases:
        base: dict[int, float] = {}
        for fusion in fusions:
            for graph in graphs:
                for b in batches:
                    tl = run_engine(toy_plan(case, fusion, graph, b), sc.engine)
                    d = summarize(tl).as_dict()
                    if not fusion and not graph:
                        base[b] = d["step_ms"]
                    elif b not in base:
                        base[b] = summarize(run_engine(toy_plan(case, False, False, b), sc.engine)).step_s * 1e3
                    first_tl = first_tl or tl
                    k_layer = case.fused_per_layer if fusion else case.kernels_per_layer
                    rows.append({"case": case.label, "fusion": fusion, "toggles": _toggles(fusion, graph),
                                 "batch": b, "layers": case.layers, "kernels_per_layer": k_layer,
                                 "launch_us": case.launch_us, "kernel_us": d["gpu_ms"] * 1e3 / (case.layers * k_layer),
                                 **d, "gpu_utilization": d["gpu_ms"] / d["step_ms"] if d["step_ms"] > 0 else 0.0,
                                 "speedup_vs_unoptimised": base[b] / d["step_ms"] if d["step_ms"] > 0 else 1.0})
    cols = ["case", "launches", "cpu_ms", "gpu_ms", "step_ms", "gpu_utilization", "bound"]
    if len(fusions) * len(graphs) * len(batches) > 1:
        cols = ["case", "toggles", "batch", "launches", "cpu_ms", "gpu_ms", "step_ms", "gpu_utilization", "bound",
                "speedup_vs_unoptimised"]
    tables = [{"case": c.label, "fused_kernel": k.name, "replaces": ", ".join(k.replaces), "kernels": len(k.replaces)}
              for c in sc.cases if c.fusion_table for k in c.fusion_table]
    result = {"scenario": sc.model_dump(mode="json"), "rows": rows, "summary_columns": cols}
    if tables:
        result["fusion_tables"] = tables
    if out is not None:
        write_json(out / "result.json", result)
        figs = [charts.timeline_figure(first_tl, sc.timeline_launches, f"{rows[0]['case']}, {rows[0]['toggles']}, "
                                       f"batch {rows[0]['batch']}: first {sc.timeline_launches} launches")]
        if len(batches) > 1:
            series: dict[str, tuple[list, list]] = {}
            for r in rows:
                xs, ys = series.setdefault(f"{r['case']}: {r['toggles']}", ([], []))
                xs.append(r["batch"])
                ys.append(r["step_ms"])
            figs.append(charts.lines_figure(series, "Step time across batch sizes (launch-bound while the step "
                                            "time stays flat)", "batch", "ms", log_x=True))
        extra = []
        for c in sc.cases:
            if c.fusion_table:
                extra.append(table_html([{k: v for k, v in t.items() if k != "case"} for t in tables
                                         if t["case"] == c.label],
                                        f"{c.label}: fusion table, {c.kernels_per_layer} -> {len(c.fusion_table)} "
                                        f"kernels per layer"))
        write_html(out / "report.html", f"launchsim: {sc.name}", figs,
                   [table_html(rows, "Cases (times in ms; speedup: step time with both toggles off / this)")] + extra,
                   intro=sc.description)
    return result
