"""`launchsim capacity`: the highest arrival rate one replica sustains under latency SLOs (and stays stable), and
the replicas a target rate needs: the `capacity` scenario kind from flags (same fields; --scenario FILE for the
rest, flags override it)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import typer

from . import app
from simulator.common import vocab as V
from simulator.common.errors import UserError
from simulator.common.jsonfile import dumps
from .serve import ENGINE_FLAGS, LENGTH_HELP, SPEC_FLAGS, length_spec, spec_over

FLAGS = {"models": "--model", "profiles": "--profile", "fusion": "--fusion", "graph": "--graph",
         "layouts": "--layout", "slo.percentile": "--slo-percentile", "slo.tpot_ms": "--slo-tpot-ms",
         "slo.ttft_s": "--slo-ttft-s", "slo": "--slo-tpot-ms / --slo-ttft-s", "target_rate": "--target-rate",
         "duration_s": "--duration", "seed": "--seed", "search.rate_min": "--rate-min",
         "search.rate_max": "--rate-max", "search.tolerance": "--tolerance", "search.max_runs": "--max-runs",
         "tensor_parallel_size": "--tensor-parallel-size (alias --tp)", "workers": "--workers", **ENGINE_FLAGS,
         **SPEC_FLAGS}


@app.command()
def capacity(
    model: Optional[list[str]] = typer.Option(None, "--model", help="model preset or config.json path (repeat "
                                              "for several)"),
    scenario: Optional[Path] = typer.Option(None, "--scenario", help="a capacity scenario file; flags override it"),
    slo_tpot_ms: Optional[float] = typer.Option(None, "--slo-tpot-ms", help="limit on the TPOT percentile, ms"),
    slo_ttft_s: Optional[float] = typer.Option(None, "--slo-ttft-s", help="limit on the TTFT percentile, s"),
    slo_percentile: Optional[int] = typer.Option(None, "--slo-percentile", help="percentile the limits apply to "
                                                 "(50, 90, 99; default 99)"),
    target_rate: Optional[float] = typer.Option(None, "--target-rate", help="fleet arrival rate to size replicas "
                                                "for, requests/s (default: none)"),
    profile: Optional[list[str]] = typer.Option(None, "--profile", help="profile name or path (default h200); "
                                                "repeatable"),
    fusion: Optional[list[str]] = typer.Option(None, "--fusion", help="fusion level (default fused, vLLM V1's); "
                                               "repeatable"),
    graph: Optional[list[str]] = typer.Option(None, "--graph", help="CUDA-graph mode (default full_and_piecewise, "
                                              "vLLM V1's); repeatable: e.g. --graph none --graph full_and_piecewise"),
    layout: Optional[str] = typer.Option(None, "--layout", help="capture sizes: a preset or 1,2,4,... (default "
                                         "vllm)"),
    duration: Optional[float] = typer.Option(None, "--duration", help="seconds of arrivals per run (default 60)"),
    replications: Optional[int] = typer.Option(None, "--replications", help="independent runs per rate "
                                               "(default 1)"),
    seed: Optional[int] = typer.Option(None, "--seed", help="root seed (default 0)"),
    rate_min: Optional[float] = typer.Option(None, "--rate-min", help="lowest rate tried (default 0.05)"),
    rate_max: Optional[float] = typer.Option(None, "--rate-max", help="highest rate tried (default 5000; the "
                                             "replica's throughput bound caps it)"),
    tolerance: Optional[float] = typer.Option(None, "--tolerance", help="bisection tolerance (default 0.02)"),
    max_runs: Optional[int] = typer.Option(None, "--max-runs", help="most simulations per configuration "
                                           "(default 40)"),
    tp: Optional[int] = typer.Option(None, "--tensor-parallel-size", "--tp", "--tp-size",
                                     help="tensor-parallel GPUs per replica (default 1)"),
    max_num_seqs: Optional[int] = typer.Option(None, "--max-num-seqs", help="most sequences in one step "
                                               "(default 256)"),
    max_num_batched_tokens: Optional[int] = typer.Option(None, "--max-num-batched-tokens",
                                                         help="token budget of one step (default 8192)"),
    gpu_memory_utilization: Optional[float] = typer.Option(None, "--gpu-memory-utilization", "--gpu-util",
                                                           help="share of GPU memory the engine may use "
                                                                "(default 0.9)"),
    prompt_len: Optional[str] = typer.Option(None, "--prompt-len", help=LENGTH_HELP.format(
        what="prompt", default="lognormal:512:1:1:4096")),
    output_len: Optional[str] = typer.Option(None, "--output-len", help=LENGTH_HELP.format(
        what="output", default="lognormal:256:1:1:2048")),
    workers: Optional[int] = typer.Option(None, "--workers", help="processes (default 1; 0: one per core)"),
    out: Optional[Path] = typer.Option(None, "--out", help="write result.json, capacity.csv, curves.csv, "
                                       "report.html"),
    spec_tokens: Optional[int] = typer.Option(None, "--spec-tokens", help="speculative decoding: k draft tokens "
                                              "verified per sequence per step (0: plain decode; with a layout "
                                              "preset vllm, sglang or trtllm its verify capture sizes in tokens)"),
    draft: Optional[str] = typer.Option(None, "--draft", help="with --spec-tokens: eagle | mtp (a one-layer head) "
                                        "or a draft model preset / config.json (default eagle)"),
    acceptance: Optional[str] = typer.Option(None, "--acceptance", help="with --spec-tokens: per-token acceptance "
                                             "probability, or k per-position probabilities '0.9,0.7,0.5'"),
    as_json: bool = typer.Option(False, "--json", help="print the summary rows as one JSON object"),
) -> None:
    """Highest SLO-meeting (and stable) arrival rate per configuration, and replicas for a target rate."""
    from simulator.config import load_scenario
    from simulator.config.capacity import CapacityScenario
    from simulator.common.outpaths import check_out_dir, out_lock
    from simulator.studies.capacity import run_capacity_scenario
    from .checks import named
    from .flags import scenario_from_flags
    from .tables import print_rows, say

    if out is not None:
        check_out_dir(out)
    for flag, vals, enum in (("--fusion", fusion, V.Fusion), ("--graph", graph, V.GraphMode)):
        for v in vals or []:
            if v not in V.values(enum):
                raise UserError(f"{flag}: unknown value {v!r}: use one of {', '.join(V.values(enum))}")
    if scenario is not None:
        with named("--scenario"):
            base = load_scenario(scenario)
        if not isinstance(base, CapacityScenario):
            raise UserError(f"{scenario}: --scenario needs a scenario of kind 'capacity', got '{base.kind}'")
        data = base.model_dump(mode="python", exclude_unset=True)
        where = f"{scenario} (with command-line flags)"
    else:
        if not model:
            raise UserError("give --model (or --scenario FILE)")
        if slo_tpot_ms is None and slo_ttft_s is None:
            raise UserError("give --slo-tpot-ms and/or --slo-ttft-s (the SLO a rate must meet)")
        data = {"kind": "capacity", "name": "capacity", "models": list(model),
                "fusion": [V.DEFAULT_FUSION.value], "graph": [V.DEFAULT_GRAPH.value]}
        where = "command line"
    slo = dict(data.get("slo") or {})
    slo.update({k: v for k, v in (("tpot_ms", slo_tpot_ms), ("ttft_s", slo_ttft_s),
                                  ("percentile", slo_percentile)) if v is not None})
    data["slo"] = slo
    search = dict(data.get("search") or {})
    search.update({k: v for k, v in (("rate_min", rate_min), ("rate_max", rate_max), ("tolerance", tolerance),
                                     ("max_runs", max_runs)) if v is not None})
    if search:
        data["search"] = search
    eng = {k: v for k, v in (("max_num_seqs", max_num_seqs), ("max_num_batched_tokens", max_num_batched_tokens),
                             ("gpu_memory_utilization", gpu_memory_utilization)) if v is not None}
    if eng:
        base_eng = dict(data.get("engine") or {})
        if "gpu_util" in base_eng:
            base_eng["gpu_memory_utilization"] = base_eng.pop("gpu_util")
        data["engine"] = {**base_eng, **eng}
    over = {"models": list(model) if model else None, "profiles": list(profile) if profile else None,
            "fusion": list(fusion) if fusion else None, "graph": list(graph) if graph else None,
            "target_rate": target_rate, "duration_s": duration, "replications": replications, "seed": seed,
            "tensor_parallel_size": tp, "workers": workers,
            "prompt": length_spec("--prompt-len", prompt_len) if prompt_len is not None else None,
            "output": length_spec("--output-len", output_len) if output_len is not None else None}
    if layout is not None:
        from .serve import _layout

        over["layouts"] = [{"label": layout if "," not in layout else "given", "sizes": _layout(layout)}]
    data.update({k: v for k, v in over.items() if v is not None})
    data.update(spec_over(spec_tokens, draft, acceptance))
    given = {"models": model, "profiles": profile, "fusion": fusion, "graph": graph, "layouts": layout,
             "slo.percentile": slo_percentile, "slo.tpot_ms": slo_tpot_ms, "slo.ttft_s": slo_ttft_s,
             "slo": slo_tpot_ms or slo_ttft_s, "target_rate": target_rate, "duration_s": duration, "seed": seed,
             "search.rate_min": rate_min, "search.rate_max": rate_max, "search.tolerance": tolerance,
             "search.max_runs": max_runs, "tensor_parallel_size": tp, "workers": workers,
             "engine.max_num_seqs": max_num_seqs, "engine.max_num_batched_tokens": max_num_batched_tokens,
             "engine.gpu_memory_utilization": gpu_memory_utilization, "prompt": prompt_len, "output": output_len,
             "replications": replications, "spec_tokens": spec_tokens, "draft": draft, "acceptance": acceptance}
    sc = scenario_from_flags(CapacityScenario, data, FLAGS, given, where)
    t0 = time.perf_counter()
    if out is None:
        result = run_capacity_scenario(sc, None)
    else:
        with out_lock(out):
            result = run_capacity_scenario(sc, out)
    if as_json:
        print(dumps({"slo": result["slo"], "target_rate": result["target_rate"], "summary": result["summary"],
                     "assumptions": result.get("assumptions", {})}))
        return
    say(f"capacity: SLO {result['slo']}; {V.defaults_note(sc.fusion[0], sc.graph[-1])}")
    print_rows(result["summary"], f"{sc.name} (capacity)", result["summary_columns"])
    for f in result["configs"]:
        say(f"{f['config']}: {f['message']}")
    if out is not None:
        say(f"wrote {out / 'result.json'} and {out / 'report.html'} in {time.perf_counter() - t0:.2f} s")
