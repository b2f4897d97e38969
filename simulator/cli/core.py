"""Core commands: `run` a scenario file, `predict` one step, print the scenario `schema`.

typer is imported by `register` (called by simulator/cli when the command table is built), not at the top:
cli/fast.py runs a plain `predict` through `predict_parts` and this module's bodies without it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

from simulator.common import vocab as V
from simulator.common.errors import UserError
from simulator.common.jsonfile import dumps

# cli/tables.py (the text output) is imported by the functions that print text: `predict --json` never loads it

PREDICT_FIELDS = ["model", "workload", "batch", "ctx", "prefill_seqs", "prefill_len", "tokens", "fusion", "graph",
                  "engine", "step_ms", "step_ms_p10", "step_ms_p50", "step_ms_p90", "cpu_ms", "gpu_ms", "bound",
                  "kernels", "launches", "host_calls", "gpu_idle_frac", "gpu_bubble_ms", "gpu_gap_ms", "cpu_stall_ms"]


def print_prediction(d: dict, title: str = "prediction") -> None:
    """Every headline field of a prediction, one per line, then the rest (same keys as --json)."""
    from .tables import print_record, say

    keys = [k for k in PREDICT_FIELDS if k in d] + [k for k, v in d.items() if k not in PREDICT_FIELDS
                                                     and not isinstance(v, (list, dict))]
    print_record(d, title, keys)
    if "step_ms_p10" in d:
        say(f"step time {d['step_ms']:.4g} ms, host-noise band p10-p90 {d['step_ms_p10']:.4g}-{d['step_ms_p90']:.4g} "
            f"ms; {d.get('bound', '?')}-bound; {d.get('kernels')} kernels from {d.get('launches')} launches "
            f"(graph {d.get('graph')})")
    else:
        say(f"step time {d['step_ms']:.4g} ms; {d.get('bound', '?')}-bound; {d.get('kernels')} kernels from "
            f"{d.get('launches')} launches (graph {d.get('graph')}); --replicates N adds a p10-p90 band")


def _predict(given: dict, flags: dict, workload: Optional[Path] = None, as_json: bool = False) -> None:
    """Predict one decode (or mixed decode + prefill) step: step time, CPU/GPU split, kernels, launches.
    With --steps N: the steady-state step of the engine loop (step_ms), its host work per step and which lane
    bounds it (cpu: the forward's launches, gpu, or engine: the engine's own host work). Every option but
    --workload and --json is a field of the `predict` scenario kind (`launchsim schema`)."""
    if workload is not None or given.get("model") is None:
        from .workload import predict_workload_cmd

        return predict_workload_cmd(given, workload, as_json)
    from simulator.config.predict import PredictScenario
    from simulator.studies.predict import run_predict
    from .flags import run_with_flags

    d = run_with_flags(PredictScenario, "predict", given, flags, run_predict)
    if as_json:
        print(dumps(d))
    else:
        from .tables import say

        derived = given.get("impl") if given.get("fusion") is None else None
        say(V.defaults_note(d.get("fusion") or V.DEFAULT_FUSION, given.get("graph") or V.DEFAULT_GRAPH, derived))
        print_prediction(d)


def predict_parts():
    """`predict`'s function and options (cli/generated.command_parts): what typer registers and cli/fast.py runs."""
    from simulator.config.predict import PredictScenario
    from .generated import command_parts, extra_option

    extra = [extra_option("workload", Optional[Path], None, "--workload",
                          help="imported workload (launchsim import-trace) instead of --model"),
             extra_option("as_json", bool, False, "--json", help="print one JSON object")]
    return command_parts(_predict, PredictScenario, extra, aliases={"tensor_parallel_size": ("--tp",)})


def register(app) -> None:
    """Add `run`, `predict` and `schema` to the typer app (in this order: the help lists them so)."""
    import typer

    from . import choices
    from .generated import signed

    @app.command()
    def run(
        scenario: Path = typer.Argument(..., help="scenario YAML file"),
        out: Path = typer.Option(Path("out"), "--out", help="output folder for result.json and report.html"),
        inline_plotly: bool = typer.Option(False, "--inline-plotly", help="inline plotly.js into report.html (one "
                                           "self-contained file) instead of writing plotly.min.js beside it"),
        rows_shown: int = typer.Option(100, "--rows", help="summary rows to print (0: all); result.json has every row"),
        overrides: Optional[list[str]] = typer.Option(None, "--set", help="override a scenario field, FIELD=VALUE "
                                                      "(dotted path, YAML value), e.g. --set replicates=2; repeatable"),
        scheduling: Optional[V.Scheduling] = choices.option(V.Scheduling, None, "--scheduling", help="serve/capacity "
                                                            "scenarios: the engine's host work per step (overrides the "
                                                            "file's)", what="scheduling", field="scheduling"),
    ) -> None:
        """Validate and run a scenario; print a summary, write DIR/result.json and DIR/report.html."""
        from simulator.common.outpaths import check_out_dir, out_lock
        from ..config import load_scenario  # pydantic scenario models: only when a scenario file is loaded
        from simulator.studies.runner import run_scenario

        if rows_shown < 0:  # checked before the run, not after it
            raise UserError(f"--rows must be >= 0, got {rows_shown}")
        try:
            sc = load_scenario(scenario, overrides=overrides)
        except UserError as e:  # the config layer names an override; the command line calls it --set
            msg = str(e)
            if msg.startswith("override "):
                raise UserError("--set " + msg.removeprefix("override ")) from None
            raise
        if scheduling is not None:
            if "scheduling" not in type(sc).model_fields:
                raise UserError(f"--scheduling applies to serve and capacity scenarios, not kind '{sc.kind}'")
            sc = sc.model_copy(update={"scheduling": scheduling.value})
        check_out_dir(out, "--out")
        t0 = time.perf_counter()
        try:
            from simulator.report.html import plotly_inline

            with out_lock(out, "--out"), plotly_inline(inline_plotly):
                result = run_scenario(sc, out)
        except UserError as e:  # found only while running: still name the scenario file (and the field's line)
            from ..config.scenario import run_error

            msg = str(run_error(e, scenario, overrides))
            raise UserError("--set " + msg.removeprefix("override ") if msg.startswith("override ") else msg) from None
        from .tables import print_rows, say

        rows = result.get("summary") or result.get("rows") or []
        cols = result.get("summary_columns")
        print_rows(rows, f"{sc.name} ({sc.kind})", cols, limit=rows_shown,
                   where=f"{out / 'result.json'} (\"summary\")", more="--rows 0")
        if sc.kind == "buckets" and result.get("sizes"):
            from simulator.layouts.engine_syntax import engine_lines
            from .tables import raw_lines

            say(f"chosen sizes ({len(result['sizes'])}): {', '.join(map(str, result['sizes']))}")
            raw_lines(engine_lines(result["sizes"]))
        say(f"wrote {out / 'result.json'} and {out / 'report.html'} in {time.perf_counter() - t0:.2f} s")

    app.command(name="predict")(signed(*predict_parts()))

    @app.command()
    def schema() -> None:
        """Print the JSON Schema of scenario files."""
        from ..config import scenario_json_schema

        print(scenario_json_schema())
