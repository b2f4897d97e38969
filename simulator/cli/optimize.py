"""`launchsim optimize`: the exact best capture sizes for a batch-size distribution under graph-count,
memory and capture-time budgets, compared with the engines' presets."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Optional

import typer

from . import app
from simulator.common.errors import UserError
from simulator.report.html import dumps


@app.command()
def optimize(
    dist: Optional[Path] = typer.Option(None, "--distribution", "--dist",
                                        help="batch-size CSV with a header: `batch` or `batch,count` columns "
                                             "(e.g. the batch_log.csv of `serve --out`); --dist is an alias"),
    scenario: Optional[Path] = typer.Option(None, "--scenario", help="a `buckets` scenario file (flags override it)"),
    model: Optional[str] = typer.Option(None, "--model", help="model preset or config.json path (default qwen3-8b)"),
    fusion: Optional[str] = typer.Option(None, "--fusion", help="none | packed | compiled | fused (default fused)"),
    profile: Optional[str] = typer.Option(None, "--profile", help="profile name or path (default h200)"),
    graph: Optional[str] = typer.Option(None, "--graph", help="full | full_decode_only | piecewise | "
                                       "full_and_piecewise (default full)"),
    ctx: Optional[int] = typer.Option(None, "--ctx", help="context length, tokens (default 1024)"),
    max_graphs: Optional[int] = typer.Option(None, "--max-graphs", help="most capture sizes K (default 64)"),
    memory_budget: Optional[str] = typer.Option(None, "--memory-budget", "--budget",
                                                help="pinned graph memory: bytes, 512MiB, 1GiB, or a preset name "
                                                     "(--budget is an alias)"),
    capture_budget: Optional[float] = typer.Option(None, "--capture-budget",
                                                  help="start-up capture budget, seconds: warm-up runs + capture of "
                                                       "every graph, as `launchsim startup` counts them (compile "
                                                       "excluded: it does not depend on the sizes)"),
    max_size: Optional[int] = typer.Option(None, "--max-size", help="largest size (default: largest batch seen)"),
    objective: Optional[str] = typer.Option(None, "--objective", help="step-time | padded-rows (default step-time)"),
    private: bool = typer.Option(False, "--private", help="a private memory pool per graph (default: shared)"),
    out: Optional[Path] = typer.Option(None, "--out", help="folder for report.html, result.json, frontier.csv"),
    inline_plotly: bool = typer.Option(False, "--inline-plotly", help="inline plotly.js into report.html instead "
                                       "of writing plotly.min.js beside it"),
    dtype: Optional[str] = typer.Option(None, "--dtype", help="weights: bf16 | fp8 (default bf16)"),
    kv_dtype: Optional[str] = typer.Option(None, "--kv-dtype", help="KV cache: bf16 | fp8 (default bf16)"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
) -> None:
    """Exact best CUDA-graph capture sizes for a batch-size distribution (dynamic programming)."""
    from ..config import load_scenario
    from ..config.buckets import BucketsScenario
    from simulator.layouts.distribution import from_csv
    from simulator.studies.optimize import Inputs, inputs_from_scenario, parse_memory_budget, run, write_outputs

    from simulator.common import limits as L
    from simulator.report.html import set_inline_plotly

    set_inline_plotly(inline_plotly)
    from simulator.common.outpaths import check_out_dir, out_lock
    from .checks import count, model_flag, modes, named, number, profile_flag

    if (dist is None) == (scenario is None):
        raise UserError("give exactly one of --distribution CSV or --scenario FILE")
    count("--ctx", ctx, L.MAX_CTX)
    if max_graphs is not None and max_graphs > L.MAX_OPTIMIZE_SIZE:
        raise UserError(f"--max-graphs {max_graphs:,} is above the limit of {L.MAX_OPTIMIZE_SIZE:,}")
    count("--max-size", max_size, L.MAX_OPTIMIZE_SIZE)
    number("--capture-budget", capture_budget, L.MAX_SECONDS, "a positive number of seconds")
    modes(fusion, graph)
    choice_objective = objective is None or objective in ("step-time", "padded-rows")
    if not choice_objective:
        raise UserError(f"--objective must be step-time or padded-rows, got {objective!r}")
    model_flag("--model", model)
    from simulator.model.dtype import check_dtype

    if dtype is not None:
        check_dtype(dtype)
    if kv_dtype is not None:
        check_dtype(kv_dtype, "--kv-dtype")
    if profile is not None:
        profile_flag("--profile", profile)
    if out is not None:
        check_out_dir(out)
    with named("--memory-budget (alias --budget)"):
        mb = parse_memory_budget(memory_budget)
    over = dict(model=model, profile=profile, fusion=fusion, graph=graph, ctx=ctx, objective=objective,
                max_graphs=max_graphs, memory_budget=mb,
                capture_budget=capture_budget, max_size=max_size, shared_pool=False if private else None,
                dtype=dtype, kv_dtype=kv_dtype)
    title = "launchsim optimize"
    if scenario is not None:
        with named("--scenario"):
            sc = load_scenario(scenario)
        if not isinstance(sc, BucketsScenario):
            raise UserError(f"{scenario}: kind '{sc.kind}' is not a buckets scenario")
        inp, title = inputs_from_scenario(sc, **over), f"launchsim optimize: {sc.name}"
    else:
        with named("--distribution"):
            d = from_csv(dist)
        inp = Inputs(d, **{k: v for k, v in over.items() if v is not None})
    t0 = time.perf_counter()
    if out is None:
        result = run(inp, frontier=False)
        result["wall_s"] = time.perf_counter() - t0
    else:
        with out_lock(out):
            result = run(inp, frontier=True)
            result["wall_s"] = time.perf_counter() - t0
            write_outputs(result, inp.dist, out, title)
    if as_json:
        print(dumps(result))
        return
    _print(result, out)


def _print(result: dict, out: Optional[Path]) -> None:
    from simulator.layouts.engine_syntax import engine_lines
    from .tables import print_rows, raw_lines, say

    unit = result["objective_unit"]
    rows = [{"layout": "optimum", "graphs": result["best_graphs"], "objective": result["objective"],
             "step_ms": result["best_step_ms"], "padded_rows": result["best_padded_rows"],
             "memory_MiB": result["best_memory_mib"], "capture_s": result["best_capture_s"], "gain_%": 0.0,
             "feasible": "yes"}]
    for n, v in result["presets"].items():
        rows.append({"layout": n, "graphs": v.get("graphs", 0), "objective": v.get("objective", float("nan")),
                     "step_ms": v.get("step_ms", float("nan")), "padded_rows": v.get("padded_rows", float("nan")),
                     "memory_MiB": v.get("memory_mib", float("nan")), "capture_s": v.get("capture_s", float("nan")),
                     "gain_%": v.get("gain_pct", float("nan")), "feasible": "yes" if v["feasible"] else v["reason"]})
    print_rows(rows, f"objective: {unit} (gain = how much lower the optimum is)")
    say(f"sizes ({len(result['sizes'])}): {', '.join(map(str, result['sizes']))}")
    raw_lines(engine_lines(result["sizes"]))
    if out is not None:
        say(f"wrote {out / 'report.html'}, {out / 'result.json'} and {out / 'frontier.csv'}")
