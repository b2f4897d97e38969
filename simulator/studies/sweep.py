"""Runs `sweep` scenarios: expands the grid into points, runs them (sweep.run_points), and writes
OUT/results.csv, OUT/results.json, OUT/result.json and a self-contained OUT/report.html with the charts:
padding waste vs pinned graph memory per layout, expected step time per layout, speedup of each
fusion/graph toggle over eager, and start-up capture time per layout."""

from __future__ import annotations

import itertools
from pathlib import Path

import plotly.graph_objects as go

from simulator.layouts.buckets import parse_layout
from simulator.config.sweep import NamedDistribution, SweepScenario
from simulator.layouts.distribution import BatchDistribution
from simulator.report.html import table_html, write_csv, write_html
from simulator.common.jsonfile import indented, write_json
from simulator.sweep.grid import Point, point_for, run_points

MiB = 1 << 20


def build_distribution(d: NamedDistribution) -> BatchDistribution:
    return d.build(d.name)


def build_points(sc: SweepScenario) -> list[Point]:
    from simulator.model.resolve import resolve_model
    from simulator.layouts.prefill import parse_prefill_layout

    layouts = [(lay.name, tuple(parse_layout(lay.sizes, lay.max_size, lay.max_num_seqs))) for lay in sc.layouts]
    dists = [build_distribution(d) for d in sc.distributions]
    mixed = (sc.mixed.share, sc.mixed.prefill_seqs, sc.mixed.prefill_len) if sc.mixed and sc.mixed.share else None
    pre = parse_prefill_layout(sc.prefill_layout)
    prefill = None if pre is None else tuple(pre)
    pts = []
    for mname, prof in itertools.product(sc.models, sc.profiles):
        proto = point_for(resolve_model(mname, sc.dtype, sc.kv_dtype, 1, sc.assume_family), prof, fusion="", graph="", layout="", sizes=(), distribution="",
                          dist_sizes=(), dist_weights=(), budget_bytes=0, ctx=sc.ctx)
        for fusion, graph, (lname, sizes), dist, budget in itertools.product(
                sc.fusion, sc.graph, layouts, dists, sc.budgets):
            pts.append(Point.of(proto.model, prof, proto.profile_digest, fusion, graph, lname, sizes, dist.label,
                             dist.sizes, dist.weights, budget, sc.ctx, mixed, sc.shared_pool, sc.gpu_util,
                             sc.workspace_bytes, sc.attention_backend, prefill, sc.impl, sc.kv_cache,
                             sc.max_cache_len, sc.host_canary_us))
    return pts


TABLE_ROWS = 2000  # rows of a report table; the CSV and JSON files hold every point
SUMMARY_COLUMNS = ["model", "fusion", "graph", "layout", "dist", "graph_MiB", "budgets", "waste", "step_ms",
                   "speedup", "capture_s"]


def summarize_rows(rows: list[dict]) -> list[dict]:
    """One compact row per point without the budget axis; `budgets` lists each budget's check."""
    out: dict[tuple, dict] = {}
    for r in rows:
        k = (r["model"], r["profile"], r["fusion"], r["graph"], r["layout"], r["distribution"])
        s = out.get(k)
        if s is None:
            s = out[k] = {"model": r["model"], "fusion": r["fusion"], "graph": r["graph"], "layout": r["layout"],
                          "dist": r["distribution"], "graph_MiB": r["graph_bytes"] / MiB, "budgets": "",
                          "waste": r["waste"], "step_ms": r["expected_step_ms"], "speedup": r["speedup_vs_eager"],
                          "capture_s": r["capture_s"]}
        check = f"{r['budget_bytes'] / MiB:g}MiB:{'ok' if r['fits_budget'] else 'OVER'}"
        s["budgets"] = f"{s['budgets']} {check}".strip()
    return list(out.values())


def run_sweep_scenario(sc: SweepScenario, out: Path | None, progress: bool = True) -> dict:
    points = build_points(sc)
    run = run_points(points, out, sc.executor, sc.workers, sc.chunk, progress=progress)
    rows = run.rows
    summary = summarize_rows(rows)
    over = [r for r in rows if not r["fits_budget"]]
    result = {
        "scenario": sc.model_dump(mode="json"),
        "points": len(points), "computed": run.computed, "cached": run.cached,
        "step_evals": run.step_evals, "step_lookups": run.step_lookups, "steps_simulated": run.simulated_steps, "wall_s": run.wall_s,
        "over_budget": len(over),
        "rows": rows,
        "summary": summary,
        "summary_columns": SUMMARY_COLUMNS,
    }
    if out is not None:
        write_csv(out / "results.csv", rows)
        rows_text = indented(rows)  # written twice: alone and inside result.json
        write_json(out / "results.json", rows, {id(rows): rows_text})
        write_json(out / "result.json", result, {id(rows): rows_text})
        write_html(out / "report.html", f"launchsim: {sc.name}", figures(rows),
                   [memory_table(rows), table_html(rows, "All grid points", limit=TABLE_ROWS, rest="results.csv")],
                   intro=f"{sc.description} {len(points)} points ({run.computed} computed, {run.cached} from "
                         f"the cache); profiles: {', '.join(sc.profiles)}; context {sc.ctx}.")
    return result


