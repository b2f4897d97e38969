"""`launchsim optimize`: the exact best capture sizes for a batch-size distribution under graph-count,
memory and capture-time budgets, compared with the engines' presets."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import typer

from . import app, choices
from simulator.common import vocab as V
from simulator.common.errors import UserError
from simulator.common.jsonfile import dumps


@app.command()
def optimize(
    dist: Optional[Path] = typer.Option(None, "--distribution", "--dist",
                                        help="batch-size CSV with a header: `batch` or `batch,count` columns "
                                             "(e.g. the batch_log.csv of `serve --out`); --dist is an alias"),
    scenario: Optional[Path] = typer.Option(None, "--scenario", help="a `buckets` scenario file (flags override it)"),
    model: Optional[str] = typer.Option(None, "--model", help="model preset or config.json path (default qwen3-8b)"),
    fusion: Optional[V.Fusion] = choices.option(V.Fusion, None, "--fusion", help="fusion level (default fused, "
                                                "vLLM V1's)",
                                                what="fusion level", field="fusion"),
    profile: Optional[str] = typer.Option(None, "--profile", help="profile name or path (default h200)"),
    graph: Optional[V.GraphMode] = choices.option(V.GraphMode, None, "--graph", help="CUDA-graph mode of the "
                                                  "captured sizes, not none (default full_and_piecewise, vLLM V1's)",
                                                  what="graph mode", field="graph"),
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
    objective: Optional[V.Objective] = choices.option(V.Objective, None, "--objective", help="what to minimise "
                                                      "(default step-time)", what="objective", field="objective"),
    private: bool = typer.Option(False, "--private", help="a private memory pool per graph (default: shared)"),
    out: Optional[Path] = typer.Option(None, "--out", help="folder for report.html, result.json, frontier.csv"),
    inline_plotly: bool = typer.Option(False, "--inline-plotly", help="inline plotly.js into report.html instead "
                                       "of writing plotly.min.js beside it"),
    dtype: Optional[V.Dtype] = choices.option(V.Dtype, None, "--dtype", help="weights (default bf16)", what="dtype", field="dtype"),
    kv_dtype: Optional[V.Dtype] = choices.option(V.Dtype, None, "--kv-dtype", help="KV cache (default bf16)", what="KV-cache dtype", field="kv_dtype"),
    spec_tokens: Optional[int] = typer.Option(None, "--spec-tokens", help="speculative decoding: k draft tokens "
                                              "per sequence; sizes count verify tokens (a batch of B sequences pads "
                                              "B(1+k) tokens), candidates are multiples of 1+k, presets the "
                                              "engines' spec-decode lists; --max-size is then in tokens"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
) -> None:
    """Exact best CUDA-graph capture sizes for a batch-size distribution (dynamic programming)."""
    from simulator.studies.optimize import inputs_from_scenario, run, write_outputs

    from simulator.report.html import set_inline_plotly

    set_inline_plotly(inline_plotly)
    from simulator.common.outpaths import check_out_dir, out_lock

    if (dist is None) == (scenario is None):
        raise UserError("give exactly one of --distribution CSV or --scenario FILE")
    if out is not None:
        check_out_dir(out, "--out")
    sc = buckets_scenario(scenario, dist, model=model, profile=profile, fusion=fusion, graph=graph, ctx=ctx,
                          objective=objective, max_graphs=max_graphs, memory_budget=memory_budget,
                          capture_budget=capture_budget, max_size=max_size, shared_pool=False if private else None,
                          dtype=dtype, kv_dtype=kv_dtype, spec_tokens=spec_tokens)
    inp = inputs_from_scenario(sc)
    title = "launchsim optimize" if scenario is None else f"launchsim optimize: {sc.name}"
    t0 = time.perf_counter()
    from .checks import as_flags

    with as_flags({k: v for k, v in FLAGS.items() if "_" in k or k in ("ctx", "objective")}):
        if out is None:  # the study names fields; the command names the flags that fill them
            result = run(inp, frontier=False)
            result["wall_s"] = time.perf_counter() - t0
        else:
            with out_lock(out, "--out"):
                result = run(inp, frontier=True)
                result["wall_s"] = time.perf_counter() - t0
                write_outputs(result, inp.dist, out, title)
    if as_json:
        print(dumps(result))
        return
    _print(result, out)


FLAGS = {"distribution": "--distribution", "model": "--model", "profile": "--profile", "fusion": "--fusion",
         "graph": "--graph", "ctx": "--ctx", "objective": "--objective", "max_graphs": "--max-graphs",
         "memory_budget": "--memory-budget (alias --budget)", "capture_budget": "--capture-budget",
         "max_size": "--max-size", "dtype": "--dtype", "kv_dtype": "--kv-dtype", "spec_tokens": "--spec-tokens"}


def buckets_scenario(scenario: Optional[Path], dist: Optional[Path], **flags):
    """`optimize`'s flags as the `buckets` scenario (config/buckets.py), on top of --scenario FILE's fields or
    of a CSV distribution, validated and resolved as a `kind: buckets` file is; errors name the flag and field."""
    from simulator.config.buckets import BucketsScenario
    from .checks import named
    from .flags import scenario_from_flags

    over = {k: v for k, v in flags.items() if v is not None}
    if scenario is not None:
        from simulator.config import load_scenario

        with named("--scenario"):
            base = load_scenario(scenario, check=not over)  # no flags: checked with the file's line numbers
        if not isinstance(base, BucketsScenario):
            raise UserError(f"{scenario}: kind '{base.kind}' is not a buckets scenario")
        if not over:
            return base
        data = base.model_dump(mode="python", exclude_unset=True)
        where = f"{scenario} (with command-line flags)"
    else:
        data = {"kind": "buckets", "name": "optimize", "model": "qwen3-8b", "distribution": {"csv": str(dist)}}
        where = "command line"
    data.update(over)
    return scenario_from_flags(BucketsScenario, data, FLAGS, {**flags, "distribution": dist}, where)


def _print(result: dict, out: Optional[Path]) -> None:
    from simulator.layouts.engine_syntax import engine_lines
    from simulator.studies.optimize import preset_rows
    from .tables import print_rows, raw_lines, say

    unit = result["objective_unit"]
    inp = result["inputs"]
    say(f"optimize {inp['model']} on {inp['profile']}: {V.defaults_note(inp['fusion'], inp['graph'])}")
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
