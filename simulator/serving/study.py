"""Runs `serve` scenarios: replications of one replica under a request stream, and their report.

Writes DIR/result.json (settings, metrics, per-replication rows, batch log), DIR/metrics.csv (one row per
replication), DIR/batch_log.csv (`batch,count` of decode-only steps, input to `launchsim optimize --distribution`)
and DIR/report.html (batch-size histogram, TTFT and TPOT distributions, metrics table).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from simulator.report import charts
from simulator.report import figjson as fj
from simulator.report.html import table_html, write_csv, write_html
from simulator.common.jsonfile import write_json
from .setup import build_config, load_run_trace, mean_metrics, merged_batch_log, run_replications

SUMMARY_COLUMNS = ["replication", "throughput_req_s", "throughput_tok_s", "ttft_p99_s", "tpot_p99_ms", "gpu_busy_frac",
                   "padding_waste"]


def serve(sc) -> dict:
    """Run a `ServeScenario`; return the result dict (no files)."""
    from simulator.model.parallel import tp_fields

    t0 = time.perf_counter()
    cfg = build_config(sc, sc.model, sc.profile, sc.fusion, sc.graph, sc.layout)
    trace = load_run_trace(sc)
    from simulator.report.progress import task

    rate = sc.rate_used
    what = f"{rate:g} req/s" if rate is not None else "trace"
    with task(f"serve {sc.model} at {what}, {sc.duration_s:g} s simulated x {sc.replications}"):
        results = run_replications(sc, cfg, rate, trace=trace)
    metrics = mean_metrics(results)
    assumptions = describe_run(sc, cfg, rate)
    unstable = sc.stability.to_stability().check(metrics)  # the check capacity applies to every rate it tries
    metrics["saturated"] = bool(unstable)
    metrics["saturated_why"] = "; ".join(unstable)
    rows = [{"replication": i, **r.metrics, "simulated_s": r.simulated_s, "wall_s": r.wall_s}
            for i, r in enumerate(results)]
    return {
        "scenario": sc.model_dump(mode="json"),
        "assumptions": assumptions,
        "config": {**cfg.label(), "sizes": list(cfg.sizes) if cfg.graph != "none" else [],
                   "max_num_seqs": cfg.max_num_seqs, "max_num_batched_tokens": cfg.max_num_batched_tokens,
                   "chunked_prefill": cfg.chunked_prefill, "ctx_bucket": cfg.ctx_bucket,
                   "profile_source": cfg.profile.source, **tp_fields(cfg.model, cfg.profile)},
        "kv": results[0].kv,
        "metrics": metrics,
        "replications": rows,
        "batch_log": merged_batch_log(results),
        "simulated_s": sum(r.simulated_s for r in results),
        "wall_s": time.perf_counter() - t0,
        "step_evals": sum(r.step_evals for r in results),
        "events": sum(r.events for r in results),
        "summary": rows,
        "summary_columns": SUMMARY_COLUMNS,
        "_samples": [r.samples for r in results],
    }


def describe_run(run, cfg, rate: float | None) -> dict:
    """Every assumption a serving run makes, as printed in serve's summary and report (capacity's too)."""
    from .setup import _spec

    e = run.engine
    d = {}
    if hasattr(run, "rate"):
        d["rate"] = "trace's own" if rate is None else (f"{rate:g} req/s" + ("" if run.rate is not None else
                                                                             " (default)"))
    a = run.arrivals
    d["arrivals"] = {"poisson": "poisson", "gamma": f"gamma, cv {a.cv:g}"}.get(a.process, f"trace {a.trace}")
    if a.process != "trace":
        d["prompt_lengths"] = _spec(run.prompt).describe()
        d["output_lengths"] = _spec(run.output).describe()
    d.update(model=cfg.model.name, tensor_parallel_size=getattr(run, "tensor_parallel_size", 1), fusion=cfg.fusion,
             graph=cfg.graph, layout=cfg.layout_label, profile=cfg.profile.name, dtype=run.dtype, kv_dtype=run.kv_dtype,
             max_num_seqs=e.max_num_seqs, max_num_batched_tokens=e.max_num_batched_tokens,
             chunked_prefill=e.chunked_prefill, gpu_memory_utilization=e.gpu_memory_utilization,
             max_model_len=e.max_model_len or cfg.model.max_position_embeddings, scheduling=run.scheduling,
             duration_s=run.duration_s, warmup_frac=run.warmup_frac,
             drain_s=run.drain_s if run.drain_s is not None else run.duration_s, replications=run.replications,
             seed=run.seed)
    sp = cfg.spec
    if sp is not None:
        d["speculative_decoding"] = (
            f"k={sp.k} draft tokens, draft {sp.draft} ({sp.engine}'s draft graph mode), acceptance "
            f"{','.join(f'{a:g}' for a in sp.acceptance.probs)} (expected {sp.acceptance.tokens_per_step:.4g} tokens "
            "per verify step); each decode step is a verify step of n(1+k) tokens plus the draft loop, each request's "
            "verify steps drawn from the acceptance model (seeded); KV holds k+1 slots per sequence per step (an "
            "upper bound: rejected slots are not reused); mixed steps: the plain mixed step plus what the speculative "
            "decode step of its decode rows costs over a plain one (verify rows beside prefill rows not built)")
    return d


def run_serve_scenario(sc, out: Path | None) -> dict:
    result = serve(sc)
    samples = result.pop("_samples")
    if out is not None:
        write_outputs(result, samples, Path(out), sc.name, sc.description)
    return result


def write_outputs(result: dict, samples: list[dict], out: Path, name: str, description: str = "") -> None:
    write_json(out / "result.json", result)
    write_csv(out / "metrics.csv", result["replications"])
    write_csv(out / "batch_log.csv", result["batch_log"])
    c, m, kv = result["config"], result["metrics"], result["kv"]
    figs = [
        charts.bars_figure([str(r["batch"]) for r in result["batch_log"]],
                           [float(r["count"]) for r in result["batch_log"]],
                           "Decode-only steps by batch size (the batch-size log: batch_log.csv)", "steps"),
        _cdf_figure(samples, "ttft_s", "TTFT distribution (s)", "seconds"),
        _cdf_figure(samples, "tpot_ms", "TPOT distribution (ms per output token)", "ms"),
    ]
    fj.update_axes(figs[0], "x", type="category", title="decode batch (sequences)")
    figs[1:1] = _series_figures(samples)
    intro = (f"{description} {c['model']} on {c['profile']} ({c['profile_source']}), fusion {c['fusion']}, graph "
             f"{c['graph']}, layout {c['layout']}; offered {m.get('offered_rate', 0):.4g} req/s. KV cache "
             f"{kv['kv_gib']:.1f} GiB ({kv['kv_blocks']} blocks of 16 tokens), graph memory {kv['graph_gib']:.2f} GiB, "
             f"capture {kv['capture_s']:.1f} s. "
             + (f"SATURATED: the offered rate exceeds what the replica completes ({m['saturated_why']}); latency "
                "percentiles then measure the run's length, not the replica. " if m.get("saturated") else
                "Stable at this rate (completed throughput keeps up with arrivals, no growing queue). ")
             + f"Metrics over the window after warm-up; simulated "
             f"{result['simulated_s']:.0f} s in {result['wall_s']:.2f} s wall.")
    metrics_rows = [{"metric": k, "value": v} for k, v in m.items()]
    write_html(out / "report.html", f"launchsim serve: {name}", figs,
               [table_html([{"assumption": k, "value": v} for k, v in result.get("assumptions", {}).items()],
                           "Assumptions of this run (every input the figures depend on)"),
                table_html(metrics_rows, "Metrics (mean over replications)"),
                table_html(result["replications"], "Replications")], intro=intro)


def _series_figures(samples: list[dict]) -> list[dict]:
    """What a capacity planner looks at first: running batch, KV-cache use and queue length over time
    (replication 0, sampled about 500 times over the run)."""
    ser = (samples[0] if samples else {}).get("series") or {}
    if not ser.get("t"):
        return []
    fig = fj.subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.06,
                      subplot_titles=["running batch (sequences in the step)", "KV-cache blocks in use (%)",
                                      "queue (requests waiting)"])
    t = ser["t"]
    fj.add_trace(fig, fj.trace("scatter", x=t, y=ser["running"], mode="lines", name="running batch"), row=1, col=1)
    fj.add_trace(fig, fj.trace("scatter", x=t, y=[100 * v for v in ser["kv_used_frac"]], mode="lines",
                               name="KV use %"), row=2, col=1)
    fj.add_trace(fig, fj.trace("scatter", x=t, y=ser["queue"], mode="lines", name="queue"), row=3, col=1)
    fj.update_axes(fig, "y", rangemode="tozero")
    fj.update_axes(fig, "y", range=[0, 100], row=2, col=1)
    fj.update_axes(fig, "x", title="simulated time (s)", row=3, col=1)
    fj.update_layout(fig, title="Over time (replication 0)", height=620, showlegend=False)
    return [fig]


def _cdf_figure(samples: list[dict], key: str, title: str, unit: str) -> dict:
    fig = fj.figure()
    for i, s in enumerate(samples):
        x = np.sort(np.asarray(s.get(key, []), dtype=float))
        if not x.size:
            continue
        idx = np.unique(np.linspace(0, x.size - 1, min(x.size, 400)).astype(int))
        fj.add_trace(fig, fj.trace("scatter", x=x[idx], y=(idx + 1) / x.size, mode="lines", name=f"replication {i}"))
    fj.update_layout(fig, title=title, xaxis=dict(title=unit), yaxis=dict(title="share of requests"), height=380)
    return fig
