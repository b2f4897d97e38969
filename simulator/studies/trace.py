"""Runs the trace kinds: `workload` (an imported workload over graph modes, fusion what-ifs and batches; one point
of it is what `launchsim predict --workload` prints), `import_trace` (a torch.profiler trace -> a workload file:
`launchsim import-trace`) and `export_trace` (one simulated step -> a Chrome trace: `launchsim export-trace`).
Each returns the record its command prints; the CLI only fills the scenario and prints. Inputs are loaded here,
an error naming the field that named the input (`field 'profile': ...`)."""

from __future__ import annotations

from pathlib import Path

from simulator.common.errors import UserError
from simulator.config.trace_files import ExportTraceScenario, ImportTraceScenario
from simulator.config.trace_workload import WorkloadScenario

COLUMNS = ["fusion", "graph", "batch", "step_ms", "cpu_ms", "gpu_ms", "kernels", "launches", "bound",
           "unscaled_kernels"]


def _field(name: str, load, *args):
    """`load(*args)`; its UserError as one naming field `name` (the command names the flag that filled it)."""
    try:
        return load(*args)
    except UserError as e:
        raise UserError(f"field '{name}': {e}") from None


def run_workload_scenario(sc: WorkloadScenario, out: Path | None) -> dict:
    from simulator.common.jsonfile import write_json
    from simulator.model.profile import load_profile
    from simulator.model.workload_file import load_workload
    from simulator.traces.predict import predict_workload, result_dict

    wl = load_workload(sc.workload)
    prof = load_profile(sc.profile)
    rows, first, details = [], None, {}
    for fusion in sc.fusion:
        for graph in sc.graph:
            for b in sc.batch or [None]:
                p, wi, _ = predict_workload(wl, b, sc.ctx, fusion, graph, prof, sc.engine, sc.replicates, sc.seed)
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
        from simulator.report import charts
        from simulator.report.html import table_html, write_html

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


def run_predict_workload(sc: WorkloadScenario) -> dict:
    """The scenario's first point (fusion, graph, batch): {"record": the prediction (what `--json` prints, with the
    what-if details, the profile's host canary and, eager and unfused, the step across the calibration VM's host
    states), "profile": its name, "canary_us": [fast, slow] or None, "fusion_kernels": [before, after] or None}."""
    from simulator.config.refs import load_profile_field
    from simulator.model.workload_file import load_workload
    from simulator.traces.predict import host_state_band, predict_workload, result_dict

    wl = _field("workload", load_workload, sc.workload)
    prof = _field("profile", load_profile_field, sc.profile)
    fusion, graph, batch = sc.fusion[0], sc.graph[0], (sc.batch or [None])[0]
    p, wi, wl = predict_workload(wl, batch, sc.ctx, fusion, graph, prof, sc.engine, sc.replicates, sc.seed)
    d = result_dict(p, wi, wl, batch, sc.ctx, fusion, prof)
    if graph == "none" and fusion == "none":
        band = host_state_band(wl, batch, sc.ctx, fusion, graph, prof)
        if band is not None:
            d["step_ms_host_band"] = [round(band[0], 4), round(band[1], 4)]
    c = prof.host.canary
    return {"record": d, "profile": prof.name, "canary_us": None if c is None else [c.fast_us, c.slow_us],
            "fusion_kernels": [wi.fusion["kernels_before"], wi.fusion["kernels_after"]] if wi.fusion else None}


