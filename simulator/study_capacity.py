"""Runs `capacity` scenarios: per configuration, the highest SLO-meeting arrival rate (serving.capacity) and the
replicas a target rate needs; then throughput-latency curves and the report.

Configurations are the product models x profiles x fusion x graph x layouts (under graph `none` the layout
does not matter and appears once, as "-"). Each configuration's step-time memo and KV capacity are built once
and reused across its rates and replications; configurations may run in parallel processes (`workers`), which
changes nothing in the figures (seeds are per replication, shared by every configuration and rate).
Writes DIR/result.json, DIR/capacity.csv (one row per configuration), DIR/curves.csv (every simulated rate)
and DIR/report.html.
"""

from __future__ import annotations

import html
import itertools
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import plotly.graph_objects as go

from .progress import note
from .report import table_html, write_csv, write_html, write_json
from .serving.capacity import Slo, find_capacity
from .serving.kv import KVError
from .serving.replica import prepare
from .serving.setup import build_config, load_run_trace, mean_metrics, run_replications, start_rate

CURVE_KEYS = ("rate", "meets", "why", "throughput_req_s", "throughput_tok_s", "ttft_p50_s", "ttft_p90_s", "ttft_p99_s",
              "tpot_p50_ms", "tpot_p90_ms", "tpot_p99_ms", "gpu_busy_frac", "cpu_bound_step_share", "padding_waste",
              "kv_util_mean", "mean_decode_batch", "preemptions", "unfinished")
SUMMARY_COLUMNS = ["config", "status", "best_rate", "throughput_tok_s", "ttft_p99_s", "tpot_p99_ms", "replicas",
                   "kv_gib", "graph_gib", "runs"]


def configurations(sc) -> list[dict]:
    out = []
    for model, prof, fusion, graph in itertools.product(sc.models, sc.profiles, sc.fusion, sc.graph):
        layouts = [None] if graph == "none" else sc.layouts
        for lay in layouts:
            out.append({"model": model, "profile": prof, "fusion": fusion, "graph": graph,
                        "layout": None if lay is None else lay.sizes,
                        "layout_label": "-" if lay is None else lay.label,
                        "layout_note": "" if lay is None else lay.note})
    return out


def config_name(c: dict, many_profiles: bool) -> str:
    prof = f" {c['profile_name']}" if many_profiles else ""
    lay = "" if c["graph"] == "none" else f" [{c['layout_label']}]"
    return f"{c['model']}{prof} {c['fusion']} {c['graph']}{lay}"


def _search_one(args) -> dict:
    sc, c = args
    cfg = build_config(sc, c["model"], c["profile"], c["fusion"], c["graph"], c["layout"] or "vllm", c["layout_label"])
    try:
        prep = prepare(cfg)
    except KVError as e:  # weights + graphs + workspace leave no KV cache: the configuration cannot serve
        return {**c, "profile_name": cfg.profile.name, "status": "none", "best_rate": None, "fail_rate": None,
                "message": str(e), "runs": 0, "replicas": None, "sizes": list(cfg.sizes), "step_evals": 0,
                "kv": {"kv_blocks": 0, "kv_tokens": 0, "kv_gib": 0.0, "graph_gib": 0.0, "capture_s": 0.0, "graphs": 0},
                "best": {k: None for k in CURVE_KEYS}, "curve": []}
    trace = load_run_trace(sc)
    slo = Slo(sc.slo.percentile, sc.slo.ttft_s, sc.slo.tpot_ms)
    s = sc.search

    def evaluate(rate: float) -> dict:
        note(f"{config_name({**c, 'profile_name': ''}, False)}: trying {rate:.4g} req/s")
        return mean_metrics(run_replications(sc, cfg, rate, prep, trace))

    start = s.start or start_rate(cfg, prep, sc)
    res = find_capacity(evaluate, slo, start, s.rate_min, s.rate_max, s.tolerance, s.max_runs)
    points = {p["rate"]: p for p in res.points}
    if res.best_rate:
        for f in sc.curve_fractions:
            r = res.best_rate * f
            if r not in points and s.rate_min <= r:
                ok, why = slo.check(m := evaluate(r))
                points[r] = {"rate": r, "meets": ok, "why": why, **m}
    best = points.get(res.best_rate, {}) if res.best_rate else {}
    return {
        **c, "profile_name": cfg.profile.name, "status": res.status, "best_rate": res.best_rate,
        "fail_rate": res.fail_rate, "message": res.message, "runs": res.runs,
        "replicas": res.replicas(sc.target_rate), "kv": prep.kv.as_dict(), "sizes": list(cfg.sizes),
        "best": {k: best.get(k) for k in CURVE_KEYS},
        "curve": [{k: points[r].get(k) for k in CURVE_KEYS} for r in sorted(points)],
        "step_evals": prep.timer.misses,
    }


