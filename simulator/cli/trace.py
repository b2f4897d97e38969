"""Trace commands: `import-trace` (torch.profiler trace -> workload file) and `export-trace`
(a simulated step -> Chrome trace for Perfetto)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from . import app, choices
from simulator.common import vocab as V
from .tables import console, print_rows
from simulator.common.errors import UserError
from simulator.common.jsonfile import dumps


@app.command("import-trace")
def import_trace_cmd(
    trace: Path = typer.Argument(..., help="Chrome trace from torch.profiler's export_chrome_trace (.json or .json.gz)"),
    out: Path = typer.Option(..., "--out", help="workload file to write (JSON)"),
    steps: str = typer.Option("auto", "--steps", help="auto (markers, annotations, repetition) or N equal steps"),
    batch: Optional[int] = typer.Option(None, "--batch", help="batch size the trace was recorded at "
                                        "(default: read from recorded shapes)"),
    host_time: V.HostTime = choices.option(V.HostTime, V.HostTime.CALIBRATED, "--host-time", help="host-time "
                                           "policy: calibrated (profile's launch paths + host-only ops + traced "
                                           "interpreter gaps), trace (traced host durations, inflated by the "
                                           "profiler) or deflate (traced / the profile's "
                                           "host.profiler_overhead.factor: refused unless the profile has one; "
                                           "no shipped profile does)", what="--host-time"),
    profile: Optional[str] = typer.Option(None, "--profile", help="profile name or path (default h200)"),
    top_ops: int = typer.Option(10, "--top-ops", help="how many aten ops the launch histogram lists (0: all)"),
    model: Optional[str] = typer.Option(None, "--model", help="model preset or config.json the trace ran: its "
                                        "shapes size kernels the trace recorded none for, so `predict --workload "
                                        "--batch/--ctx` can re-price them"),
    ctx: Optional[int] = typer.Option(None, "--ctx", help="context (attended KV length) the trace was recorded at "
                                      "(default: read from recorded attention shapes)"),
) -> None:
    """Import a torch.profiler trace as a workload; print per-step figures (kernels, host, GPU, step time)."""
    from simulator.traces.host import check_policy, describe
    from simulator.traces.workload import workload_from_trace
    from simulator.model.workload_file import save_workload

    from simulator.common import limits as L
    from simulator.common.outpaths import check_out_file
    from .checks import count, profile_flag

    count("--batch", batch, L.MAX_BATCH)
    count("--ctx", ctx, L.MAX_CTX)
    if top_ops < 0:
        raise UserError(f"--top-ops must be 0 (all) or a positive number, got {top_ops}")
    host_time = host_time.value
    check_policy(host_time)
    check_out_file(out, "--out")
    prof = profile_flag("--profile", profile)
    spec = None
    if model is not None:
        from .checks import model_flag

        spec = model_flag("--model", model)
    from .checks import as_flags

    with as_flags({"steps": "--steps", "host_time": "--host-time"}):
        wl, imp = workload_from_trace(trace, steps, batch, host_time, prof, spec, ctx)
    cols = ["step", "label", "kernels", "host_ms", "gpu_ms", "step_ms", "sync_ms"]
    print_rows(imp.step_rows, f"{trace.name}: {len(imp.step_rows)} step(s), {imp.method}", cols)
    classes = Counter(k.op_class for k in wl.kernels)
    console.print(f"representative step: {wl.steps.representative}; {len(wl.kernels)} kernels "
                  f"({', '.join(f'{c} {n}' for c, n in classes.most_common())}); traced host {wl.host_ms:.3f} ms, "
                  f"GPU {wl.gpu_ms:.3f} ms", soft_wrap=True)
    ch = wl.host_time["charged_host_ms"]
    parts = ", ".join(f"{k} {v:.3f}" for k, v in ch.items() if k != "total")
    console.print(f"host time policy: {describe(host_time, prof)}; charged host {ch['total']:.3f} ms ({parts}) "
                  f"vs traced {wl.host_ms:.3f} ms", soft_wrap=True)
    from simulator.traces.importer import op_histogram

    hist = op_histogram(imp)
    if hist:
        shown = hist[:top_ops] if top_ops > 0 else hist
        total = sum(r["calls"] for r in hist)
        console.print(f"launches by aten op, per step ({total:g} top-level calls that launched kernels; "
                      f"{len(shown)} of {len(hist)} ops shown): "
                      + ", ".join(f"{r['op'].removeprefix('aten::')} {r['calls']:g}" for r in shown), soft_wrap=True)
    shaped = sum(1 for k in wl.kernels if k.dims)
    size = (f"batch {wl.batch}, tokens/seq {wl.q_len or '?'}, ctx {wl.ctx or '?'}" if wl.batch
            else "batch unknown (no shapes recorded: give --batch to enable batch what-ifs)")
    console.print(f"{size}; {shaped} of {len(wl.kernels)} kernels have recorded shapes"
                  + (f"; model {wl.model['name']} sizes the rest" if wl.model and shaped < len(wl.kernels) else
                     f"; model {wl.model['name']} kept" if wl.model else ""), soft_wrap=True)
    from simulator.model.costs import CostModel
    from simulator.traces.retarget import readiness

    console.print(readiness(wl, CostModel(prof)), soft_wrap=True)
    if imp.outside:
        console.print(f"{imp.outside} kernels lie outside every step (partial steps) and were left out")
    save_workload(out, wl)
    console.print(f"wrote {out}")


@app.command("export-trace")
def export_trace_cmd(
    out: Path = typer.Option(..., "--out", help="Chrome trace to write (JSON, opens in Perfetto)"),
    model: Optional[str] = typer.Option(None, "--model", help="model preset or config.json path"),
    workload: Optional[Path] = typer.Option(None, "--workload", help="imported workload file instead of a model"),
    batch: Optional[int] = typer.Option(None, "--batch", help="decode batch size (default 1, or the workload's)"),
    ctx: Optional[int] = typer.Option(None, "--ctx", help="context length (default 1024, or the workload's)"),
    fusion: V.Fusion = choices.option(V.Fusion, V.Fusion.NONE, "--fusion", help="fusion level (workload: none or "
                                      "compiled)", what="fusion level"),
    graph: V.GraphMode = choices.option(V.GraphMode, V.GraphMode.NONE, "--graph", help="CUDA-graph mode",
                                        what="graph mode"),
    profile: Optional[str] = typer.Option(None, "--profile", help="profile name or path (default h200)"),
) -> None:
    """Simulate one step and write it as a Chrome trace: a CPU launch lane and a GPU stream lane."""
    from simulator.traces.export import write_chrome_trace

    from simulator.common import limits as L
    from simulator.common.outpaths import check_out_file
    from .checks import count, model_flag, named, profile_flag, workload_fusion

    if (model is None) == (workload is None):
        raise UserError("give exactly one of --model or --workload")
    count("--batch", batch, L.MAX_BATCH)
    count("--ctx", ctx, L.MAX_CTX)
    if workload is not None:
        workload_fusion(fusion)
    fusion, graph = fusion.value, graph.value
    check_out_file(out, "--out")
    profile_flag("--profile", profile)
    if model is not None:
        m = model_flag("--model", model)
        with named("--ctx"):
            from .checks import ctx_fits

            ctx_fits(m, ctx or 1024)
    if workload is not None:
        from simulator.traces.predict import predict_workload

        with named("--workload"):
            from simulator.model.workload_file import load_workload

            wl0 = load_workload(workload)
        p, _, wl = predict_workload(wl0, batch, ctx, fusion, graph, profile)
        what = f"workload {wl.name}"
    else:
        from simulator.engine.predict import predict

        p = predict(model, batch or 1, ctx or 1024, fusion, graph, profile)
        what = f"model {model}"
    from simulator.model.profile import load_profile

    prof = load_profile(profile)
    info = {"source": what, "batch": batch, "ctx": ctx, "fusion": fusion, "graph": graph, "profile": prof.name,
            **p.as_dict()}
    write_chrome_trace(out, p.timeline, p.step, info, prof.device.gpu)
    r = p.result
    console.print(f"wrote {out}: {r.launches} launches, {r.kernels} kernels, step {r.step_s * 1e3:.3f} ms "
                  f"({what}, fusion {fusion}, graph {graph}); open it in https://ui.perfetto.dev", soft_wrap=True)


def predict_workload_cmd(model, workload, batch, ctx, fusion, graph, profile, engine, replicates, seed,
                         prefill_seqs, as_json) -> None:
    """`launchsim predict --workload W`: the imported step under graph / fusion / batch what-ifs."""

    from simulator.traces.predict import predict_workload, result_dict

    if model is not None and workload is not None:
        raise UserError("give either --model or --workload, not both")
    if workload is None:
        raise UserError("give --model (a preset or config.json) or --workload (an imported trace)")
    if prefill_seqs:
        raise UserError("--prefill-seqs applies to model presets, not to an imported workload")
    if replicates < 0:
        raise UserError(f"--replicates must be >= 0, got {replicates}")
    from .checks import named, profile_flag

    with named("--workload"):
        from simulator.model.workload_file import load_workload

        wl0 = load_workload(workload)
    prof = profile_flag("--profile", profile)
    from .checks import as_flags

    with as_flags({"batch": "--batch", "ctx": "--ctx"}):
        p, wi, wl = predict_workload(wl0, batch, ctx, fusion, graph, prof, engine, replicates, seed)
    d = result_dict(p, wi, wl, batch, ctx, fusion, prof)
    if graph == "none" and fusion == "none":
        from simulator.traces.predict import host_state_band

        band = host_state_band(wl, batch, ctx, fusion, graph, prof)
        if band is not None:
            d["step_ms_host_band"] = [round(band[0], 4), round(band[1], 4)]
    if as_json:
        print(dumps(d))
        return
    cols = ["workload", "batch", "ctx", "fusion", "graph", "step_ms", "cpu_ms", "gpu_ms", "gpu_idle_frac", "kernels",
            "launches", "bound", "host_time_policy", "traced_host_ms", "traced_gpu_ms"]
    t = Table(title="prediction (imported workload)", show_header=False)
    for c in cols:
        v = d.get(c)
        t.add_row(c, f"{v:.4g}" if isinstance(v, float) else str(v))
    console.print(t)
    if wi.fusion:
        f = wi.fusion
        console.print(f"fusion rule: {f['rule']}", soft_wrap=True)
        console.print(f"kernels {f['kernels_before']} -> {f['kernels_after']} ({f['saved']} saved)")
        rows = [{**g, "pattern": _short(g["pattern"])} for g in f["groups"]]
        print_rows(rows, "merged runs (by pattern)", ["count", "members", "saved", "gpu_us_before", "gpu_us_after",
                                                      "pattern"], limit=15)
    if wi.roles:
        roles = ", ".join(f"{k} {v}" for k, v in sorted(wi.roles.items()) if v)
        console.print(f"re-priced from the traced batch {wl.batch}, ctx {wl.ctx or '?'}: {wi.scaled} kernels through "
                      f"the profile's cost model as traced x model(new)/model(traced) (by role: {roles})",
                      soft_wrap=True)
        for n in wi.notes[1:]:
            console.print(n, soft_wrap=True)
    if d.get("step_ms_host_band") is not None:
        lo, hi = d["step_ms_host_band"]
        fast, slow = prof.host.canary.fast_us, prof.host.canary.slow_us
        console.print(f"eager step across the calibration VM's host states: {lo:.3f} ms (fast, canary {fast:.2f} µs) "
                      f"to {hi:.3f} ms (slow, canary {slow:.2f} µs)", soft_wrap=True)
    if d.get("host_canary_us") is not None:
        console.print(f"host state assumed: tiny-op canary {d['host_canary_us']:.2f} µs (profile {prof.name})",
                      soft_wrap=True)


def _short(pattern: str, width: int = 48) -> str:
    p = pattern.replace("aten::", "")
    return p if len(p) <= width else p[: width - 1] + "…"
