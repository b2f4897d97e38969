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


from simulator.report import charts
from simulator.report import figjson as fj
from simulator.report.progress import note
from simulator.report.html import human, table_html, write_csv, write_html
from simulator.common.jsonfile import write_json
from simulator.serving.capacity import BOUND_MARGIN, Slo, find_capacity, throughput_bound
from simulator.serving.kv import KVError
from simulator.serving.replica import prepare
from simulator.engine.graph_memory import GiB
from simulator.serving.setup import build_config, load_run_trace, mean_metrics, merged_batch_log, run_replications, start_rate

CURVE_KEYS = ("rate", "meets", "why", "throughput_req_s", "throughput_tok_s", "ttft_p50_s", "ttft_p90_s", "ttft_p99_s",
              "tpot_p50_ms", "tpot_p90_ms", "tpot_p99_ms", "gpu_busy_frac", "cpu_bound_step_share", "padding_waste",
              "kv_util_mean", "mean_decode_batch", "preemptions", "unfinished", "arrival_rate", "queue_end",
              "backlog_growth")
SPEC_KEYS = ("tokens_per_step", "tokens_per_step_expected")  # with spec_tokens: measured and E[accepted] + 1
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
                        "layout_note": "" if lay is None else lay.note,
                        "optimize_at": None if lay is None or lay.optimize is None else lay.optimize.model_dump()})
    return out


def config_name(c: dict, many_profiles: bool) -> str:
    prof = f" {c['profile_name']}" if many_profiles else ""
    lay = "" if c["graph"] == "none" else f" [{c['layout_label']}]"
    return f"{c['model']}{prof} {c['fusion']} {c['graph']}{lay}"


def _search_one(args) -> dict:
    sc, c = args
    return _search(sc, c, c["layout"] or "vllm")


def _search(sc, c: dict, layout, start: float | None = None) -> dict:
    """Capacity search of configuration `c` with capture sizes `layout` (first rate tried: `start`, else the
    scenario's, else an estimate)."""
    cfg = build_config(sc, c["model"], c["profile"], c["fusion"], c["graph"], layout, c["layout_label"])
    try:
        prep = prepare(cfg)
    except KVError as e:  # weights + graphs + workspace leave no KV cache: the configuration cannot serve
        return {**c, "profile_name": cfg.profile.name, "status": "none", "best_rate": None, "fail_rate": None,
                "message": str(e), "runs": 0, "replicas": None, "sizes": list(cfg.sizes), "step_evals": 0,
                "kv": {"kv_blocks": 0, "kv_tokens": 0, "kv_gib": 0.0, "graph_gib": 0.0, "capture_s": 0.0, "graphs": 0},
                "best": {k: None for k in CURVE_KEYS}, "curve": []}
    trace = load_run_trace(sc)
    slo = _slo(sc)
    s = sc.search

    def evaluate(rate: float) -> dict:
        note(f"{config_name({**c, 'profile_name': ''}, False)}: trying {rate:.4g} req/s")
        return mean_metrics(run_replications(sc, cfg, rate, prep, trace))

    start = start or s.start or start_rate(cfg, prep, sc)
    bound = replica_bound(cfg, prep, sc)
    res = find_capacity(evaluate, slo, start, s.rate_min, s.rate_max, s.tolerance, s.max_runs,
                        bound=BOUND_MARGIN * bound)
    points = {p["rate"]: p for p in res.points}
    if res.best_rate:
        for f in sc.curve_fractions:
            r = res.best_rate * f
            if r not in points and s.rate_min <= r:
                ok, why = slo.check(m := evaluate(r))
                points[r] = {"rate": r, "meets": ok, "why": why, **m}
    best = points.get(res.best_rate, {}) if res.best_rate else {}
    keys = CURVE_KEYS + (SPEC_KEYS if sc.spec_tokens else ())
    return {
        **c, "profile_name": cfg.profile.name, "status": res.status, "best_rate": res.best_rate,
        "fail_rate": res.fail_rate, "message": res.message, "runs": res.runs,
        "replicas": res.replicas(sc.target_rate), "kv": prep.kv.as_dict(), "sizes": list(cfg.sizes),
        "best": {k: best.get(k) for k in keys},
        "curve": [{k: points[r].get(k) for k in keys} for r in sorted(points)],
        "step_evals": prep.timer.misses, "throughput_bound": bound,
    }


def _slo(sc) -> Slo:
    return Slo(sc.slo.percentile, sc.slo.ttft_s, sc.slo.tpot_ms, sc.stability.to_stability())


