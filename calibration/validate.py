"""Compare simulator predictions with measured decode steps: rows, MAPE per mode, JSON and HTML.

Measured files come from the clean timing process (calibration/child_timing.py, `launchsim measure`):
each row has, per graph mode, the *isolated* regime (synchronise, one step, synchronise) and the
*pipelined* regime (steps back to back; wall time per step). Predictions: isolated = the simulated
step (host start to GPU end); pipelined = the steady-state period max(host busy, GPU busy + gaps).
Older files (one `step_ms` per mode) are read as isolated-only.

Fitting and validation are kept apart. The profile's figures are microbenchmarks, except those its
notes name as fitted; rows a fit used are marked "fit" by `fit_split` and never scored:
- host.compiled_wrapper_us: qwen3-0.6b, fusion compiled, dynamic=False, batch 1 and 16, ctx 512, graph none
  (with round i's passes of the same rows: calibration/build_compiled.py).
(graph_node_us comes from 1-4 layer decoders, never from these full-depth rows.)
Targets (issue 10): graph replay (fusion none/packed) MAPE <= 3%; compiled + graph <= 5%; compiled,
no graph <= 7%; eager <= 12% (medians of a noisy host); kernels per step within 5%.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

TARGETS = {"graph replay": 3.0, "compiled + graph": 5.0, "compiled, no graph": 7.0, "eager": 12.0, "kernels": 5.0,
           "compiled static + graph": 5.0, "compiled static, no graph": 7.0}
MODES = ("graph replay", "compiled + graph", "compiled, no graph", "eager", "compiled static + graph",
         "compiled static, no graph")


class ValidationError(ValueError):
    """A measured file that cannot be read or has no rows."""


def _normalise(row: dict) -> dict:
    """Old-format rows ({'eager': {'step_ms'}, 'graph': {...}}) to {'eager'/'full': {'isolated': ...}}."""
    r = dict(row)
    for old, new in (("eager", "eager"), ("graph", "full")):
        v = r.get(old)
        if isinstance(v, dict) and "step_ms" in v:
            r[new] = {"isolated": {"step_ms": v["step_ms"], "host_ms": v.get("host_ms", v["step_ms"])}}
            if old == "graph":
                r.pop("graph")
    return r


def load_measured(path) -> dict:
    p = Path(path)
    if not p.exists():
        raise ValidationError(f"no measured file {p}")
    try:
        d = json.loads(p.read_text())
    except json.JSONDecodeError as e:
        raise ValidationError(f"{p}:{e.lineno}: not valid JSON ({e.msg})") from None
    if not isinstance(d, dict) or not isinstance(d.get("rows"), list) or not d["rows"]:
        raise ValidationError(f"{p}: a measured file needs a non-empty 'rows' list (launchsim measure writes one)")
    for i, r in enumerate(d["rows"]):
        if not isinstance(r, dict):
            raise ValidationError(f"{p}: row {i} is not an object")
        missing = [k for k in ("model", "fusion", "batch", "ctx") if k not in r]
        if missing:
            raise ValidationError(f"{p}: row {i} lacks {', '.join(missing)}")
    d = dict(d)
    d["rows"] = [_normalise(r) for r in d["rows"]]
    return d


def fit_split(row: dict, graph: str) -> str:
    """'fit' for the row a fitted coefficient used (see module docstring), else 'validation'."""
    if (graph == "none" and row["model"] == "qwen3-0.6b" and row["fusion"] == "compiled" and row["batch"] in (1, 16)
            and row["ctx"] == 512 and row.get("dynamic") is False):
        return "fit"
    return "validation"


def mode_of(fusion: str, graph: str, dynamic: bool | None = None) -> str:
    """The scoring mode. Rows compiled with dynamic=True score as 'compiled', dynamic=False (28 fewer Triton
    kernels on qwen3-0.6b: Inductor fuses one more pair per layer) as 'compiled static'; each is predicted with the
    same `dynamic` (`predict_compiled`: Inductor's pass over the `none` list, simulator/model/inductor.py)."""
    if fusion == "compiled":
        kind = "compiled static" if dynamic is False else "compiled"
        return f"{kind} + graph" if graph == "full" else f"{kind}, no graph"
    return "graph replay" if graph == "full" else "eager"


def dynamic_profile(profile):
    """`profile` with torch.compile(dynamic=True)'s wrapper cost: host.compiled_wrapper_us +
    inductor.DYNAMIC_WRAPPER_EXTRA_US per launch (measured on round b's qwen3-0.6b batch-16 rows, static vs dynamic,
    beyond the extra kernels). Validation builds steps with build_step directly, so it prices the dynamic rows with
    this profile; a user's `--compile-dynamic` run gets the same figure through CostModel.host_s instead."""
    from simulator.model.inductor import DYNAMIC_WRAPPER_EXTRA_US

    h = profile.host.model_copy(update={"compiled_wrapper_us": profile.host.compiled_wrapper_us
                                        + DYNAMIC_WRAPPER_EXTRA_US})
    return profile.model_copy(update={"host": h})


def predict_compiled(model, batch: int, ctx: int, graph: str, profile, dynamic: bool, impl: str | None = None,
                     replicates: int = 0, seed: int = 0, **options):
    """predict() of a `compiled` step built with compile_dynamic=`dynamic` (Inductor's pass, inductor.py), priced
    with the dynamic wrapper cost where dynamic (`dynamic_profile`); `options`: the hf recipe's (cache, ...)."""
    from simulator.engine.plan import lower
    from simulator.engine.predict import Prediction, _band, run_engine
    from simulator.engine.setup import Capture, StepSetup
    from simulator.engine.timeline import summarize
    from simulator.model.costs import CostModel
    from simulator.model.models import load_model
    from simulator.model.workload import build_step, decode

    m = load_model(model) if isinstance(model, str) else model
    costs = CostModel(dynamic_profile(profile) if dynamic else profile)
    setup = StepSetup(m, costs, "", "compiled", impl, Capture.of(graph, None, None))
    r, shape = setup.capture.padded(decode(batch, ctx))
    step = build_step(m, shape, "compiled", setup.recipe, compile_dynamic=dynamic, **options)
    plan = lower(step, costs, r.mode)
    tl = run_engine(plan, "fast")
    band = _band(plan, step, costs, replicates, seed) if replicates > 0 else None
    return Prediction(summarize(tl), tl, step, band, r)


def _predict(row, graph, profile, replicates, seed=0):
    from simulator.engine.predict import predict

    # the reference decoder's ctx counts the new token (it attends over ctx keys, ctx-1 of them past);
    # the workload's ctx is the past context, so the same step is ctx - 1 there
    reps = replicates if graph == "none" else 0
    if row["fusion"] == "compiled":
        return predict_compiled(row["model"], row["batch"], row["ctx"] - 1, graph, profile,
                                bool(row.get("dynamic", True)), replicates=reps, seed=seed)
    return predict(row["model"], row["batch"], row["ctx"] - 1, row["fusion"], graph, profile,
                   replicates=reps, seed=seed)


def pipelined_ms(result) -> float:
    """Steady-state time per step when steps run back to back (the host runs ahead)."""
    return max(result.cpu_busy_s, result.gpu_busy_s + result.gpu_gap_s) * 1e3


def validate(measured: dict, profile, replicates: int = 60, source: str = "") -> dict:
    """Prediction rows for every measured row, graph mode and regime, plus the summary per mode."""
    from simulator.model.costs import CostModel

    CostModel(profile)  # validates the profile's tables before any row is read
    out = []
    for r in measured["rows"]:
        for graph, key in (("none", "eager"), ("full", "full")):
            meas = r.get(key)
            if not isinstance(meas, dict) or "isolated" not in meas:
                continue
            p = _predict(r, graph, profile, replicates)
            base = {"model": r["model"], "fusion": r["fusion"], "dynamic": r.get("dynamic"), "batch": r["batch"],
                    "ctx": r["ctx"], "graph": graph, "mode": mode_of(r["fusion"], graph, r.get("dynamic")),
                    "split": fit_split(r, graph), "source": source,
                    "predicted_cpu_ms": p.result.cpu_busy_s * 1e3,
                    "predicted_gpu_ms": (p.result.gpu_busy_s + p.result.gpu_gap_s) * 1e3, "bound": p.result.bound}
            for regime in ("isolated", "pipelined"):
                if regime not in meas:
                    continue
                m = meas[regime]["step_ms"]
                pred = p.result.step_s * 1e3 if regime == "isolated" else pipelined_ms(p.result)
                row = {**base, "regime": regime, "measured_ms": m["p50"], "measured_p10_ms": m["p10"],
                       "measured_p90_ms": m["p90"], "predicted_ms": pred,
                       "error_pct": 100.0 * (pred - m["p50"]) / m["p50"]}
                if regime == "isolated" and "host_ms" in meas[regime]:
                    row["measured_host_ms"] = meas[regime]["host_ms"]["p50"]
                if regime == "isolated" and p.band_ms:
                    row["band_p10_ms"], row["band_p90_ms"] = p.band_ms["p10"], p.band_ms["p90"]
                    row["in_band"] = bool(p.band_ms["p10"] <= m["p50"] <= p.band_ms["p90"])
                if regime == "isolated" and graph == "full" and "device_ms" in meas:
                    row["measured_device_ms"] = meas["device_ms"]["p50"]
                out.append(row)
    return {"rows": out, "summary": summarize(out), "profile": profile.name}


def kernel_rows(counts: dict, compiled: list[dict], profile) -> list[dict]:
    """Kernels per step: the counts process's profiler figures against the workload + profile."""
    from simulator.model.costs import CostModel
    from simulator.model.models import load_model
    from simulator.model.workload import build_step, decode

    costs = CostModel(profile)
    rows = []
    for r in list(counts.get("rows", [])) + [x for c in compiled for x in c.get("rows", [])]:
        if r.get("graph") != "none":
            continue
        opt = {"compile_dynamic": bool(r.get("dynamic", True))} if r["fusion"] == "compiled" else {}
        step = build_step(load_model(r["model"]), decode(r["batch"], r["ctx"] - 1), r["fusion"], **opt)
        pred = costs.step_kernels(step.ops)
        rows.append({"model": r["model"], "fusion": r["fusion"], "dynamic": r.get("dynamic"), "batch": r["batch"],
                     "ctx": r["ctx"], "kernels_measured": r["kernels"], "kernels_predicted": pred,
                     "kernels_error_pct": 100.0 * (pred - r["kernels"]) / r["kernels"]})
    return rows


def _stats(errs) -> dict:
    e = np.abs(np.asarray(errs, dtype=float))
    return {"rows": int(e.size), "mape_pct": float(e.mean()), "median_abs_error_pct": float(np.median(e)),
            "max_abs_error_pct": float(e.max())}


def summarize(rows: list[dict], kernels: list[dict] | None = None) -> dict:
    """Per mode and regime, over validation rows only: MAPE, worst row, count within target."""
    s = {}
    val = [r for r in rows if r["split"] == "validation"]
    for mode in MODES:
        for regime in ("isolated", "pipelined"):
            rs = [r for r in val if r["mode"] == mode and r.get("regime", "isolated") == regime]
            if not rs:
                continue
            d = _stats([r["error_pct"] for r in rs])
            worst = max(rs, key=lambda r: abs(r["error_pct"]))
            d["worst"] = (f"{worst['model']} {worst['fusion']} b{worst['batch']} ctx{worst['ctx']} "
                          f"{worst['error_pct']:+.1f}%")
            d["within_target"] = int(sum(abs(r["error_pct"]) <= TARGETS[mode] for r in rs))
            d["target_pct"] = TARGETS[mode]
            band = [r["in_band"] for r in rs if "in_band" in r]
            if band:
                d["in_band"] = int(sum(band))
            for m in sorted({r["model"] for r in rs}):
                d[f"mape_pct[{m}]"] = _stats([r["error_pct"] for r in rs if r["model"] == m])["mape_pct"]
            d["pass"] = bool(d["mape_pct"] <= TARGETS[mode])
            s[f"{mode} [{regime}]"] = d
    if kernels:
        d = _stats([r["kernels_error_pct"] for r in kernels])
        d.update(within_target=int(sum(abs(r["kernels_error_pct"]) <= TARGETS["kernels"] for r in kernels)),
                 target_pct=TARGETS["kernels"], pass_=None)
        d.pop("pass_")
        d["pass"] = bool(d["max_abs_error_pct"] <= TARGETS["kernels"])
        s["kernels"] = d
    return s


def summary_table(summary: dict) -> list[dict]:
    out = []
    for mode, d in summary.items():
        out.append({"mode": mode, "rows": d["rows"], "MAPE %": round(d["mape_pct"], 2),
                    "median |err| %": round(d.get("median_abs_error_pct", float("nan")), 2),
                    "max |err| %": round(d["max_abs_error_pct"], 1), "target %": d["target_pct"],
                    "within": f"{d['within_target']}/{d['rows']}",
                    "in band": f"{d['in_band']}/{d['rows']}" if "in_band" in d else "",
                    "pass": "yes" if d["pass"] else "no"})
    return out


def html_report(result: dict, title: str = "launchsim validation") -> str:
    """Self-contained HTML (plotly.js inlined once): predicted vs measured, error per row, MAPE per mode. Three
    figures rather than subplots of one, so each reserves room for its own axis labels (the error chart's long
    row labels, rotated, ran over the next panel when they shared a figure)."""
    import plotly.graph_objects as go

    from simulator.report.html import html_page

    rows = result["rows"]
    colors = {"graph replay": "#1f77b4", "compiled + graph": "#9467bd", "compiled, no graph": "#2ca02c",
              "eager": "#d62728", "compiled static + graph": "#8c564b", "compiled static, no graph": "#e377c2"}
    rows = [r for r in rows if r.get("regime", "isolated") == "isolated"]
    scatter = go.Figure()
    for mode, c in colors.items():
        for split, sym in (("validation", "circle"), ("fit", "circle-open")):
            rs = [r for r in rows if r["mode"] == mode and r["split"] == split]
            if not rs:
                continue
            scatter.add_trace(go.Scatter(
                x=[r["measured_ms"] for r in rs], y=[r["predicted_ms"] for r in rs], mode="markers",
                marker=dict(color=c, symbol=sym, size=7), name=f"{mode} ({split})",
                text=[f"{r['model']} {r['fusion']} b{r['batch']} ctx{r['ctx']} err {r['error_pct']:+.1f}%" for r in rs]))
    lo = min(min(r["measured_ms"], r["predicted_ms"]) for r in rows) * 0.8
    hi = max(max(r["measured_ms"], r["predicted_ms"]) for r in rows) * 1.2
    scatter.add_trace(go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", line=dict(color="gray", dash="dot"),
                                 name="y = x"))
    scatter.update_xaxes(type="log", title_text="measured ms")
    scatter.update_yaxes(type="log", title_text="predicted ms")
    scatter.update_layout(height=560, title="predicted vs measured step time, isolated regime<br><sup>ms, log-log; "
                                            "validation rows filled, fit rows hollow</sup>")
    val = [r for r in rows if r["split"] == "validation"]
    err = go.Figure()
    for mode, c in colors.items():
        rs = [r for r in val if r["mode"] == mode]
        if rs:
            err.add_trace(go.Bar(x=[f"{r['model'][:5]} {r['fusion'][:4]} b{r['batch']} c{r['ctx']} {r['graph']}"
                                    for r in rs], y=[r["error_pct"] for r in rs], marker_color=c, name=mode))
    err.update_xaxes(tickangle=-60, tickfont=dict(size=9), automargin=True)
    err.update_layout(height=620, title="error per row (%), isolated regime, validation rows", barmode="overlay",
                      yaxis_title="error %", legend=dict(orientation="h", y=1.08))
    s = result["summary"]
    modes = list(s)
    mape = go.Figure(go.Bar(x=modes, y=[s[m]["mape_pct"] for m in modes], marker_color="#555", name="MAPE",
                            text=[f"{s[m]['mape_pct']:.1f}% (target {s[m]['target_pct']:.0f}%)" for m in modes]))
    mape.update_xaxes(automargin=True)
    mape.update_layout(height=480, title="MAPE per mode and regime (%), validation rows", yaxis_title="MAPE %")
    return html_page(f"{title}: profile {result['profile']}", [scatter, err, mape])


def write_report(result: dict, out_dir) -> tuple[Path, Path]:
    from .build_profile import write_json_atomic

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    jp, hp = out / "validation.json", out / "validation.html"
    write_json_atomic(result, jp)
    html = html_report(result)
    tmp = hp.with_name("." + hp.name + ".tmp")
    tmp.write_text(html)
    tmp.replace(hp)
    return jp, hp
