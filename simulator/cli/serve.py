"""`launchsim serve`: one replica under a request stream; prints the serving metrics (or one JSON object)."""

from __future__ import annotations

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
         "tensor_parallel_size": "--tensor-parallel-size (alias --tp)", "dtype": "--dtype", "kv_dtype": "--kv-dtype",
         "attention_backend": "--attention-backend", "prefill_layout": "--prefill-layout"}
# speculative decoding's fields and flags (serve and capacity)
SPEC_FLAGS = {"spec_tokens": "--spec-tokens", "draft": "--draft", "acceptance": "--acceptance"}


def spec_over(spec_tokens, draft, acceptance) -> dict:
    """The speculative-decoding fields the flags set (None: not given)."""
    return {k: v for k, v in (("spec_tokens", spec_tokens), ("draft", draft), ("acceptance", acceptance))
            if v is not None}
# the serving knobs, under the engines' names (vLLM's flags), with their YAML fields
ENGINE_FLAGS = {"engine.max_num_seqs": "--max-num-seqs", "engine.max_num_batched_tokens": "--max-num-batched-tokens",
                "engine.gpu_memory_utilization": "--gpu-memory-utilization (alias --gpu-util)",
                "prompt": "--prompt-len", "output": "--output-len", "replications": "--replications"}
LENGTH_HELP = ("{what} lengths: fixed:N, uniform:LOW:HIGH, lognormal:MEAN[:CV[:LOW:HIGH]] or csv:FILE[:COLUMN] "
               "(real lengths, resampled; default {default})")