def replica_bound(cfg, prep, run) -> float:
    """`serving.capacity.throughput_bound` of this replica: decode batches 1, 2, 4, ... and max_num_seqs (with
    speculative decoding each step emits the acceptance model's expected tokens per sequence: the time per token is
    the verify + draft step over them)."""
    from simulator.serving.setup import _mean_len

    bs = sorted({min(1 << i, cfg.max_num_seqs) for i in range(cfg.max_num_seqs.bit_length() + 1)})
    tps = 1.0 if cfg.spec is None else cfg.spec.acceptance.tokens_per_step
    return throughput_bound(lambda b: prep.timer.decode(b, 1).step_s / tps, bs, _mean_len(run.output))


def _same_point(a: dict, b: dict) -> bool:
    return all(a[k] == b[k] for k in ("model", "profile", "fusion", "graph"))


def _optimize_one(args) -> dict:
    """An `optimize` layout: start from the layout it is optimized against (its capacity search `base`), then
    up to `iterations` rounds of: serve at the current layout's best rate, take the decode batch mix there
    (batch_log), optimize capture sizes for it under the base layout's graph memory and graph count (its largest
    size kept: mixed steps pad their token counts to the layout too), and search
    the new layout's capacity. Stops at a fixed point: the new layout's best rate is the rate it was optimized
    at (the operating point no longer moves), or the optimizer returns a layout already tried. The answer is the best of all candidates by best rate (then less graph memory), the base
    layout included: the optimized layout never loses to it, and the note says which won and why."""
    sc, c, base = args
    from simulator.layouts.distribution import from_histogram
    from simulator.studies.optimize import Inputs, run as optimize, setup as optimize_setup

    spec = c["optimize_at"]
    against = spec["against"]
    ctx = spec["ctx"] or max(1, int(round(_mean(sc.prompt) + _mean(sc.output) / 2)))
    base_sizes = [int(x) for x in base["sizes"]]
    # the largest size stays the base layout's (within max_num_seqs): the batch log counts decode-only steps, but
    # mixed prefill+decode steps of up to that many tokens replay piecewise graphs too, and lose them if the
    # layout stopped at the largest decode batch seen
    top = max([s for s in base_sizes if s <= sc.engine.max_num_seqs] or [max(base_sizes)])
    cands = [{**base, **{k: c[k] for k in ("layout", "layout_label", "optimize_at")}, "origin": against,
              "iteration": 0}]
    rounds, seen, fixed = [], {tuple(base_sizes)}, False
    cur, budget = cands[0], None
    trace = load_run_trace(sc)
    for it in range(1, spec["iterations"] + 1):
        if not cur["best_rate"]:
            rounds.append({"iteration": it, "served_rate": None, "note": "no rate met the SLOs: nothing to serve at"})
            break
        cfg = build_config(sc, c["model"], c["profile"], c["fusion"], c["graph"], cur["sizes"], c["layout_label"])
        note(f"{config_name({**c, 'profile_name': ''}, False)}: round {it}, serving at {cur['best_rate']:.4g} req/s")
        log = merged_batch_log(run_replications(sc, cfg, cur["best_rate"], prepare(cfg), trace))
        if not log:
            rounds.append({"iteration": it, "served_rate": cur["best_rate"], "note": "no decode-only steps"})
            break
        dist = from_histogram({r["batch"]: r["count"] for r in log}, f"batch log at {cur['best_rate']:.4g} req/s")
        inp = Inputs(dist, model=c["model"], profile=c["profile"], fusion=c["fusion"], graph=c["graph"], ctx=ctx,
                     max_graphs=len(base_sizes), max_size=max(top, dist.max_batch), cover_max_size=True,
                     opts=sc)  # the scenario's step options whole: dtypes, TP and recipe, as its serving runs use
        if budget is None:
            budget = optimize_setup(inp).memory(base_sizes)[0]
        inp.memory_budget = budget
        sizes = [int(x) for x in optimize(inp, frontier=False)["sizes"]]
        r = {"iteration": it, "served_rate": cur["best_rate"], "graphs": len(sizes),
             "sizes": " ".join(map(str, sizes))}
        if tuple(sizes) in seen:
            fixed = True
            rounds.append({**r, "best_rate": None, "note": "fixed point: a layout already tried"})
            break
        seen.add(tuple(sizes))
        served = cur["best_rate"]
        cur = {**_search(sc, c, sizes, start=served), "origin": "optimized", "iteration": it}
        cands.append(cur)
        same = cur["best_rate"] == served
        rounds.append({**r, "best_rate": cur["best_rate"], "graph_gib": cur["kv"]["graph_gib"],
                       "note": "fixed point: its best rate is the rate it was optimized at" if same else ""})
        if same:
            fixed = True
            break

    def key(f):
        return (f["best_rate"] or -1.0, -f["kv"]["graph_gib"], -f["iteration"])

    best = max(cands, key=key)
    b0 = cands[0]
    done = (f"fixed point after {len(rounds)} round(s)" if fixed else
            f"no fixed point within {len(rounds)} round(s)")
    tried = [f for f in cands[1:] if f["best_rate"] is not None]
    if best is b0:
        top = max(tried, key=key) if tried else None
        near = ""
        if top and b0["best_rate"] and top["best_rate"] >= b0["best_rate"] / (1 + sc.search.tolerance):
            near = f", within the bisection tolerance {sc.search.tolerance:g}"
        why = (f"kept {against}'s sizes: no optimized layout beat its "
               f"{_rate(b0['best_rate'])} req/s" + (f" (best optimized {_rate(top['best_rate'])} req/s{near})" if top
                                                    else "") + f"; {done}")
    else:
        tie = (f" (equal within the bisection tolerance {sc.search.tolerance:g}; the smaller graph memory decides)"
               if best["best_rate"] == b0["best_rate"] else "")
        why = (f"round {best['iteration']}'s layout: {_rate(best['best_rate'])} req/s vs {against} "
               f"{_rate(b0['best_rate'])} req/s{tie}, graph memory {best['kv']['graph_gib']:.3f} vs "
               f"{b0['kv']['graph_gib']:.3f} GiB; {done}")
    lead = (f"optimized at its own operating point against '{against}' (same graph memory and count, ctx "
            f"{ctx}): {why}.")
    return {**best, "layout_note": f"{lead} {c['layout_note']}".strip(), "layout_label": c["layout_label"],
            "optimize": {"against": against, "ctx": ctx, "memory_budget_gib": (budget or 0.0) / GiB,
                         "fixed_point": fixed, "chosen": "preset" if best is b0 else f"round {best['iteration']}",
                         "rounds": rounds, "note": why}}