def memory_table(points: list[dict]) -> str:
    seen, rows = set(), []
    for r in points:
        k = (r["model"], r["fusion"], r["graph"], r["layout"], r["budget_bytes"])
        if k in seen or r["graph"] == "none":
            continue
        seen.add(k)
        rows.append({"model": r["model"], "fusion": r["fusion"], "graph": r["graph"], "layout": r["layout"],
                     "graphs": r["graphs"], "graph_MiB": r["graph_bytes"] / MiB,
                     "budget_MiB": r["budget_bytes"] / MiB,
                     "check": "ok" if r["fits_budget"] else "OVER BUDGET", "kv_tokens": r["kv_tokens"],
                     "capture_s": r["capture_s"]})
    return table_html(rows, "Pinned graph memory against each budget", limit=TABLE_ROWS, rest="results.csv")


def _first(rows: list[dict], **fixed) -> list[dict]:
    return [r for r in rows if all(r[k] == v for k, v in fixed.items())]


def budget_lines(fig: go.Figure, xs: list[float]) -> None:
    """One dashed vertical line with a "budget X MiB" label per x, set in one layout update: the same shapes and
    annotations as `fig.add_vline(x, line_dash="dash", annotation_text=...)` per x, whose cost grows with the
    square of the number of lines (each call re-validates every shape already there)."""
    shapes = [{"type": "line", "x0": x, "x1": x, "xref": "x", "y0": 0, "y1": 1, "yref": "y domain",
               "line": {"dash": "dash"}} for x in xs]
    notes = [{"text": f"budget {x:g} MiB", "x": x, "xref": "x", "y": 1, "yref": "y domain", "showarrow": False,
              "xanchor": "left", "yanchor": "top"} for x in xs]
    fig.update_layout(shapes=list(fig.layout.shapes) + shapes, annotations=list(fig.layout.annotations) + notes)


def figures(rows: list[dict]) -> list[go.Figure]:
    if not rows:
        return []
    r0 = rows[0]
    base = _first(rows, profile=r0["profile"], budget_bytes=r0["budget_bytes"])
    graphs = [r for r in base if r["graph"] != "none"]
    figs = []
    # 1. padding waste vs pinned memory, per layout (one marker per model/graph/fusion/distribution)
    f1 = go.Figure()
    models = sorted({r["model"] for r in rows})
    symbols = ["circle", "square", "diamond", "triangle-up", "x", "star"]
    for lay in dict.fromkeys(r["layout"] for r in graphs):
        rs = [r for r in graphs if r["layout"] == lay]
        f1.add_trace(go.Scatter(
            x=[r["graph_bytes"] / MiB for r in rs], y=[100 * r["waste"] for r in rs], mode="markers", name=lay,
            marker=dict(size=10, symbol=[symbols[models.index(r["model"]) % len(symbols)] for r in rs]),
            text=[f"{r['model']} {r['fusion']}/{r['graph']} {r['distribution']}" for r in rs]))
    budget_lines(f1, sorted({r["budget_bytes"] / MiB for r in rows}))
    f1.update_layout(title="Padding waste vs pinned graph memory, per layout (marker shape: model)",
                     xaxis_title="pinned graph memory (MiB)", yaxis_title="padded rows / all rows (%)", height=480)
    figs.append(f1)
    # 2. expected step time per layout; 4. capture time per layout
    d0 = r0["distribution"]
    f2, f4 = go.Figure(), go.Figure()
    for (m, f, g) in dict.fromkeys((r["model"], r["fusion"], r["graph"]) for r in base):
        rs = _first(base, model=m, fusion=f, graph=g, distribution=d0)
        f2.add_trace(go.Bar(x=[r["layout"] for r in rs], y=[r["expected_step_ms"] for r in rs], name=f"{m} {f}/{g}"))
        if g != "none":
            f4.add_trace(go.Bar(x=[r["layout"] for r in rs], y=[r["capture_s"] for r in rs], name=f"{m} {f}/{g}"))
    f2.update_layout(title=f"Expected step time per layout (batch sizes: {d0})", yaxis_title="ms",
                     barmode="group", height=450)
    f4.update_layout(title="Start-up capture time per layout", yaxis_title="s", barmode="group", height=450)
    # 3. speedup of each toggle over eager (fusion none, graph none), first layout
    l0 = r0["layout"]
    f3 = go.Figure()
    for m in models:
        rs = _first(base, model=m, layout=l0, distribution=d0)
        f3.add_trace(go.Bar(x=[f"{r['fusion']}/{r['graph']}" for r in rs], y=[r["speedup_vs_eager"] for r in rs],
                            name=m))
    f3.update_layout(title=f"Speedup of each fusion/graph toggle over eager (layout {l0}, batch sizes {d0})",
                     yaxis_title="eager step time / step time", barmode="group", height=450)
    return [f1, f2, f3, f4]
