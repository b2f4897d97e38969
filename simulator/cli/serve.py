"""`launchsim serve`: one replica under a request stream; prints the serving metrics (or one JSON object)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from . import app, choices
from simulator.common import vocab as V
from simulator.common.errors import UserError
from simulator.common.jsonfile import dumps
from .buckets import LAYOUT_HELP
from simulator.config.specs import ATTENTION_BACKEND_HELP, PREFILL_LAYOUT_HELP


FLAGS = {"scheduling": "--scheduling", "model": "--model", "profile": "--profile", "fusion": "--fusion", "graph": "--graph", "layout": "--layout",
         "rate": "--rate", "duration_s": "--duration", "seed": "--seed", "arrivals.trace": "--trace",
         "tensor_parallel_size": "--tp", "dtype": "--dtype", "kv_dtype": "--kv-dtype",
         "attention_backend": "--attention-backend", "prefill_layout": "--prefill-layout"}


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
    fusion: Optional[V.Fusion] = choices.option(V.Fusion, None, "--fusion", help="fusion level (default fused)",
                                                what="fusion level", field="fusion"),
    graph: Optional[V.GraphMode] = choices.option(V.GraphMode, None, "--graph", help="CUDA-graph mode (default "
                                                  "full_and_piecewise)", what="graph mode", field="graph"),
    layout: Optional[str] = typer.Option(None, "--layout", help=LAYOUT_HELP),
    attention_backend: Optional[V.AttentionBackend] = choices.option(
        V.AttentionBackend, None, "--attention-backend", help=ATTENTION_BACKEND_HELP + " (default flashinfer)",
        what="attention backend", field="attention_backend"),
    prefill_layout: Optional[str] = typer.Option(None, "--prefill-layout", help=PREFILL_LAYOUT_HELP),
    profile: Optional[str] = typer.Option(None, "--profile", help="profile name or path"),
    scheduling: Optional[V.Scheduling] = choices.option(V.Scheduling, None, "--scheduling", help="engine host work "
                                                        "per step: none (forward only, default), sync or async",
                                                        what="scheduling", field="scheduling"),
    trace: Optional[Path] = typer.Option(None, "--trace", help="CSV trace (timestamp,prompt_tokens,output_tokens)"),
    out: Optional[Path] = typer.Option(None, "--out", help="write result.json, metrics.csv, batch_log.csv, report.html"),
    inline_plotly: bool = typer.Option(False, "--inline-plotly", help="inline plotly.js into report.html instead "
                                       "of writing plotly.min.js beside it"),
    tp: Optional[int] = typer.Option(None, "--tp", help="tensor-parallel GPUs per replica (1, 2, 4, 8; default 1): "
                                     "sets tensor_parallel_size; collective figures are published, unmeasured"),
    dtype: Optional[V.Dtype] = choices.option(V.Dtype, None, "--dtype", help="weights (default bf16; sets dtype)", what="dtype", field="dtype"),
    kv_dtype: Optional[V.Dtype] = choices.option(V.Dtype, None, "--kv-dtype", help="KV cache (default bf16)", what="KV-cache dtype", field="kv_dtype"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
) -> None:
    """Simulate one GPU replica serving requests (continuous batching); print throughput, TTFT/TPOT, busy shares."""
    from ..config import load_scenario
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
        check_out_dir(out, "--out")
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
            "scheduling": scheduling, "tensor_parallel_size": tp, "dtype": dtype, "kv_dtype": kv_dtype,
            "attention_backend": attention_backend, "prefill_layout": prefill_layout}
    data.update({k: v for k, v in over.items() if v is not None})
    if trace is not None:
        data["arrivals"] = {**dict(data.get("arrivals") or {}), "process": "trace", "trace": str(trace)}
    from .flags import scenario_from_flags

    where = "command line" if scenario is None else f"{scenario} (with command-line flags)"
    given = {"model": model, "profile": profile, "fusion": fusion, "graph": graph, "layout": layout,
             "rate": rate, "duration_s": duration, "seed": seed, "arrivals.trace": trace, "scheduling": scheduling,
             "tensor_parallel_size": tp, "dtype": dtype, "kv_dtype": kv_dtype, "attention_backend": attention_backend,
             "prefill_layout": prefill_layout}
    sc = scenario_from_flags(ServeScenario, data, FLAGS, given, where)  # a flag's error names the flag and the field it fills
    if out is None:
        result = run_serve(sc)
        result.pop("_samples")
    else:
        with out_lock(out, "--out"):
            result = run_serve(sc)
            write_outputs(result, result.pop("_samples"), out, sc.name, sc.description)
    d = {**result["config"], **result["metrics"], **result["kv"], "simulated_s": result["simulated_s"],
         "wall_s": result["wall_s"], "step_evals": result["step_evals"], "events": result["events"]}
    if as_json:
        print(dumps(d))
        return
    from .tables import print_rows

    print_rows([{"metric": k, "value": v} for k, v in d.items() if not isinstance(v, (list, dict))],
               f"serve {sc.model} at {sc.rate if sc.rate is not None else 'trace'} req/s", ["metric", "value"],
               limit=100)