def _rate(r) -> str:
    return "none" if r is None else f"{r:.4g}"


def _mean(lm) -> float:
    from simulator.serving.setup import _mean_len

    return _mean_len(lm)


def _run_jobs(fn, jobs: list, workers: int, advance) -> list:
    if workers > 1 and len(jobs) > 1:
        with ProcessPoolExecutor(max_workers=min(workers, len(jobs))) as ex:
            found = []
            for f in ex.map(fn, jobs):
                found.append(f)
                advance()
            return found
    found = []
    for j in jobs:
        found.append(fn(j))
        advance()
    return found


def run_capacity_scenario(sc, out: Path | None) -> dict:
    cfgs = configurations(sc)
    workers = sc.workers or os.cpu_count() or 1
    plain = [c for c in cfgs if not c["optimize_at"]]
    from simulator.report.progress import task

    with task(f"{sc.name}: capacity search", total=len(cfgs)) as advance:
        done = _run_jobs(_search_one, [(sc, c) for c in plain], workers, advance)
        by_id = {id(c): f for c, f in zip(plain, done)}
        opt = [c for c in cfgs if c["optimize_at"]]
        bases = [next(by_id[id(b)] for b in plain if _same_point(b, c)
                      and b["layout_label"] == c["optimize_at"]["against"]) for c in opt]
        for c, f in zip(opt, _run_jobs(_optimize_one, [(sc, c, b) for c, b in zip(opt, bases)], workers, advance)):
            by_id[id(c)] = f
    found = [by_id[id(c)] for c in cfgs]
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
                     "layout_note": f["layout_note"], "message": f["message"],
                     **({"tokens_per_step": b.get("tokens_per_step")} if sc.spec_tokens else {})})
    slo = _slo(sc)
    result = {"scenario": sc.model_dump(mode="json"), "slo": slo.describe(), "assumptions": assumptions(sc, slo), "target_rate": sc.target_rate,
              "tolerance": sc.search.tolerance, "configs": found, "summary": rows,
              "summary_columns": SUMMARY_COLUMNS, "no_rate_meets": [f["config"] for f in found if f["status"] == "none"]}
    if out is not None:
        out = Path(out)
        write_json(out / "result.json", result)
        write_csv(out / "capacity.csv", rows)
        write_csv(out / "curves.csv", [{"config": f["config"], **p} for f in found for p in f["curve"]])
        _report(out / "report.html", sc, found, rows, slo)
    return result