def length_spec(flag: str, text: str) -> dict:
    """A length distribution flag as the YAML `prompt` / `output` mapping (the model validates the values)."""
    kind, _, rest = text.strip().partition(":")
    parts = rest.split(":") if rest else []
    keys = {"fixed": ["value"], "uniform": ["low", "high"], "lognormal": ["mean", "cv", "low", "high"],
            "csv": ["file", "column"]}
    if kind not in keys:
        raise UserError(f"{flag}: unknown length distribution {kind!r} in {text!r}: use fixed:N, uniform:LOW:HIGH, "
                        f"lognormal:MEAN[:CV[:LOW:HIGH]] or csv:FILE[:COLUMN]")
    if kind == "csv" and len(parts) > 2:  # a path with ':' in it: everything but a last column name
        parts = [":".join(parts[:-1]), parts[-1]]
    if len(parts) > len(keys[kind]) or (kind != "lognormal" and kind != "csv" and len(parts) != len(keys[kind])) \
            or not parts or any(p == "" for p in parts):
        raise UserError(f"{flag}: {text!r}: {kind} takes {':'.join(k.upper() for k in keys[kind])}")
    out: dict = {"kind": kind}
    for k, v in zip(keys[kind], parts):
        if k in ("file", "column"):
            out[k] = v
            continue
        try:
            out[k] = float(v) if k in ("mean", "cv") else int(v)
        except ValueError:
            raise UserError(f"{flag}: {text!r}: {k} must be a number, got {v!r}") from None
    return out


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
    rate: Optional[float] = typer.Option(None, "--rate", help="mean arrival rate, requests/s (default 10; with "
                                         "--trace: the trace's own rate unless given)"),
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
    tp: Optional[int] = typer.Option(None, "--tensor-parallel-size", "--tp", "--tp-size",
                                     help="tensor-parallel GPUs per replica (1, 2, 4, 8; default 1; --tp and "
                                          "--tp-size are aliases): collective figures are published, unmeasured"),
    max_num_seqs: Optional[int] = typer.Option(None, "--max-num-seqs", help="most sequences in one step (default "
                                               "256, vLLM's)"),
    max_num_batched_tokens: Optional[int] = typer.Option(None, "--max-num-batched-tokens",
                                                         help="token budget of one step (default 8192)"),
    gpu_memory_utilization: Optional[float] = typer.Option(None, "--gpu-memory-utilization", "--gpu-util",
                                                           help="share of GPU memory the engine may use (default "
                                                                "0.9; --gpu-util is an alias)"),
    prompt_len: Optional[str] = typer.Option(None, "--prompt-len", help=LENGTH_HELP.format(
        what="prompt", default="lognormal:512:1:1:4096")),
    output_len: Optional[str] = typer.Option(None, "--output-len", help=LENGTH_HELP.format(
        what="output", default="lognormal:256:1:1:2048")),
    replications: Optional[int] = typer.Option(None, "--replications", help="independent runs (default 1)"),
    dtype: Optional[V.Dtype] = choices.option(V.Dtype, None, "--dtype", help="weights (default bf16; sets dtype)", what="dtype", field="dtype"),
    kv_dtype: Optional[V.Dtype] = choices.option(V.Dtype, None, "--kv-dtype", help="KV cache (default bf16)", what="KV-cache dtype", field="kv_dtype"),
    spec_tokens: Optional[int] = typer.Option(None, "--spec-tokens", help="speculative decoding: k draft tokens "
                                              "verified per sequence per step (0: plain decode; with a layout "
                                              "preset vllm, sglang or trtllm its verify capture sizes in tokens)"),
    draft: Optional[str] = typer.Option(None, "--draft", help="with --spec-tokens: eagle | mtp (a one-layer head) "
                                        "or a draft model preset / config.json (default eagle)"),
    acceptance: Optional[str] = typer.Option(None, "--acceptance", help="with --spec-tokens: per-token acceptance "
                                             "probability, or k per-position probabilities '0.9,0.7,0.5'"),
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
    data.update(spec_over(spec_tokens, draft, acceptance))
    if trace is not None:
        data["arrivals"] = {**dict(data.get("arrivals") or {}), "process": "trace", "trace": str(trace)}
    eng = {"max_num_seqs": max_num_seqs, "max_num_batched_tokens": max_num_batched_tokens,
           "gpu_memory_utilization": gpu_memory_utilization}
    if any(v is not None for v in eng.values()):
        base_eng = dict(data.get("engine") or {})
        if "gpu_util" in base_eng:
            base_eng["gpu_memory_utilization"] = base_eng.pop("gpu_util")
        data["engine"] = {**base_eng, **{k: v for k, v in eng.items() if v is not None}}
    if prompt_len is not None:
        data["prompt"] = length_spec("--prompt-len", prompt_len)
    if output_len is not None:
        data["output"] = length_spec("--output-len", output_len)
    if replications is not None:
        data["replications"] = replications
    from .flags import scenario_from_flags

    where = "command line" if scenario is None else f"{scenario} (with command-line flags)"
    given = {"model": model, "profile": profile, "fusion": fusion, "graph": graph, "layout": layout,
             "rate": rate, "duration_s": duration, "seed": seed, "arrivals.trace": trace, "scheduling": scheduling,
             "tensor_parallel_size": tp, "dtype": dtype, "kv_dtype": kv_dtype, "attention_backend": attention_backend,
             "prefill_layout": prefill_layout, "engine.max_num_seqs": max_num_seqs,
             "engine.max_num_batched_tokens": max_num_batched_tokens,
             "engine.gpu_memory_utilization": gpu_memory_utilization, "prompt": prompt_len, "output": output_len,
             "replications": replications, "spec_tokens": spec_tokens, "draft": draft, "acceptance": acceptance}
    sc = scenario_from_flags(ServeScenario, data, {**FLAGS, **ENGINE_FLAGS, **SPEC_FLAGS}, given, where)  # a flag's error names the flag and the field it fills
    if out is None:
        result = run_serve(sc)
        result.pop("_samples")
    else:
        with out_lock(out, "--out"):
            result = run_serve(sc)
            write_outputs(result, result.pop("_samples"), out, sc.name, sc.description)
    d = {**result["config"], **result["metrics"], **result["kv"], "simulated_s": result["simulated_s"],
         "wall_s": result["wall_s"], "step_evals": result["step_evals"], "events": result["events"],
         "assumptions": result["assumptions"]}
    if as_json:
        print(dumps(d))
        return
    from .tables import print_rows, say

    a = result["assumptions"]
    say(V.defaults_note(sc.fusion, sc.graph))
    print_rows([{"assumption": k, "value": v} for k, v in a.items()], f"serve {sc.model}: assumptions",
               ["assumption", "value"], limit=100)
    print_rows([{"metric": k, "value": v} for k, v in d.items() if not isinstance(v, (list, dict))],
               f"serve {sc.model} at {a.get('rate', 'trace')}", ["metric", "value"], limit=100)
    if d.get("saturated"):
        say(f"SATURATED: {d['saturated_why']}")
