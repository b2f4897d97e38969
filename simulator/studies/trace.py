"""Runs `workload` scenarios: an imported workload over graph modes, fusion what-ifs and batches."""

from __future__ import annotations

from pathlib import Path

from simulator.report import charts
from simulator.config.trace_workload import WorkloadScenario
from simulator.model.profile import load_profile
from simulator.report.html import table_html, write_html
from simulator.common.jsonfile import write_json
from simulator.traces.predict import predict_workload, result_dict
from simulator.model.workload_file import load_workload

COLUMNS = ["fusion", "graph", "batch", "step_ms", "cpu_ms", "gpu_ms", "kernels", "launches", "bound",
           "unscaled_kernels"]


def run_workload_scenario(sc: WorkloadScenario, out: Path | None) -> dict:
    wl = load_workload(sc.workload)
    prof = load_profile(sc.profile)
    rows, first, details = [], None, {}
    for fusion in sc.fusion:
        for graph in sc.graph:
            for b in sc.batch or [None]:
                p, wi, _ = predict_workload(wl, b, sc.ctx, fusion, graph, prof, sc.engine)
                d = result_dict(p, wi, wl, b, sc.ctx, fusion)
                for k in ("unscaled", "fusion_rule", "fusion_groups", "notes"):
                    if k in d:
                        details.setdefault(f"{fusion}/batch={d['batch']}", {})[k] = d.pop(k)
                rows.append(d)
                first = first or (p, d)
    result = {
        "scenario": sc.model_dump(mode="json"),
        "profile": {"name": prof.name, "source": prof.source, "date": prof.date},
        "workload": {"name": wl.name, "source": wl.source, "batch": wl.batch, "ctx": wl.ctx,
                     "kernels": len(wl.kernels), "traced_host_ms": wl.host_ms, "traced_gpu_ms": wl.gpu_ms,
                     "steps": wl.steps.model_dump()},
        "rows": rows,
        "details": details,
        "summary": rows,
        "summary_columns": COLUMNS,
    }
    if out is not None:
        write_json(out / "result.json", result)
        p, d = first
        fig = charts.timeline_figure(p.timeline, sc.timeline_launches,
                                     f"{wl.name}: {d['fusion']}, graph {d['graph']}, batch {d['batch']}: first "
                                     f"{sc.timeline_launches} launches")
        write_html(out / "report.html", f"launchsim: {sc.name}", [fig],
                   [table_html([{k: r.get(k) for k in ["workload"] + COLUMNS} for r in rows],
                               "Imported workload (times in ms)")],
                   intro=f"{sc.description} Workload {wl.name} ({len(wl.kernels)} kernels, {wl.steps.method}). "
                         f"Profile: {prof.name} ({prof.source}, {prof.date}).")
    return result
