"""Trace commands: `import-trace` (torch.profiler trace -> workload file) and `export-trace` (a simulated step ->
Chrome trace for Perfetto). Their flags are generated from the import_trace and export_trace scenario kinds
(config/trace_files.py); the studies are studies/trace.py; this module fills the scenarios and prints
(`predict --workload` is cli/workload.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from . import app
from simulator.common.errors import UserError
from .tables import console, print_rows, say

STEP_COLUMNS = ["step", "label", "kernels", "host_ms", "gpu_ms", "step_ms", "sync_ms"]


def _import_trace(given: dict, flags: dict) -> None:
    """Import a torch.profiler trace as a workload; print per-step figures (kernels, host, GPU, step time)."""
    from simulator.config.trace_files import ImportTraceScenario
    from simulator.studies.trace import run_import_trace
    from .flags import run_with_flags

    d = run_with_flags(ImportTraceScenario, "import_trace", given, flags, run_import_trace, check=False,
                       free={"steps": "--steps", "host_time": "--host-time"})
    _print_import(d)


def _print_import(d: dict) -> None:
    """The import's figures: its steps (a table), the representative step, host time, launches by op, sizes."""
    print_rows(d["step_rows"], f"{d['trace_name']}: {d['steps']} step(s), {d['method']}", STEP_COLUMNS)
    say(f"representative step: {d['representative']}; {d['kernels']} kernels ("
        f"{', '.join(f'{c} {n}' for c, n in d['op_classes'].items())}); traced host {d['traced_host_ms']:.3f} ms, "
        f"GPU {d['traced_gpu_ms']:.3f} ms")
    ch = d["charged_host_ms"]
    parts = ", ".join(f"{k} {v:.3f}" for k, v in ch.items() if k != "total")
    say(f"host time policy: {d['host_time_policy']}; charged host {ch['total']:.3f} ms ({parts}) vs traced "
        f"{d['traced_host_ms']:.3f} ms")
    hist, top = d["launches_by_op"], d["top_ops"]
    if hist:
        shown = hist[:top] if top > 0 else hist
        say(f"launches by aten op, per step ({sum(r['calls'] for r in hist):g} top-level calls that launched kernels; "
            f"{len(shown)} of {len(hist)} ops shown): "
            + ", ".join(f"{r['op'].removeprefix('aten::')} {r['calls']:g}" for r in shown))
    size = (f"batch {d['batch']}, tokens/seq {d['q_len'] or '?'}, ctx {d['ctx'] or '?'}" if d["batch"]
            else "batch unknown (no shapes recorded: give --batch to enable batch what-ifs)")
    model = "" if d["model"] is None else (f"; model {d['model']} sizes the rest" if d["shaped_kernels"] < d["kernels"]
                                           else f"; model {d['model']} kept")
    say(f"{size}; {d['shaped_kernels']} of {d['kernels']} kernels have recorded shapes{model}")
    say(d["readiness"])
    if d["outside_kernels"]:
        console.print(f"{d['outside_kernels']} kernels lie outside every step (partial steps) and were left out")
    console.print(f"wrote {d['out']}")


def _export_trace(given: dict, flags: dict) -> None:
    """Simulate one step and write it as a Chrome trace: a CPU launch lane and a GPU stream lane."""
    from simulator.config.trace_files import ExportTraceScenario
    from simulator.studies.trace import run_export_trace
    from .flags import run_with_flags

    if (given["model"] is None) == (given["workload"] is None):
        raise UserError("give exactly one of --model or --workload")
    d = run_with_flags(ExportTraceScenario, "export_trace", given, flags, run_export_trace, check=False)
    say(f"wrote {d['out']}: {d['launches']} launches, {d['kernels']} kernels, step {d['step_ms']:.3f} ms "
        f"({d['source']}, fusion {d['fusion']}, graph {d['graph']}); open it in https://ui.perfetto.dev")


def _steps(text: Optional[str]):
    """--steps as given: 'auto' or a positive count (the import_trace kind's field), refused naming the flag."""
    from simulator.traces.steps import parse_steps
    from .checks import as_flags

    with as_flags({"steps": "--steps"}):
        return parse_steps(text)


def _register() -> None:
    from simulator.config.trace_files import ExportTraceScenario, ImportTraceScenario
    from .generated import Flag, command

    def path(name: str, **kw) -> Flag:  # typer reads a path (`<path>`, '' is '.'); the field holds its text
        return Flag(name, annotation=Path if kw.get("required") else Optional[Path], convert=str, **kw)

    app.command(name="import-trace")(command(_import_trace, ImportTraceScenario, [], flags=[
        path("trace", argument=True, required=True), path("out", required=True),
        Flag("steps", annotation=Optional[str], convert=_steps),
        Flag("model", help="model preset or config.json the trace ran: its shapes size kernels the trace recorded "
                           "none for, so `predict --workload --batch/--ctx` can re-price them")]))
    app.command(name="export-trace")(command(_export_trace, ExportTraceScenario, [], flags=[
        path("out", required=True), path("workload")]))


_register()