def run_import_trace(sc: ImportTraceScenario, out: Path | None = None) -> dict:
    """Import the trace, write the workload file (`sc.out`) and return what the import found: its steps, the
    representative step's kernels and host time under the policy, the launches by aten op, the recorded sizes and
    whether the workload can be re-priced at other sizes."""
    from collections import Counter

    from simulator.config.refs import load_profile_field, out_file, read_files
    from simulator.model.costs import CostModel
    from simulator.model.models import load_model
    from simulator.model.workload_file import save_workload
    from simulator.traces.host import describe
    from simulator.traces.importer import op_histogram
    from simulator.traces.retarget import readiness
    from simulator.traces.workload import workload_from_trace

    _field("out", out_file(sc.out, read_files(sc)))
    prof = _field("profile", load_profile_field, sc.profile)
    spec = None if sc.model is None else _field("model", load_model, sc.model)
    wl, imp = workload_from_trace(sc.trace, sc.steps, sc.batch, sc.host_time, prof, spec, sc.ctx)
    classes = Counter(k.op_class for k in wl.kernels)
    rec = {"trace_name": Path(sc.trace).name, "steps": len(imp.step_rows), "method": imp.method,
           "representative": wl.steps.representative, "kernels": len(wl.kernels),
           "traced_host_ms": wl.host_ms, "traced_gpu_ms": wl.gpu_ms, "charged_host_ms": wl.host_time["charged_host_ms"],
           "host_time": sc.host_time, "batch": wl.batch, "q_len": wl.q_len, "ctx": wl.ctx,
           "shaped_kernels": sum(1 for k in wl.kernels if k.dims), "model": wl.model["name"] if wl.model else None,
           "outside_kernels": imp.outside, "top_ops": sc.top_ops, "trace": str(Path(sc.trace)), "out": str(Path(sc.out)),
           "host_time_policy": describe(sc.host_time, prof), "readiness": readiness(wl, CostModel(prof)),
           "op_classes": {f"{c}": n for c, n in classes.most_common()}, "step_rows": imp.step_rows,
           "launches_by_op": op_histogram(imp)}
    save_workload(sc.out, wl)
    _write(out, sc, rec)
    return rec


def run_export_trace(sc: ExportTraceScenario, out: Path | None = None) -> dict:
    """Simulate the step (a model's, or an imported workload's) and write it as a Chrome trace (`sc.out`); return
    its figures and what it shows."""
    from simulator.config.refs import load_profile_field, out_file, read_files, spec_ctx_fits
    from simulator.traces.export import write_chrome_trace

    _field("out", out_file(sc.out, read_files(sc)))
    prof = _field("profile", load_profile_field, sc.profile)
    if sc.workload is not None:
        from simulator.model.workload_file import load_workload
        from simulator.traces.predict import predict_workload

        wl0 = _field("workload", load_workload, sc.workload)
        p, _, wl = predict_workload(wl0, sc.batch, sc.ctx, sc.fusion, sc.graph, prof)
        what = f"workload {wl.name}"
    else:
        from simulator.engine.predict import predict
        from simulator.model.models import load_model

        m = _field("model", load_model, sc.model)  # resolved once: a config.json is read once
        _field("ctx", spec_ctx_fits, m, sc.model, sc.ctx or 1024)
        p = predict(m, sc.batch or 1, sc.ctx or 1024, sc.fusion, sc.graph, prof)
        what = f"model {sc.model}"
    info = {"source": what, "batch": sc.batch, "ctx": sc.ctx, "fusion": sc.fusion, "graph": sc.graph,
            "profile": prof.name, **p.as_dict()}
    write_chrome_trace(sc.out, p.timeline, p.step, info, prof.device.gpu)
    rec = {**info, "graph": sc.graph, "graph_mode": info["graph"], "out": str(Path(sc.out))}
    _write(out, sc, rec)
    return rec


def _write(out: Path | None, sc, d: dict) -> None:
    from simulator.studies.record import write_record

    write_record(out, sc, d, "result", sc.kind)


def run_import_trace_scenario(sc: ImportTraceScenario, out: Path | None) -> dict:
    from simulator.studies.record import as_result

    return as_result(run_import_trace(sc, out), "result")


def run_export_trace_scenario(sc: ExportTraceScenario, out: Path | None) -> dict:
    from simulator.studies.record import as_result

    return as_result(run_export_trace(sc, out), "result")