def assumptions(sc, slo) -> dict:
    """The run settings every configuration's figures depend on (printed in the report and by the command)."""
    from simulator.serving.setup import _spec

    e, a = sc.engine, sc.arrivals
    d = {"slo": slo.describe(), "stability": slo.stability.describe(),
         "arrivals": {"poisson": "poisson", "gamma": f"gamma, cv {a.cv:g}"}.get(a.process, f"trace {a.trace}")}
    if a.process != "trace":
        d.update(prompt_lengths=_spec(sc.prompt).describe(), output_lengths=_spec(sc.output).describe())
    d.update(tensor_parallel_size=sc.tensor_parallel_size, max_num_seqs=e.max_num_seqs,
             max_num_batched_tokens=e.max_num_batched_tokens, chunked_prefill=e.chunked_prefill,
             gpu_memory_utilization=e.gpu_memory_utilization, dtype=sc.dtype, kv_dtype=sc.kv_dtype,
             scheduling=sc.scheduling, duration_s=sc.duration_s, warmup_frac=sc.warmup_frac,
             drain_s=sc.drain_s if sc.drain_s is not None else sc.duration_s, replications=sc.replications,
             seed=sc.seed, bisection_tolerance=sc.search.tolerance,
             search=f"{sc.search.rate_min:g}..{sc.search.rate_max:g} req/s, capped at {BOUND_MARGIN:g} x each "
                    f"replica's throughput bound")
    return d


def _status_text(f: dict) -> str:
    return {"ok": "meets", "none": "NO RATE MEETS THE SLOs", "at_max": "meets at rate_max"}[f["status"]]


def _report(path: Path, sc, found: list[dict], rows: list[dict], slo: Slo) -> None:
    p = sc.slo.percentile
    figs = []
    for key, limit, title, unit in (
        (f"tpot_p{p}_ms", sc.slo.tpot_ms, f"TPOT p{p} vs throughput", "ms per output token"),
        (f"ttft_p{p}_s", sc.slo.ttft_s, f"TTFT p{p} vs throughput", "seconds"),
    ):
        fig = fj.figure()
        for f in found:
            pts = [q for q in f["curve"] if q.get(key) is not None]
            fj.add_trace(fig, fj.trace(
                "scatter", x=[q["throughput_req_s"] for q in pts], y=[q[key] for q in pts], mode="lines+markers",
                name=f["config"], text=[f"offered {q['rate']:.3g} req/s, {'meets' if q['meets'] else 'fails'}"
                                        for q in pts]))
        xs = [q["throughput_req_s"] for f in found for q in f["curve"] if q.get(key) is not None]
        if limit is not None and xs:  # a trace, not add_hline: hline annotations misplace on log axes
            fj.add_trace(fig, fj.trace("scatter", x=[min(xs), max(xs)], y=[limit, limit], mode="lines",
                                       name=f"SLO {limit:g}", line=dict(dash="dash", color="red")))
        fj.update_layout(fig, title=f"{title} (each point one simulated rate; dashed: the SLO)",
                         xaxis=dict(title="achieved throughput (requests/s)"), yaxis=dict(title=unit), height=450)
        charts.log_axis(fig, "y", [q[key] for f in found for q in f["curve"] if q.get(key) is not None]
                        + ([limit] if limit is not None else []))
        figs.append(fig)
    bar = fj.figure(fj.trace("bar", x=[f["config"] for f in found], y=[f["best_rate"] or 0 for f in found],
                             text=[(human(f["best_rate"]) if f["best_rate"] else "none") for f in found],
                             textposition="outside"),
                    title=f"Highest arrival rate meeting {slo.describe()} (bisection tolerance "
                          f"{sc.search.tolerance:g})", yaxis=dict(title="requests/s per replica"), height=420)
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
    rounds = [{"config": f["config"], "against": f["optimize"]["against"], **r} for f in found if f.get("optimize")
              for r in f["optimize"]["rounds"]]
    extra = [table_html(rounds, "Layouts optimized at their own operating point: serve at the best rate, optimize "
                                "for the batch mix there, re-check")] if rounds else []
    target = (f" Replicas: ceil({sc.target_rate:g} req/s / best rate), traffic split evenly."
              if sc.target_rate else "")
    intro = (f"{sc.description} SLO: {slo.describe()}. Each configuration's best rate is the highest that met the "
             f"SLO in a bisection stopped at relative tolerance {sc.search.tolerance:g}; {sc.duration_s:g} s of "
             f"arrivals per run, {sc.replications} replication(s), same seeds for every configuration.{target}")
    write_html(path, f"launchsim capacity: {sc.name}", figs,
               list(dict.fromkeys(notes)) + [table_html([{"assumption": k, "value": v} for k, v in
                                                         assumptions(sc, slo).items()], "Assumptions"),
                                             table_html(rows, "Best rate per configuration"),
                                             table_html([{"config": f["config"], **q} for f in found for q in f["curve"]],
                                                        "Every simulated rate")] + extra, intro=intro)