def run_capacity_scenario(sc, out: Path | None) -> dict:
    cfgs = configurations(sc)
    workers = sc.workers or os.cpu_count() or 1
    jobs = [(sc, c) for c in cfgs]
    from .progress import task

    with task(f"{sc.name}: capacity search", total=len(jobs)) as advance:
        if workers > 1 and len(jobs) > 1:
            with ProcessPoolExecutor(max_workers=min(workers, len(jobs))) as ex:
                found = []
                for f in ex.map(_search_one, jobs):
                    found.append(f)
                    advance()
        else:
            found = []
            for j in jobs:
                found.append(_search_one(j))
                advance()
    many = len({f["profile_name"] for f in found}) > 1
    rows = []
    for f in found:
        f["config"] = config_name(f, many)
        b = f["best"]
        rows.append({"config": f["config"], "status": _status_text(f), "best_rate": f["best_rate"],
                     "throughput_tok_s": b.get("throughput_tok_s"), "ttft_p99_s": b.get("ttft_p99_s"),
                     "tpot_p99_ms": b.get("tpot_p99_ms"), "replicas": f["replicas"],
                     "kv_gib": f["kv"]["kv_gib"], "graph_gib": f["kv"]["graph_gib"],
                     "capture_s": f["kv"]["capture_s"], "graphs": f["kv"]["graphs"], "runs": f["runs"],
                     "layout_note": f["layout_note"], "message": f["message"]})
    slo = Slo(sc.slo.percentile, sc.slo.ttft_s, sc.slo.tpot_ms)
    result = {"scenario": sc.model_dump(mode="json"), "slo": slo.describe(), "target_rate": sc.target_rate,
              "tolerance": sc.search.tolerance, "configs": found, "summary": rows,
              "summary_columns": SUMMARY_COLUMNS, "no_rate_meets": [f["config"] for f in found if f["status"] == "none"]}
    if out is not None:
        out = Path(out)
        write_json(out / "result.json", result)
        write_csv(out / "capacity.csv", rows)
        write_csv(out / "curves.csv", [{"config": f["config"], **p} for f in found for p in f["curve"]])
        _report(out / "report.html", sc, found, rows, slo)
    return result


def _status_text(f: dict) -> str:
    return {"ok": "meets", "none": "NO RATE MEETS THE SLOs", "at_max": "meets at rate_max"}[f["status"]]


def _report(path: Path, sc, found: list[dict], rows: list[dict], slo: Slo) -> None:
    p = sc.slo.percentile
    figs = []
    for key, limit, title, unit in (
        (f"tpot_p{p}_ms", sc.slo.tpot_ms, f"TPOT p{p} vs throughput", "ms per output token"),
        (f"ttft_p{p}_s", sc.slo.ttft_s, f"TTFT p{p} vs throughput", "seconds"),
    ):
        fig = go.Figure()
        for f in found:
            pts = [q for q in f["curve"] if q.get(key) is not None]
            fig.add_trace(go.Scatter(
                x=[q["throughput_req_s"] for q in pts], y=[q[key] for q in pts], mode="lines+markers",
                name=f["config"], text=[f"offered {q['rate']:.3g} req/s, {'meets' if q['meets'] else 'fails'}"
                                        for q in pts]))
        xs = [q["throughput_req_s"] for f in found for q in f["curve"] if q.get(key) is not None]
        if limit is not None and xs:  # a trace, not add_hline: hline annotations misplace on log axes
            fig.add_trace(go.Scatter(x=[min(xs), max(xs)], y=[limit, limit], mode="lines", name=f"SLO {limit:g}",
                                     line=dict(dash="dash", color="red")))
        fig.update_layout(title=f"{title} (each point one simulated rate; dashed: the SLO)",
                          xaxis_title="achieved throughput (requests/s)", yaxis_title=unit, height=450)
        fig.update_yaxes(type="log")
        figs.append(fig)
    bar = go.Figure(go.Bar(x=[f["config"] for f in found], y=[f["best_rate"] or 0 for f in found],
                           text=[(f"{f['best_rate']:.3g}" if f["best_rate"] else "none") for f in found],
                           textposition="outside"))
    bar.update_layout(title=f"Highest arrival rate meeting {slo.describe()} (bisection tolerance "
                            f"{sc.search.tolerance:g})", yaxis_title="requests/s per replica", height=420)
    figs.append(bar)
    notes = []
    for f in found:
        if f["status"] == "none":
            notes.append(f"<p><b>No arrival rate meets the SLOs for {html.escape(f['config'])}:</b> "
                         f"{html.escape(f['message'])}</p>")
    for f in found:
        if f["layout_note"]:
            notes.append(f"<p class='note'>Layout '{html.escape(f['layout_label'])}': "
                         f"{html.escape(f['layout_note'])}</p>")
    target = (f" Replicas: ceil({sc.target_rate:g} req/s / best rate), traffic split evenly."
              if sc.target_rate else "")
    intro = (f"{sc.description} SLO: {slo.describe()}. Each configuration's best rate is the highest that met the "
             f"SLO in a bisection stopped at relative tolerance {sc.search.tolerance:g}; {sc.duration_s:g} s of "
             f"arrivals per run, {sc.replications} replication(s), same seeds for every configuration.{target}")
    write_html(path, f"launchsim capacity: {sc.name}", figs,
               list(dict.fromkeys(notes)) + [table_html(rows, "Best rate per configuration"),
                                             table_html([{"config": f["config"], **q} for f in found for q in f["curve"]],
                                                        "Every simulated rate")], intro=intro)
