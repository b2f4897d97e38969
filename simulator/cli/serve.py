"""`launchsim serve`: one replica under a request stream; prints the serving metrics (or one JSON object)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from . import app
from simulator.common.errors import UserError
from simulator.report.html import dumps
from .buckets import LAYOUT_HELP


FLAGS = {"scheduling": "--scheduling", "model": "--model", "profile": "--profile", "fusion": "--fusion", "graph": "--graph", "layout": "--layout",
         "rate": "--rate", "duration_s": "--duration", "seed": "--seed", "arrivals.trace": "--trace",
         "tensor_parallel_size": "--tp", "dtype": "--dtype", "kv_dtype": "--kv-dtype"}


def _layout(spec: str):
    """A preset name stays a string; "1,2,4,8" becomes a list (bad items are reported by the layout parser)."""
    from simulator.layouts.buckets import LAYOUT_PRESETS, parse_layout

    from .checks import named

    with named("--layout"):
        sizes = parse_layout(spec)  # one-line error for anything that is neither, or for sizes <= 0
    return spec if spec.strip() in LAYOUT_PRESETS else sizes


@app.command()
def serve(
    model: Optional[str] = typer.Option(None, "--model", help="model preset or config.json path"),
    rate: Optional[float] = typer.Option(None, "--rate", help="mean arrival rate, requests/s"),
    duration: Optional[float] = typer.Option(None, "--duration", help="seconds of arrivals to simulate"),
    seed: Optional[int] = typer.Option(None, "--seed", help="root seed (replications spawn from it)"),
    scenario: Optional[Path] = typer.Option(None, "--scenario", help="a serve scenario file; flags override it"),
    fusion: Optional[str] = typer.Option(None, "--fusion", help="none | packed | compiled | fused (default fused)"),
    graph: Optional[str] = typer.Option(None, "--graph",
                                       help="none | full | full_decode_only | piecewise | full_and_piecewise"),
    layout: Optional[str] = typer.Option(None, "--layout", help=LAYOUT_HELP),
    profile: Optional[str] = typer.Option(None, "--profile", help="profile name or path"),
    scheduling: Optional[str] = typer.Option(None, "--scheduling", help="engine host work per step: none (forward "
                                             "only, default) | sync | async"),
    trace: Optional[Path] = typer.Option(None, "--trace", help="CSV trace (timestamp,prompt_tokens,output_tokens)"),
    out: Optional[Path] = typer.Option(None, "--out", help="write result.json, metrics.csv, batch_log.csv, report.html"),
    inline_plotly: bool = typer.Option(False, "--inline-plotly", help="inline plotly.js into report.html instead "
                                       "of writing plotly.min.js beside it"),
    tp: Optional[int] = typer.Option(None, "--tp", help="tensor-parallel GPUs per replica (1, 2, 4, 8; default 1): "
                                     "sets tensor_parallel_size; collective figures are published, unmeasured"),
    dtype: Optional[str] = typer.Option(None, "--dtype", help="weights: bf16 | fp8 (default bf16; sets dtype)"),
    kv_dtype: Optional[str] = typer.Option(None, "--kv-dtype", help="KV cache: bf16 | fp8 (default bf16)"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
) -> None:
    """Simulate one GPU replica serving requests (continuous batching); print throughput, TTFT/TPOT, busy shares."""
    from ..config import load_scenario, parse_scenario
    from ..config.serve import ServeScenario
    from ..serving.study import serve as run_serve, write_outputs

    from simulator.common import limits as L
    from simulator.report.html import set_inline_plotly

    set_inline_plotly(inline_plotly)
    from simulator.common.outpaths import check_out_dir, out_lock
    from .checks import named, number, seed as check_seed

    number("--rate", rate, L.MAX_RATE, "a positive number of requests/s")
    number("--duration", duration, L.MAX_SECONDS, "a positive number of seconds")
    check_seed("--seed", seed)
    if out is not None:
        check_out_dir(out)
    if scenario is not None:
        with named("--scenario"):
            base = load_scenario(scenario)
        if not isinstance(base, ServeScenario):
            raise UserError(f"{scenario}: --scenario needs a scenario of kind 'serve', got '{base.kind}'")
        data = base.model_dump(mode="python")
    else:
        if model is None:
            raise UserError("give --model (or --scenario FILE)")
        data = {"kind": "serve", "name": "serve", "model": model}
    over = {"model": model, "rate": rate, "profile": profile, "fusion": fusion, "graph": graph,
            "layout": _layout(layout) if layout is not None else None, "duration_s": duration, "seed": seed,
            "scheduling": scheduling, "tensor_parallel_size": tp, "dtype": dtype, "kv_dtype": kv_dtype}
    data.update({k: v for k, v in over.items() if v is not None})
    if trace is not None:
        data["arrivals"] = {**dict(data.get("arrivals") or {}), "process": "trace", "trace": str(trace)}
    from ..config.refs import check_references

    where = "command line" if scenario is None else f"{scenario} (with command-line flags)"
    try:
        sc = parse_scenario(data, where)
        check_references(sc, where)
    except UserError as e:  # a flag's value: name the flag, not the scenario field it fills
        msg = str(e)
        given = {"model": model, "profile": profile, "fusion": fusion, "graph": graph, "layout": layout,
                 "rate": rate, "duration_s": duration, "seed": seed, "arrivals.trace": trace, "scheduling": scheduling,
                 "tensor_parallel_size": tp, "dtype": dtype, "kv_dtype": kv_dtype}
        for fld, flag in FLAGS.items():
            mark = f"field '{fld}': "
            if given.get(fld) is not None and mark in msg:
                raise UserError(f"{flag} (field '{fld}'): {msg.split(mark, 1)[1]}") from None
        raise
    if out is None:
        result = run_serve(sc)
        result.pop("_samples")
    else:
        with out_lock(out):
            result = run_serve(sc)
            write_outputs(result, result.pop("_samples"), out, sc.name, sc.description)
    d = {**result["config"], **result["metrics"], **result["kv"], "simulated_s": result["simulated_s"],
         "wall_s": result["wall_s"], "step_evals": result["step_evals"], "events": result["events"]}
    if as_json:
        print(dumps(d))
        return
    from .core import print_rows

    print_rows([{"metric": k, "value": v} for k, v in d.items() if not isinstance(v, (list, dict))],
               f"serve {sc.model} at {sc.rate if sc.rate is not None else 'trace'} req/s", ["metric", "value"],
               limit=100)
