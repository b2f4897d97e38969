"""Runs `sweep` scenarios: expands the grid into points, runs them (sweep.run_points), and writes
OUT/results.csv, OUT/results.json, OUT/result.json and a self-contained OUT/report.html with the charts:
padding waste vs pinned graph memory per layout, expected step time per layout, speedup of each
fusion/graph toggle over eager, and start-up capture time per layout."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Iterator

from simulator.layouts.buckets import parse_layout
from simulator.config.sweep import NamedDistribution, SweepScenario
from simulator.layouts.distribution import BatchDistribution
from simulator.report import figjson as fj
from simulator.report.background import BackgroundWriter
from simulator.report.html import csv_text, report_text, table_html
from simulator.common.jsonfile import indented, indented_list
from simulator.sweep.grid import STEP_KNOBS, Point, budget_template, fill_budget, point_for, run_points

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
    knobs = {f: getattr(sc, f) for f in STEP_KNOBS if f != "prefill_sizes"}  # the scenario's, by the same names
    pts = []
    spec_memo: dict = {}  # spec_sizes of this scenario's layouts, made once per (layout, k, verify graph)
    for mname, prof in itertools.product(sc.models, sc.profiles):
        proto = point_for(resolve_model(mname, sc.dtype, sc.kv_dtype, 1, sc.assume_family), prof, fusion="", graph="", layout="", sizes=(), distribution="",
                          dist_sizes=(), dist_weights=(), budget_bytes=0, ctx=sc.ctx)
        for fusion, graph, (k, a), (lname, sizes), dist in itertools.product(
                sc.fusion, sc.graph, spec_axes(sc), layouts, dists):
            spec = dict(spec_tokens=0, acceptance=None, draft="eagle", spec_engine="vllm", decode_sizes=None)
            if k:
                sizes, eng, dsizes = spec_sizes(sc, lname, k, graph, spec_memo)
                spec = dict(spec_tokens=k, acceptance=a, draft=sc.draft, spec_engine=eng, decode_sizes=dsizes)
            pts += Point.at_budgets(Point.values(dict(
                model=proto.model, profile=prof, profile_digest=proto.profile_digest, fusion=fusion, graph=graph,
                layout=lname, sizes=sizes, distribution=dist.label, dist_sizes=dist.sizes, dist_weights=dist.weights,
                budget_bytes=None, ctx=sc.ctx, mixed=mixed, shared_pool=sc.shared_pool, gpu_util=sc.gpu_util,
                workspace_bytes=sc.workspace_bytes, prefill_sizes=prefill, **knobs, **spec)), sc.budgets)
    return pts


def spec_axes(sc: SweepScenario) -> list[tuple[int, float | None]]:
    """(k, acceptance) of every point: k = 0 once (acceptance does not apply), each k > 0 at every acceptance."""
    return [(k, a) for k in sc.spec_tokens for a in ([None] if k == 0 else sc.acceptance)]


def spec_sizes(sc: SweepScenario, name: str, k: int, graph: str, memo: dict | None = None
               ) -> tuple[tuple, str, tuple]:
    """(verify token sizes, the engine whose rules route the draft, the plain-decode sizes) of layout `name` at
    k (engine/spec.py spec_request: an engine preset is its spec-decode list, in the graph mode verify steps run
    in; another layout's sizes count verify tokens). `memo`: the caller's, for one scenario `sc` (by layout name,
    k and the verify graph mode)."""
    if memo is None:
        memo = {}
    from simulator.engine.spec import spec_request, verify_graph_mode

    lay = next(x for x in sc.layouts if x.name == name)
    eng = lay.sizes if isinstance(lay.sizes, str) and lay.sizes in ("vllm", "sglang", "trtllm") else "vllm"
    vgraph, _ = verify_graph_mode(eng, graph, sc.attention_backend, k)
    key = (name, k, vgraph)
    if key not in memo:
        _, vs, ds = spec_request(k, 0.5, sc.draft, lay.sizes, lay.max_size, lay.max_num_seqs,
                                 graph="piecewise" if vgraph == "piecewise" else "full")
        memo[key] = (tuple(vs), eng, tuple(ds))
    return memo[key]


TABLE_ROWS = 2000  # rows of a report table; the CSV and JSON files hold every point
SUMMARY_COLUMNS = ["model", "fusion", "graph", "layout", "dist", "graph_MiB", "budgets", "waste", "step_ms",
                   "speedup", "capture_s"]


SPEC_SUMMARY_COLUMNS = ["spec_k", "accept", "tok_per_step", "ms_per_token", "decode_ms"]


def summary_columns(rows: list[dict]) -> list[str]:
    """SUMMARY_COLUMNS, plus the speculative ones when a row has spec_tokens > 0."""
    if any(r.get("spec_tokens") for r in rows):
        return SUMMARY_COLUMNS[:-3] + SPEC_SUMMARY_COLUMNS + SUMMARY_COLUMNS[-3:]
    return SUMMARY_COLUMNS


def summarize_rows(rows: list[dict], family: list[int] | None = None) -> list[dict]:
    """One compact row per point without the budget axis; `budgets` lists each budget's check. `family`: per row,
    its family (`SweepRun.family`: rows of one family differ only in budget_bytes and fits_budget; -1: none), so a
    run of rows of one family finds its summary row once."""
    out: dict[tuple, dict] = {}
    checks: dict[tuple, list[str]] = {}
    labels: dict[tuple, str] = {}  # (budget_bytes, fits_budget) -> its check
    spec = any(r.get("spec_tokens") for r in rows)
    if family is not None and len(family) != len(rows):
        family = None
    prev, lst = -1, None
    for n, r in enumerate(rows):
        f = family[n] if family is not None else -1
        if f >= 0 and f == prev and lst is not None:
            b = (r["budget_bytes"], r["fits_budget"])
            c = labels.get(b)
            if c is None:
                c = labels[b] = f"{r['budget_bytes'] / MiB:g}MiB:{'ok' if r['fits_budget'] else 'OVER'}"
            lst.append(c)
            continue
        prev = f
        k = (r["model"], r["profile"], r["fusion"], r["graph"], r["layout"], r["distribution"],
             r.get("spec_tokens", 0), r.get("acceptance"))
        s = out.get(k)
        if s is None:
            s = out[k] = {"model": r["model"], "fusion": r["fusion"], "graph": r["graph"], "layout": r["layout"],
                          "dist": r["distribution"], "graph_MiB": r["graph_bytes"] / MiB, "budgets": "",
                          "waste": r["waste"], "step_ms": r["expected_step_ms"], "speedup": r["speedup_vs_eager"],
                          "capture_s": r["capture_s"]}
            if spec:
                s.update(spec_k=r["spec_tokens"], accept=r["acceptance"], tok_per_step=r["tokens_per_step"],
                         ms_per_token=r["ms_per_token"], decode_ms=r["decode_step_ms"])
                s = out[k] = {c: s[c] for c in summary_columns(rows)}
        lst = checks.setdefault(k, [])
        lst.append(f"{r['budget_bytes'] / MiB:g}MiB:{'ok' if r['fits_budget'] else 'OVER'}")
    for k, s in out.items():  # joined once (a string grown per budget is quadratic in the budgets)
        s["budgets"] = budget_cell(checks[k])
    return list(out.values())


BUDGET_CELL_LIST = 8  # up to this many budgets a summary row lists each check; above, runs of equal checks


def budget_cell(checks: list[str]) -> str:
    """The summary's `budgets` cell from a row's checks ("<MiB>MiB:ok|OVER", in the scenario's budget order): each
    check up to BUDGET_CELL_LIST budgets; above, each run of consecutive equal results as "<first>..<last>:ok (n)"
    (a row of 694 budgets printed a 9 KB cell that the terminal table folded into dozens of lines)."""
    if len(checks) <= BUDGET_CELL_LIST:
        return " ".join(checks)
    runs: list[list] = []  # [first MiB, last MiB, result, count]
    for c in checks:
        mib, res = c.rsplit(":", 1)
        if runs and runs[-1][2] == res:
            runs[-1][1] = mib
            runs[-1][3] += 1
        else:
            runs.append([mib, mib, res, 1])
    return " ".join(f"{a}:{r}" if n == 1 else f"{a}..{b}:{r} ({n})" for a, b, r, n in runs)


def run_sweep_scenario(sc: SweepScenario, out: Path | None, progress: bool = True) -> dict:
    points = build_points(sc)
    run = run_points(points, out, sc.executor, sc.workers, sc.chunk, progress=progress)
    rows = run.rows
    summary = summarize_rows(rows, run.family)
    over = [r for r in rows if not r["fits_budget"]]
    result = {
        "scenario": sc.model_dump(mode="json"),
        "points": len(points), "computed": run.computed, "cached": run.cached,
        "step_evals": run.step_evals, "step_lookups": run.step_lookups, "steps_simulated": run.simulated_steps, "wall_s": run.wall_s,
        "over_budget": len(over),
        "rows": rows,
        "summary": summary,
        "summary_columns": summary_columns(rows),
    }
    be = breakeven_rows(rows, batch_means(sc))
    if be:
        result["spec_breakeven"] = be
    if out is not None:  # each file's text is built while the one before is written (report/background.py)
        with BackgroundWriter() as bg:
            bg.write(out / "results.csv", rows_csv_blocks(rows, run.family))
            blocks = rows_json_blocks(rows, run.family)  # written twice: alone and inside result.json
            bg.write(out / "results.json", [*blocks, "\n"])  # = write_json(path, rows)
            parts = result_json_parts(result, rows, blocks)
            bg.write(out / "result.json", parts if parts is not None else
                     indented(result, {id(rows): "".join(blocks)}) + "\n")  # = write_json(path, result)
            path = out / "report.html"
            bg.write(path, report_text(
                path, f"launchsim: {sc.name}", figures(rows) + breakeven_figures(be, rows, batch_means(sc)),
                ([table_html(be, "Where speculation stops paying: break-even acceptance per point (speculation "
                                 "pays above it)", limit=TABLE_ROWS)] if be else [])
                + [memory_table(rows), table_html(rows, "All grid points", limit=TABLE_ROWS, rest="results.csv")],
                intro=f"{sc.description} {len(points)} points ({run.computed} computed, {run.cached} from "
                      f"the cache); profiles: {', '.join(sc.profiles)}; context {sc.ctx}."))
    return result


def rows_json(rows: list[dict], family: list[int]) -> str:
    """`indented(rows)`, each family's row text made once (`sweep/grid.budget_template`: rows of one family differ
    only in budget_bytes and fits_budget): linear in points with a small constant per budget."""
    return "".join(rows_json_blocks(rows, family))


JSON_BLOCK = 1024  # rows per block of `rows_json_blocks` (about 1 MB of text for a sweep row)


def rows_json_blocks(rows: list[dict], family: list[int]) -> list[str]:
    """`rows_json(rows, family)` in pieces of JSON_BLOCK rows ("".join of them is that text, `indented_list` of the
    rows' texts): the files are written piece by piece, never as one string of hundreds of MB."""
    if len(family) != len(rows):
        return [indented(rows)]
    enc = lambda t: indented(t, depth=1)  # noqa: E731
    tpls: dict[int, list[str] | None] = {}
    items = []
    for r, f in zip(rows, family):
        text = None
        if f >= 0:
            if f not in tpls:
                tpls[f] = budget_template(r, enc)
            tpl = tpls[f]
            if tpl is not None:
                text = fill_budget(tpl, r)
        items.append(enc(r) if text is None else text)
    if not items:
        return [indented_list(items)]
    sep = ",\n  "
    blocks = [("[\n  " if i == 0 else sep) + sep.join(items[i:i + JSON_BLOCK]) for i in range(0, len(items), JSON_BLOCK)]
    blocks.append("\n]")
    return blocks


_ROWS_AT = "\x00launchsim:rows\x00"  # stands for the rows' text in result.json (JSON escapes every control character)


def result_json_parts(result: dict, rows: list[dict], blocks: list[str]) -> Iterator[str] | None:
    """`indented(result, {id(rows): "".join(blocks)}) + "\n"` (write_json's text of result.json, whose "rows" is
    `rows`) as pieces, made lazily: the text around the rows (made alone), the rows' blocks each indented one level (a line break is one character, so replacing it block by block is replacing it
    in the whole). None where the stand-in is not found exactly once."""
    around = indented(result, {id(rows): _ROWS_AT})
    if around.count(_ROWS_AT) != 1:
        return None
    head, tail = around.split(_ROWS_AT)
    return itertools.chain([head], (b.replace("\n", "\n  ") for b in blocks), [tail + "\n"])  # lazily: one block at a time


_CSV_B, _CSV_F = "@@budget_bytes@@", "@@fits_budget@@"


def write_rows_csv(path: Path, rows: list[dict], family: list[int]) -> Path:
    """`report/html.write_csv(path, rows)`, each family's line made once (as `rows_json`)."""
    from simulator.common.jsonfile import atomic_write_text

    return atomic_write_text(path, "".join(rows_csv_blocks(rows, family)))


def rows_csv_blocks(rows: list[dict], family: list[int]) -> list[str]:
    """`report/html.csv_text(rows)` (what `write_csv` writes) in pieces of JSON_BLOCK lines, each family's line made
    once (as `rows_json`)."""
    import csv
    import io

    if not rows or len(family) != len(rows):
        return [csv_text(rows)]
    keys = list(rows[0].keys())
    seen = set(keys)
    for r in rows[1:]:  # write_csv's columns: every key, in first-seen order
        if len(r) != len(seen) or not seen.issuperset(r):
            new = [k for k in r if k not in seen]
            keys += new
            seen.update(new)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=keys)
    w.writeheader()
    line = io.StringIO()
    lw = csv.DictWriter(line, fieldnames=keys)

    def template(r: dict) -> list[str] | None:
        line.seek(0)
        line.truncate()
        lw.writerow({**r, "budget_bytes": _CSV_B, "fits_budget": _CSV_F})
        text = line.getvalue()
        if text.count(_CSV_B) != 1 or text.count(_CSV_F) != 1 or text.index(_CSV_B) > text.index(_CSV_F):
            return None
        head, rest = text.split(_CSV_B)
        return [head, *rest.split(_CSV_F)]

    tpls: dict[int, list[str] | None] = {}
    blocks = []
    for n, (r, f) in enumerate(zip(rows, family), 1):
        if n % JSON_BLOCK == 0:
            blocks.append(buf.getvalue())
            buf.seek(0)
            buf.truncate()
        b, fits = r.get("budget_bytes"), r.get("fits_budget")
        if f >= 0 and type(b) is int and type(fits) is bool:
            if f not in tpls:
                tpls[f] = template(r)
            t = tpls[f]
            if t is not None:
                buf.write(t[0] + str(b) + t[1] + str(fits) + t[2])
                continue
        w.writerow(r)
    blocks.append(buf.getvalue())
    return blocks


def batch_means(sc: SweepScenario) -> dict[str, float]:
    """Each distribution's label -> its expected batch (sequences per step): the x of the break-even figures."""
    out = {}
    for d in sc.distributions:
        dist = build_distribution(d)
        out[dist.label] = float(sum(b * w for b, w in zip(dist.sizes, dist.weights)))
    return out


def breakeven_rows(rows: list[dict], means: dict[str, float]) -> list[dict]:
    """Per speculative point without its acceptance and budget: cost_ratio = expected spec step (verify + draft)
    / expected plain decode step, and the constant acceptance at which ms_per_token equals plain decode's
    (model/spec.py breakeven_acceptance: tokens_per_step(a, k) = cost_ratio; 0 when speculation pays at any
    acceptance, None when it never does, cost_ratio > k + 1). The step does not depend on the acceptance."""
    from simulator.model.spec import breakeven_acceptance

    out: dict[tuple, dict] = {}
    for r in rows:
        k = r.get("spec_tokens", 0)
        if not k:
            continue
        key = (r["model"], r["profile"], r["fusion"], r["graph"], r["layout"], r["distribution"], k)
        if key in out:
            continue
        ratio = r["expected_step_ms"] / r["decode_step_ms"]
        out[key] = {"model": r["model"], "profile": r["profile"], "fusion": r["fusion"], "graph": r["graph"],
                    "layout": r["layout"], "distribution": r["distribution"],
                    "batch": means.get(r["distribution"]), "spec_tokens": k, "spec_step_ms": r["expected_step_ms"],
                    "decode_step_ms": r["decode_step_ms"], "cost_ratio": ratio,
                    "breakeven_acceptance": breakeven_acceptance(k, ratio)}
    return list(out.values())


def breakeven_figures(be: list[dict], rows: list[dict], means: dict[str, float]) -> list[dict]:
    """(1) break-even acceptance over batch, one line per (model, fusion/graph, layout, k); (2) ms_per_token over
    batch for each (k, acceptance) with plain decode's step time as the reference line (first model, fusion,
    graph, layout, profile and budget)."""
    if not be:
        return []
    f1 = fj.figure()
    for key in dict.fromkeys((b["model"], b["fusion"], b["graph"], b["layout"], b["spec_tokens"]) for b in be):
        pts = sorted((b["batch"], b["breakeven_acceptance"]) for b in be
                     if (b["model"], b["fusion"], b["graph"], b["layout"], b["spec_tokens"]) == key)
        fj.add_trace(f1, fj.trace("scatter", x=[x for x, _ in pts], y=[y for _, y in pts], mode="lines+markers",
                                  name=f"{key[0]} {key[1]}/{key[2]} {key[3]} k={key[4]}"))
    fj.update_layout(f1, title="Where speculation stops paying: break-even acceptance over batch (pays above the "
                               "line; a gap: never pays, cost ratio > k + 1)",
                     xaxis=dict(title="batch (expected sequences per step)"),
                     yaxis=dict(title="break-even acceptance", range=[0, 1]), height=460)
    r0 = next(r for r in rows if r.get("spec_tokens"))
    base = _first(rows, model=r0["model"], fusion=r0["fusion"], graph=r0["graph"], layout=r0["layout"],
                  profile=r0["profile"], budget_bytes=r0["budget_bytes"])
    f2 = fj.figure()
    dec = sorted({(means.get(r["distribution"]), r["decode_step_ms"]) for r in base})
    fj.add_trace(f2, fj.trace("scatter", x=[x for x, _ in dec], y=[y for _, y in dec], mode="lines",
                              name="plain decode", line=dict(dash="dash", color="black")))
    for k, a in dict.fromkeys((r["spec_tokens"], r["acceptance"]) for r in base if r["spec_tokens"]):
        pts = sorted((means.get(r["distribution"]), r["ms_per_token"]) for r in base
                     if r["spec_tokens"] == k and r["acceptance"] == a)
        fj.add_trace(f2, fj.trace("scatter", x=[x for x, _ in pts], y=[y for _, y in pts], mode="lines+markers",
                                  name=f"k={k}, acceptance {a:g}"))
    fj.update_layout(f2, title=f"ms per token over batch ({r0['model']} {r0['fusion']}/{r0['graph']}, layout "
                               f"{r0['layout']}): speculation pays below plain decode",
                     xaxis=dict(title="batch (expected sequences per step)"),
                     yaxis=dict(title="ms per token (per sequence)"), height=460)
    return [f1, f2]


def memory_table(points: list[dict]) -> str:
    seen, rows = set(), []
    for r in points:
        if r["graph"] == "none":
            continue
        k = (r["model"], r["fusion"], r["graph"], r["layout"], r["budget_bytes"])
        if k in seen:
            continue
        seen.add(k)
        rows.append({"model": r["model"], "fusion": r["fusion"], "graph": r["graph"], "layout": r["layout"],
                     "graphs": r["graphs"], "graph_MiB": r["graph_bytes"] / MiB,
                     "budget_MiB": r["budget_bytes"] / MiB,
                     "check": "ok" if r["fits_budget"] else "OVER BUDGET", "kv_tokens": r["kv_tokens"],
                     "capture_s": r["capture_s"]})
    return table_html(rows, "Pinned graph memory against each budget", limit=TABLE_ROWS, rest="results.csv")


def _first(rows: list[dict], **fixed) -> list[dict]:
    """The rows whose fields equal `fixed` (names, labels and budgets: plain strings and numbers), in order."""
    from operator import itemgetter

    if not fixed:
        return list(rows)
    get = itemgetter(*fixed)
    want = tuple(fixed.values()) if len(fixed) > 1 else next(iter(fixed.values()))
    return [r for r in rows if get(r) == want]


def budget_lines(fig: dict, xs: list[float]) -> None:
    """One dashed vertical line with a "budget X MiB" label per x: the shapes and annotations
    `go.Figure.add_vline(x, line_dash="dash", annotation_text=...)` adds per x, appended to the layout's."""
    lay = fig["layout"]
    shapes = [{"type": "line", "x0": x, "x1": x, "xref": "x", "y0": 0, "y1": 1, "yref": "y domain",
               "line": {"dash": "dash"}} for x in xs]
    notes = [{"text": f"budget {x:g} MiB", "x": x, "xref": "x", "y": 1, "yref": "y domain", "showarrow": False,
              "xanchor": "left", "yanchor": "top"} for x in xs]
    if shapes:
        lay["shapes"] = list(lay.get("shapes", [])) + shapes
        lay["annotations"] = list(lay.get("annotations", [])) + notes


def figures(rows: list[dict]) -> list[dict]:
    if not rows:
        return []
    r0 = rows[0]
    base = _first(rows, profile=r0["profile"], budget_bytes=r0["budget_bytes"])
    graphs = [r for r in base if r["graph"] != "none"]
    figs = []
    # 1. padding waste vs pinned memory, per layout (one marker per model/graph/fusion/distribution)
    f1 = fj.figure()
    models = sorted({r["model"] for r in rows})
    symbols = ["circle", "square", "diamond", "triangle-up", "x", "star"]
    for lay in dict.fromkeys(r["layout"] for r in graphs):
        rs = [r for r in graphs if r["layout"] == lay]
        fj.add_trace(f1, fj.trace(
            "scatter", x=[r["graph_bytes"] / MiB for r in rs], y=[100 * r["waste"] for r in rs], mode="markers",
            name=lay, marker=dict(size=10, symbol=[symbols[models.index(r["model"]) % len(symbols)] for r in rs]),
            text=[f"{r['model']} {r['fusion']}/{r['graph']} {r['distribution']}" for r in rs]))
    budget_lines(f1, sorted({r["budget_bytes"] / MiB for r in rows}))
    fj.update_layout(f1, title="Padding waste vs pinned graph memory, per layout (marker shape: model)",
                     xaxis=dict(title="pinned graph memory (MiB)"), yaxis=dict(title="padded rows / all rows (%)"),
                     height=480)
    figs.append(f1)
    # 2. expected step time per layout; 4. capture time per layout
    d0 = r0["distribution"]
    f2, f4 = fj.figure(), fj.figure()
    by_mfg: dict[tuple, list[dict]] = {}  # _first(base, model=m, fusion=f, graph=g, distribution=d0) of each (m, f, g)
    for r in base:
        rs = by_mfg.setdefault((r["model"], r["fusion"], r["graph"]), [])
        if r["distribution"] == d0:
            rs.append(r)
    for (m, f, g), rs in by_mfg.items():
        fj.add_trace(f2, fj.trace("bar", x=[r["layout"] for r in rs], y=[r["expected_step_ms"] for r in rs],
                                  name=f"{m} {f}/{g}"))
        if g != "none":
            fj.add_trace(f4, fj.trace("bar", x=[r["layout"] for r in rs], y=[r["capture_s"] for r in rs],
                                      name=f"{m} {f}/{g}"))
    fj.update_layout(f2, title=f"Expected step time per layout (batch sizes: {d0})", yaxis=dict(title="ms"),
                     barmode="group", height=450)
    fj.update_layout(f4, title="Start-up capture time per layout", yaxis=dict(title="s"), barmode="group",
                     height=450)
    # 3. speedup of each toggle over eager (fusion none, graph none), first layout
    l0 = r0["layout"]
    f3 = fj.figure()
    for m in models:
        rs = _first(base, model=m, layout=l0, distribution=d0)
        fj.add_trace(f3, fj.trace("bar", x=[f"{r['fusion']}/{r['graph']}" for r in rs],
                                  y=[r["speedup_vs_eager"] for r in rs], name=m))
    fj.update_layout(f3, title=f"Speedup of each fusion/graph toggle over eager (layout {l0}, batch sizes {d0})",
                     yaxis=dict(title="eager step time / step time"), barmode="group", height=450)
    return [f1, f2, f3, f4]
