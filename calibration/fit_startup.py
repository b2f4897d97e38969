"""Least-squares fitting of the start-up model's constants (simulator/engine/startup.py), used only by calibration:

    derive(rows, profile)          the profile's `host.startup` section (calibration/make_profiles.py writes it)
    validation_rows(data, profile) every measured start-up row against the model (calibration/validate_startup.py)

capture_host_ratio: mean of measured capture seconds / launchsim's predicted eager host time over the first
model's capture rows. torch.compile: one line `fixed_s + per_node_s * nodes` per (mode, cache), least squares over
its fit rows (models cut short); rows at a model's own full depth are held out and validate the line, unless
fewer than two distinct node counts remain (then every row is a fit row). The model these constants feed, and
what was measured, are in simulator/engine/startup.py's docstring. CPU only, no torch.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import replace

from simulator.engine.startup import (
    COMPILE_CACHES,
    DEFAULT_CTX,
    compile_nodes,
    eager_pass,
    figures,
)
from simulator.model.models import ModelSpec, load_model
from simulator.model.profile import Profile

_H200 = "calibration/measured/h200-engine/engine_loop.json"


def _spec(name: str, layers: int | None = None) -> ModelSpec:
    m = load_model(name)
    return m if layers is None or layers == m.num_hidden_layers else replace(m, num_hidden_layers=int(layers))


def _is_fit_row(row: dict) -> bool:
    """Fit rows are the models cut short; a row at the model's own full depth is held out for validation, unless
    its (mode, cache) has fewer than two shallow rows (then every row is a fit row)."""
    return int(row["layers"]) < load_model(row["model"]).num_hidden_layers


def _line(pts: list[tuple[int, float]]) -> tuple[float, float]:
    """(fixed_s, per_node_s) of the least-squares line through (nodes, seconds); slope >= 0, intercept >= 0."""
    if len({n for n, _ in pts}) < 2:
        return max(0.0, statistics.fmean(s for _, s in pts)), 0.0
    mx, my = statistics.fmean(n for n, _ in pts), statistics.fmean(s for _, s in pts)
    slope = max(0.0, sum((n - mx) * (s - my) for n, s in pts) / sum((n - mx) ** 2 for n, _ in pts))
    return max(0.0, my - slope * mx), slope


def fit_rows(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """(rows the compile line is fitted on, held-out rows) of one (mode, cache)."""
    shallow = [r for r in rows if _is_fit_row(r)]
    if len({compile_nodes(_spec(r["model"], r["layers"])) for r in shallow}) >= 2:
        return shallow, [r for r in rows if not _is_fit_row(r)]
    return list(rows), []


def compile_fit(rows: list[dict], source: str) -> dict | None:
    """A CompileFit (as a dict) of one (mode, cache) from its measured rows, or None without rows."""
    if not rows:
        return None
    fit, held = fit_rows(rows)
    pts = [(compile_nodes(_spec(r["model"], r["layers"])), float(r["compile_s"])) for r in fit]
    fixed, slope = _line(pts)
    desc = ", ".join(f"{r['model']} {r['layers']}L" for r in fit)
    hdesc = ", ".join(f"{r['model']} {r['layers']}L" for r in held)
    return {"fixed_s": round(fixed, 6), "per_node_s": round(slope, 6), "nodes": sorted(n for n, _ in pts),
            "validated_nodes": sorted(compile_nodes(_spec(r["model"], r["layers"])) for r in held),
            "source": f"{source}: least squares over {desc}" + (f"; held out: {hdesc}" if held else
                                                               "; every measured row used (no held-out row)")}


def derive(startup_rows: dict, profile: Profile, source: str = _H200) -> dict:
    """The profile's `host.startup` section from calibration/build_engine.startup_figures' rows.

    capture_host_ratio: mean of capture_s / predicted eager host time over the first model's capture rows;
    compile: see the module docstring. Raises ValueError without usable capture rows."""
    cap = startup_rows.get("capture", [])
    if not cap:
        raise ValueError("no capture rows")
    first = cap[0]["model"]
    ratios = []
    for r in cap:
        if r["model"] != first:
            continue
        host = eager_pass(_spec(r["model"], r.get("layers")), profile, "none", int(r["batch"]), r.get("ctx", DEFAULT_CTX))[1]
        ratios.append(r["capture_s"] / host)
    out: dict = {"warmup_runs": 2, "capture_host_ratio": round(statistics.fmean(ratios), 6)}
    comp = [r for r in startup_rows.get("compile", []) if r.get("compile_s") is not None]
    for dyn, mode in ((False, "static"), (True, "dynamic")):
        for cache in COMPILE_CACHES:
            fit = compile_fit([r for r in comp if bool(r.get("dynamic")) is dyn and r.get("cache") == cache], source)
            if fit is not None:
                out[f"compile_{mode}_{cache}"] = fit
    missing = [r for r in startup_rows.get("compile_not_measured", []) if r.get("dynamic") is True]
    why = "; ".join(f"{r.get('cache', '')} cache: " + (f"{r['error']}" if r.get("error") else f"skipped ({r['skipped']})")
                    for r in missing if r.get("error") or r.get("skipped"))
    if "compile_dynamic_cold" in out or "compile_dynamic_warm" in out:
        rows = fit_rows([r for r in comp if r.get("dynamic") is True and r.get("cache") == "cold"]
                        or [r for r in comp if r.get("dynamic") is True])[0]
        out["compile_dynamic_note"] = ("measured on " + ", ".join(f"{r['model']} {r['layers']}L" for r in rows)
                                       + ": every row fits the line, none is held out (not validated)")
    else:
        out["compile_dynamic_note"] = ("not measured: dynamic=True on the H200 run: " + why) if why else "not measured"
    out["source"] = (f"{source}: capture rows ({len(cap)}: capture_host_ratio from the {len(ratios)} {first} rows "
                     f"over launchsim's predicted eager host time), compile rows ({len(comp)})")
    return out


# --------------------------------------------------------------------------------------------- validation
def validation_rows(data: dict, profile: Profile) -> list[dict]:
    """Every measured start-up row of an engine_loop.json against the model: kind, model, what, measured_s,
    model_s, err (model/measured - 1), role (derived: used to make a constant; validation; excluded: why)."""
    fig, _ = figures(profile)
    out = []
    cap = [r for r in data.get("capture", []) if "capture_s" in r]
    first = cap[0]["model"] if cap else None
    seen: set = set()  # (model, batch) shapes run in the process before the capture section
    for r in data.get("loop", []):
        if "batch" in r:
            seen.add((r.get("model"), r["batch"]))
    for r in cap:
        m = _spec(r["model"], r.get("layers"))
        step, host = eager_pass(m, profile, r.get("fusion", "none"), int(r["batch"]), r.get("ctx", DEFAULT_CTX))
        what = f"b{r['batch']} order {r['order']}"
        for i, w in enumerate(r["warmup_s"]):
            new = i == 0 and (r["model"], r["batch"]) not in seen
            role = "excluded: first run of a new shape in the process" if new else "validation"
            out.append({"kind": "warm-up run", "model": r["model"], "what": f"{what} run {i + 1}", "measured_s": w,
                        "model_s": step, "role": role})
        seen.add((r["model"], r["batch"]))
        out.append({"kind": "capture", "model": r["model"], "what": what, "measured_s": r["capture_s"],
                    "model_s": fig.capture_host_ratio * host,
                    "role": "derived (capture_host_ratio)" if r["model"] == first else "validation"})
    for r in data.get("loop", []):
        if "capture_s" not in r:
            continue
        m = _spec(r["model"], r.get("layers"))
        step, host = eager_pass(m, profile, r.get("fusion", "none"), int(r["batch"]), r.get("ctx", DEFAULT_CTX))
        out.append({"kind": "graph (2 warm-ups + capture)", "model": r["model"], "what": f"b{r['batch']} loop",
                    "measured_s": r["capture_s"], "model_s": 2 * step + fig.capture_host_ratio * host,
                    "role": "validation"})
    comp = [r for r in data.get("compile", []) if "compile_s" in r]
    for dyn, mode in ((False, "static"), (True, "dynamic")):
        for cache in COMPILE_CACHES:
            fit = getattr(fig, f"compile_{mode}_{cache}")
            rows = [r for r in comp if bool(r.get("dynamic")) is dyn and r.get("cache") == cache]
            if fit is None or not rows:
                continue
            used = fit_rows(rows)[0]
            for r in rows:
                n = compile_nodes(_spec(r["model"], r["layers"]))
                out.append({"kind": f"compile {mode} {cache}", "model": r["model"],
                            "what": f"{r['layers']} layers, {n} nodes", "measured_s": r["compile_s"],
                            "model_s": fit.fixed_s + fit.per_node_s * n,
                            "role": "derived (fixed_s, per_node_s)" if r in used else "validation"})
    for r in out:
        r["err"] = r["model_s"] / r["measured_s"] - 1 if r["measured_s"] > 0 else math.inf
    return out


__all__ = ["compile_fit", "derive", "fit_rows", "validation_rows"]
