"""`launchsim optimize`: the exact best capture sizes for a batch-size distribution under graph-count,
memory and capture-time budgets, compared with the engines' presets. Its flags are generated from the `buckets`
scenario kind (config/buckets.py; cli/generated.py), so each has a YAML twin; `--scenario FILE` instead of
`--distribution` gives the rest, flags override it. The study is studies/optimize.py."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

from simulator.common.errors import UserError
from simulator.common.jsonfile import dumps
from .generated import Flag

FLAGS = [
    Flag("distribution", ("--distribution", "--dist"), convert=lambda p: {"csv": str(p)}, annotation=Optional[Path],
         default=None, help="batch-size CSV with a header: `batch` or `batch,count` columns (e.g. the batch_log.csv "
                            "of `serve --out`)"),
    Flag("shared_pool", ("--private",), convert=lambda v: False if v else None, annotation=Optional[bool],
         default=None, help="a private memory pool per graph (default: one shared pool, as vLLM and SGLang)")]
ALIASES = {"memory_budget": ("--budget",)}


def _optimize(given: dict, texts: dict, scenario: Optional[Path] = None, out: Optional[Path] = None,
              inline_plotly: bool = False, as_json: bool = False) -> None:
    """Exact best CUDA-graph capture sizes for a batch-size distribution (dynamic programming). Every option but
    --scenario, --out, --inline-plotly and --json is a field of the `buckets` kind."""
    from simulator.studies.optimize import inputs_from_scenario, run
    from .checks import as_flags

    if (given["distribution"] is None) == (scenario is None):
        raise UserError("give exactly one of --distribution CSV or --scenario FILE")
    if out is not None:
        from simulator.common.outpaths import check_out_dir

        check_out_dir(out, "--out")
    sc = buckets_scenario(scenario, None, _given=given, _texts=texts)
    inp = inputs_from_scenario(sc)
    title = "launchsim optimize" if scenario is None else f"launchsim optimize: {sc.name}"
    t0 = time.perf_counter()
    # the study names fields; the command names the flags that fill them
    with as_flags({k: v for k, v in texts.items() if "_" in k or k in ("ctx", "objective")}):
        if out is None:
            result = run(inp, frontier=False)
            result["wall_s"] = time.perf_counter() - t0
        else:
            from simulator.common.outpaths import out_lock
            from simulator.report.html import plotly_inline  # the report's modules: only where a report is written
            from simulator.studies.optimize import write_outputs

            with out_lock(out, "--out"), plotly_inline(inline_plotly):
                result = run(inp, frontier=True)
                result["wall_s"] = time.perf_counter() - t0
                write_outputs(result, inp.dist, out, title)
    if as_json:
        print(dumps(result))
        return
    _print(result, out)


def buckets_scenario(scenario: Optional[Path], dist: Optional[Path], _given: dict | None = None,
                     _texts: dict | None = None, **fields):
    """`optimize`'s flags (`fields`: {field: value}, or the command's `_given`) as the `buckets` scenario, on top of
    --scenario FILE's fields or of a CSV distribution, validated and resolved as a `kind: buckets` file is; errors
    name the flag and field. Without --scenario, --model is required (as every command's)."""
    from simulator.config.buckets import BucketsScenario
    from .flags import command_scenario
    from .generated import model_options

    given = dict(_given) if _given is not None else {**fields, "distribution": None if dist is None else
                                                     {"csv": str(dist)}}
    texts = _texts if _texts is not None else model_options(BucketsScenario, ALIASES, flags=FLAGS)[1]
    if scenario is None and given.get("model") is None:
        raise UserError("give --model (or --scenario FILE)")
    return command_scenario(BucketsScenario, "buckets", given, texts, scenario, {"name": "optimize"}, FLAGS)


def _print(result: dict, out: Optional[Path]) -> None:
    from simulator.layouts.engine_syntax import engine_lines
    from simulator.studies.optimize import preset_rows
    from simulator.studies.serve import header
    from .tables import print_rows, raw_lines, say

    unit = result["objective_unit"]
    inp = result["inputs"]
    say(header("optimize", inp["model"], inp["profile"], inp["fusion"], inp["graph"]))
    print_rows(preset_rows(result), f"objective: {unit} (gain = how much lower the optimum is)")
    unit_s = " tokens" if result.get("spec_tokens") else ""
    say(f"sizes ({len(result['sizes'])}{unit_s}): {', '.join(map(str, result['sizes']))}")
    for n in result.get("spec_notes", []):
        say(n)
    if result.get("spec_tokens"):  # vLLM's line counts tokens, the others' requests (studies/optimize.py)
        from simulator.layouts.engine_syntax import LABELS

        raw_lines([x for key, line in result["engine_syntax"].items() for x in (f"# {LABELS[key]}", line)])
    else:
        raw_lines(engine_lines(result["sizes"]))
    if out is not None:
        say(f"wrote {out / 'report.html'}, {out / 'result.json'} and {out / 'frontier.csv'}")


def optimize_parts():
    """`optimize`'s function and options (cli/generated.command_parts): what typer registers (`register`) and
    cli/fast.py runs without typer."""
    from simulator.config.buckets import BucketsScenario
    from .generated import command_parts, extra_option

    extra = [extra_option("scenario", Optional[Path], None, "--scenario",
                          help="a `buckets` scenario file instead of --distribution (flags override it)"),
             extra_option("out", Optional[Path], None, "--out", help="folder for report.html, result.json, "
                                                                     "frontier.csv"),
             extra_option("inline_plotly", bool, False, "--inline-plotly",
                          help="inline plotly.js into report.html instead of writing plotly.min.js beside it"),
             extra_option("as_json", bool, False, "--json", help="print one JSON object")]
    return command_parts(_optimize, BucketsScenario, extra, ALIASES, flags=FLAGS)


def register(app) -> None:
    """Add `optimize` to the typer app (called by simulator/cli when the command table is built)."""
    from .generated import signed

    app.command(name="optimize")(signed(*optimize_parts()))
