"""Core commands: `run` a scenario file, `predict` one step, print the scenario `schema`."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import typer

from . import app, choices
from simulator.common import vocab as V
from simulator.common.errors import UserError
from simulator.common.jsonfile import dumps

from .tables import print_record, print_rows, say

PREDICT_FIELDS = ["model", "workload", "batch", "ctx", "prefill_seqs", "prefill_len", "tokens", "fusion", "graph",
                  "engine", "step_ms", "step_ms_p10", "step_ms_p50", "step_ms_p90", "cpu_ms", "gpu_ms", "bound",
                  "kernels", "launches", "host_calls", "gpu_idle_frac", "gpu_bubble_ms", "gpu_gap_ms", "cpu_stall_ms"]


def print_prediction(d: dict, title: str = "prediction") -> None:
    """Every headline field of a prediction, one per line, then the rest (same keys as --json)."""
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

    sc = load_scenario(scenario, overrides=overrides)
    from simulator.report.html import set_inline_plotly

    set_inline_plotly(inline_plotly)
    if scheduling is not None:
        if "scheduling" not in type(sc).model_fields:
            raise UserError(f"--scheduling applies to serve and capacity scenarios, not kind '{sc.kind}'")
        sc = sc.model_copy(update={"scheduling": scheduling.value})
    check_out_dir(out)
    t0 = time.perf_counter()
    try:
        with out_lock(out):
            result = run_scenario(sc, out)
    except UserError as e:  # found only while running: still name the scenario file
        if str(e).startswith(str(scenario)):
            raise
        raise UserError(f"{scenario}: {e}") from None
    rows = result.get("summary") or result.get("rows") or []
    cols = result.get("summary_columns")
    if rows_shown < 0:
        raise UserError(f"--rows must be >= 0, got {rows_shown}")
    print_rows(rows, f"{sc.name} ({sc.kind})", cols, limit=rows_shown,
               where=f"{out / 'result.json'} (\"summary\")", more="--rows 0")
    if sc.kind == "buckets" and result.get("sizes"):
        from simulator.layouts.engine_syntax import engine_lines
        from .tables import raw_lines

        say(f"chosen sizes ({len(result['sizes'])}): {', '.join(map(str, result['sizes']))}")
        raw_lines(engine_lines(result["sizes"]))
    say(f"wrote {out / 'result.json'} and {out / 'report.html'} in {time.perf_counter() - t0:.2f} s")


@app.command()
def predict(
    model: Optional[str] = typer.Option(None, "--model", help="model preset or config.json path"),
    batch: Optional[int] = typer.Option(None, "--batch", help="decode batch size (default 1, or the workload's)"),
    ctx: Optional[int] = typer.Option(None, "--ctx", help="context length, tokens (default 1024, or the workload's)"),
    workload: Optional[Path] = typer.Option(None, "--workload", help="imported workload (launchsim import-trace) "
                                            "instead of --model"),
    fusion: Optional[V.Fusion] = choices.option(V.Fusion, None, "--fusion", help="fusion level (imported "
                                                "workload: none or compiled)  [default: fused, vLLM V1's; imported "
                                                "workload: none, as traced]", what="fusion level", field="fusion"),
    graph: V.GraphMode = choices.option(V.GraphMode, V.DEFAULT_GRAPH, "--graph", help="CUDA-graph mode (vLLM V1's "
                                        "default)", what="graph mode", field="graph"),
    profile: Optional[str] = typer.Option(None, "--profile", help="profile name or path (default h200)"),
    engine: V.Engine = choices.option(V.Engine, V.Engine.FAST, "--engine", help="step engine (des: the SimPy "
                                      "reference)", what="engine", field="engine"),
    replicates: int = typer.Option(0, "--replicates", help="host-noise replicates for a p10/p50/p90 band"),
    seed: int = typer.Option(0, "--seed", help="seed for host-noise replicates"),
    prefill_seqs: int = typer.Option(0, "--prefill-seqs", help="mixed step: sequences also prefilling"),
    prefill_len: int = typer.Option(0, "--prefill-len", help="mixed step: tokens each prefilling sequence adds"),
    steps: int = typer.Option(0, "--steps", help="simulate N consecutive steps of the engine loop (host work "
                              "around each forward: schedule, input copies, sampling, .tolist(), detokenise); 0 = "
                              "one forward alone"),
    layout: Optional[str] = typer.Option(None, "--layout", help="captured sizes (a preset name, 1,2,4,8, ...): the "
                                         "step pads to one, or runs eager above the largest (default: every size "
                                         "captured, no padding)"),
    attention_backend: V.AttentionBackend = choices.option(
        V.AttentionBackend, V.AttentionBackend.FLASHINFER, "--attention-backend", help="attention backend: fa3 runs a "
        "mixed step (--prefill-seqs) under --graph full as one full graph; flashinfer, fa2, triton run it eager",
        what="attention backend"),
    prefill_layout: Optional[str] = typer.Option(None, "--prefill-layout", help="prefill (token-count) sizes a "
                                                 "mixed step run piecewise pads to: sglang_pcg, sglang_pcg:M or a "
                                                 "list (default: the --layout sizes)"),
    scheduling: Optional[V.Scheduling] = choices.option(V.Scheduling, None, "--scheduling", help="with --steps: "
                                                        "the engine loop's scheduling (default sync)",
                                                        what="scheduling", choices=V.LOOP_SCHEDULING),
    sampling: Optional[V.Sampling] = choices.option(V.Sampling, None, "--sampling", help="with --steps: the "
                                                    "sampling each step runs (default greedy)", what="sampling"),
    report: Optional[Path] = typer.Option(None, "--report", help="with --steps: write an HTML page with the loop's "
                                          "two-lane CPU/GPU timeline across its steps (overlap under async)"),
    tp: int = typer.Option(1, "--tp", help="tensor-parallel GPUs (1, 2, 4, 8): per-GPU shard of the model plus an "
                           "all-reduce per attention and MLP block (collective figures published, unmeasured)"),
    dtype: V.Dtype = choices.option(V.Dtype, V.Dtype.BF16, "--dtype", what="dtype", field="dtype", help="weights (fp8: e4m3, per-tensor scales: fp8 GEMM "
                              "tables, activation-quant kernels, 1-byte weights)"),
    kv_dtype: V.Dtype = choices.option(V.Dtype, V.Dtype.BF16, "--kv-dtype", help="KV cache (fp8: 1 byte per element)", what="KV-cache dtype", field="kv_dtype"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
) -> None:
    """Predict one decode (or mixed decode + prefill) step: step time, CPU/GPU split, kernels, launches.
    With --steps N: the steady-state step of the engine loop (step_ms), its host work per step and which lane
    bounds it (cpu: the forward's launches, gpu, or engine: the engine's own host work)."""
    from simulator.engine.predict import predict as _predict
    from simulator.common import limits as L
    from .checks import count, ctx_fits, seed as check_seed, workload_fusion

    count("--prefill-seqs", prefill_seqs, L.MAX_BATCH, low=0)
    count("--prefill-len", prefill_len, L.MAX_CTX, low=0)
    count("--steps", steps, 10_000, low=0)
    from simulator.model.parallel import shard, tp_fields

    from simulator.model.dtype import dtype_fields, with_dtype

    if (dtype, kv_dtype) != ("bf16", "bf16") and (workload is not None or model is None):
        raise UserError("--dtype/--kv-dtype need --model (imported workloads keep their traced kernels)")
    if tp != 1 and (workload is not None or model is None):
        raise UserError("--tp needs --model (imported workloads are single-GPU traces)")
    if report is not None and not steps:
        raise UserError("--report draws the engine loop: it needs --steps N")
    for flag, v in (("--scheduling", scheduling), ("--sampling", sampling)):
        if v is not None and not steps:  # honoured only by the engine loop: refused, never ignored
            raise UserError(f"{flag} sets the engine loop around the forward: it needs --steps N")
    scheduling = scheduling or V.Scheduling.SYNC
    sampling = sampling or V.Sampling.GREEDY
    if steps and engine == V.Engine.DES and steps > DES_MAX_STEPS:
        raise UserError(f"--steps {steps} with --engine des: the SimPy reference engine keeps every event of the "
                        f"loop in memory (about 0.7 MB per step of an eager 0.6B model); at most {DES_MAX_STEPS} "
                        f"steps with it. --engine fast gives the same figures (tests/engine check it) for any count")
    if steps and (workload is not None or model is None):
        raise UserError("--steps needs --model (the engine loop is not simulated for imported workloads yet)")
    if layout is not None and (workload is not None or model is None):
        raise UserError("--layout needs --model (imported workloads are not padded)")
    if layout is not None and steps:
        raise UserError("--layout and --steps together are not supported yet: the engine loop runs unpadded")
    routed = attention_backend != V.AttentionBackend.FLASHINFER or prefill_layout is not None
    if routed and (workload is not None or model is None or steps):
        raise UserError("--attention-backend and --prefill-layout need --model and a single forward (no --steps, "
                        "no --workload)")
    prefill_sizes = None
    if prefill_layout is not None:
        from simulator.layouts.prefill import parse_prefill_layout
        from .checks import named

        with named("--prefill-layout"):
            prefill_sizes = parse_prefill_layout(prefill_layout)
    if fusion is None:  # one set of defaults (vocab.DEFAULT_FUSION); an imported workload keeps its traced kernels
        fusion = V.Fusion.NONE if (workload is not None or model is None) else V.DEFAULT_FUSION
    if workload is not None or model is None:
        from .trace import predict_workload_cmd

        count("--replicates", replicates, L.MAX_REPLICATES, low=0)  # not fields of the workload kind
        check_seed("--seed", seed)
        workload_fusion(fusion)
        if workload is not None and model is None:
            workload_scenario(workload, profile, fusion, graph, batch, ctx, engine)
        return predict_workload_cmd(model, workload, batch, ctx, fusion.value, graph.value, profile, engine.value,
                                    replicates, seed, prefill_seqs, as_json)
    if (prefill_seqs > 0) != (prefill_len > 0):
        raise UserError("--prefill-seqs and --prefill-len must both be positive (a mixed step) or both 0")
    sc = step_scenario(model, profile, fusion, graph, batch, ctx, engine, replicates, seed, tp, dtype, kv_dtype)
    from simulator.model.models import load_model
    from simulator.model.profile import load_profile
    from simulator.model.workload import StepShape

    batch, ctx, fusion, graph, engine = sc.batch[0], sc.ctx, sc.fusion[0], sc.graph[0], sc.engine
    m = shard(with_dtype(load_model(sc.model), sc.dtype, sc.kv_dtype), tp)  # resolved by step_scenario
    prof = load_profile(sc.profile)
    if prefill_len > 1:
        ctx_fits(m, ctx, prefill_len)
    shape = StepShape(batch, ctx, prefill_seqs, prefill_len)
    sizes = None
    if layout is not None:
        from simulator.layouts.buckets import parse_layout

        sizes = parse_layout(layout)
    p = _predict(m, batch, ctx, fusion, graph, prof, engine, replicates, seed, shape=shape, sizes=sizes,
                 backend=attention_backend.value, prefill_sizes=prefill_sizes)
    d = {"model": model, "batch": batch, "ctx": ctx, "fusion": fusion, "engine": engine, **p.as_dict(),
         **tp_fields(m, prof), **dtype_fields(m)}
    if layout is not None or routed:  # where routing.route sent the step (graph: the mode it ran in)
        d.update(layout=layout, requested_graph=graph, padded=p.route.padded)
    if routed:
        d.update(attention_backend=attention_backend.value, prefill_layout=prefill_layout)
    if prefill_seqs:
        d.update(prefill_seqs=prefill_seqs, prefill_len=prefill_len, tokens=shape.tokens)
    if steps:
        from simulator.engine.steploop import predict_loop

        loop, fwd = predict_loop(m, batch, ctx, fusion, graph, prof, engine, steps, scheduling.value, sampling.value,
                                 shape)
        d.update(forward_step_ms=d["step_ms"], forward_bound=d["bound"], sampling=sampling.value, **loop.as_dict())
        if report is not None:
            _loop_report(report, d, loop.timeline)
    if as_json:
        print(dumps(d))
    else:
        from .tables import say

        say(V.defaults_note(fusion, graph))
        print_prediction(d)


DES_MAX_STEPS = 500  # predict --steps under --engine des: 10,000 eager steps took ~100 s and 6.8 GiB (issue 22)
STEP_FLAGS = {"model": "--model", "profile": "--profile", "fusion": "--fusion", "graph": "--graph", "batch": "--batch",
              "ctx": "--ctx", "engine": "--engine", "replicates": "--replicates", "seed": "--seed",
              "tensor_parallel_size": "--tp", "dtype": "--dtype", "kv_dtype": "--kv-dtype"}


def step_scenario(model: str, profile, fusion, graph, batch, ctx, engine, replicates: int, seed: int, tp: int,
                  dtype: str = "bf16", kv_dtype: str = "bf16"):
    """`predict`'s flags as the `step` scenario of one grid point (config/step.py), validated and resolved as a
    `kind: step` file is (model, profile, context against the model's limit); errors name the flag and field."""
    from simulator.config.step import StepScenario
    from .flags import scenario_from_flags

    given = {"model": model, "profile": profile, "fusion": fusion, "graph": graph, "batch": batch, "ctx": ctx,
             "engine": engine, "replicates": replicates, "seed": seed, "tensor_parallel_size": tp, "dtype": dtype,
             "kv_dtype": kv_dtype}
    data = {"kind": "step", "name": "predict", "model": model, "profile": profile, "fusion": [fusion],
            "graph": [graph], "engine": engine, "replicates": replicates, "seed": seed, "tensor_parallel_size": tp,
            "dtype": dtype, "kv_dtype": kv_dtype}
    if batch is not None:
        data["batch"] = [batch]
    if ctx is not None:
        data["ctx"] = ctx
    return scenario_from_flags(StepScenario, data, STEP_FLAGS, given)


WORKLOAD_FLAGS = {"workload": "--workload", "profile": "--profile", "fusion": "--fusion", "graph": "--graph",
                  "batch": "--batch", "ctx": "--ctx", "engine": "--engine"}


def workload_scenario(workload: Path, profile, fusion, graph, batch, ctx, engine):
    """`predict --workload`'s flags as the `workload` scenario (config/trace_workload.py), fields validated as a
    `kind: workload` file's are; the workload file itself is read (and its errors named) by the command."""
    from simulator.config.trace_workload import WorkloadScenario
    from .flags import scenario_from_flags

    given = {"workload": workload, "profile": profile, "fusion": fusion, "graph": graph, "batch": batch, "ctx": ctx,
             "engine": engine}
    data = {"kind": "workload", "name": "predict", "workload": str(workload), "profile": profile, "fusion": [fusion],
            "graph": [graph], "engine": engine, "batch": None if batch is None else [batch], "ctx": ctx}
    return scenario_from_flags(WorkloadScenario, data, WORKLOAD_FLAGS, given, check=False)


def _loop_report(path: Path, d: dict, tl) -> None:
    """The engine loop's CPU and GPU lanes across its steps (at most 4,000 launches drawn)."""
    from ..report import charts
    from ..report.html import write_html

    if path.suffix.lower() not in (".html", ".htm"):
        raise UserError(f"--report {path}: the report is an HTML file (name it .html)")
    n = min(tl.plan.launches, 4000)
    title = (f"{d['model']} batch {d['batch']}, {d['graph']} graph, {d['steps']} steps, {d['scheduling']} "
             f"scheduling: step {d['step_ms']:.3f} ms, bound {d['bound']}")
    note = (f"host work per step {d['host_ms_per_step']:.3f} ms (engine {d['engine_host_ms_per_step']:.3f} ms), "
            f"GPU per step {d['gpu_ms_per_step']:.3f} ms, host waiting {d['host_wait_ms_per_step']:.3f} ms; "
            f"first {n} of {tl.plan.launches} launches drawn")
    try:
        write_html(path, "launchsim: engine loop", [charts.timeline_figure(tl, n, title)], intro=note)
    except OSError as e:
        raise UserError(f"--report {path}: cannot write the report ({e.strerror or e.__class__.__name__}"
                        f"{': ' + str(e.filename) if e.filename and str(e.filename) != str(path) else ''})") from None


@app.command()
def schema() -> None:
    """Print the JSON Schema of scenario files."""
    from ..config import scenario_json_schema

    print(scenario_json_schema())
