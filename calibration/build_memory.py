"""The profile's graph-memory section (`device.graph_memory`) from measured memory_*.json files.

    from calibration.build_memory import memory_section
    profile["device"]["graph_memory"] = memory_section("calibration/measured/h200-round-a", base=old_section)

No torch here. Per model the section holds (simulator/model/profile.py `GraphMemoryTable`):
- `layouts`: every measured (fusion, graph mode) table from calibration/child_memory.py, as measured
  (`workspace_in_first` marks the process's first capture, whose private pool holds the capture-stream
  cuBLAS workspace);
- `constants`: W = first full b1 private pool minus the piecewise b1 pool of the same process (median over
  the fit files), and alpha, sigma of the shared formula (simulator/engine/graph_memory.py) fitted by grid search
  on every cumulative shared row (both modes, keep and drop) of FIT_MODEL at FIT_FUSION only; other models
  and fusion levels are held out (calibration/validate_memory.py scores them);
- `batch`/`private_pool_bytes`/`capture_s`: the original fusion-agnostic table, kept from `base` when given
  (its capture times), else the FIT_FUSION full private pools without W;
- `static_buffers`, `formula`, `source`.
"""

from __future__ import annotations

import glob
import json
import os
import statistics

FIT_MODEL, FIT_FUSION = "qwen3-0.6b", "none"
MiB = 1 << 20
# sigma (extra segment rounding of a shared pool) is held at 0: a 2 MiB slack fits the fit rows slightly
# better (MAPE 1.0% vs 1.4%) but would make a one-size shared pool exceed its private pool and break the
# optimizer's exact arithmetic (graph_memory.py); the grid keeps the knob for other devices.
SIGMAS = (0.0,)
FORMULA = ("shared = W + sigma + P(s_1) + max(0, sum_{g != g_1} R(g) - alpha * (P(g_1) - R(g_1))); "
           "private = W + sum_s P(s); P measured per (fusion, mode, batch) else the segment formula; "
           "R = logits under keep + piece-boundary tensors under piecewise (simulator/engine/graph_memory.py)")


def load_measured(measured_dir) -> list[dict]:
    """Every memory_*.json in `measured_dir` (sorted by name)."""
    out = []
    for p in sorted(glob.glob(os.path.join(str(measured_dir), "memory_*.json"))):
        with open(p) as f:
            d = json.load(f)
        d["_file"] = os.path.basename(p)
        out.append(d)
    return out


def _layouts(d: dict) -> list[dict]:
    rows = []
    for i, lay in enumerate(d.get("layouts", [])):
        if "error" in lay:
            continue
        row = {k: lay[k] for k in ("fusion", "mode", "ctx", "batch", "private_reserved", "private_allocated",
                                   "shared_keep_reserved", "shared_drop_reserved", "shared_keep_allocated",
                                   "shared_drop_allocated") if k in lay}
        row["workspace_in_first"] = i == 0
        rows.append(row)
    return rows


def shared_rows(lay: dict, retention: str):
    """(sizes largest first, measured cumulative bytes) of every shared row of a layout table."""
    b, meas = lay["batch"], lay[f"shared_{retention}_reserved"]
    return [(sorted(b[i:], reverse=True), float(meas[i])) for i in range(len(b))]


def predict_shared(model, lay: dict, retention: str, sizes, alpha: float, sigma: float, w: float = 0.0) -> float:
    """The shared formula on a layout table's own private pools (P with W removed); W added as given."""
    from simulator.engine.graph_memory import retained_bytes

    pool = dict(zip(lay["batch"], lay["private_reserved"]))
    if lay.get("workspace_in_first"):
        pool[lay["batch"][0]] -= w_of(lay)
    p1, r = pool[sizes[0]], [retained_bytes(model, s, lay["mode"], retention) for s in sizes]
    return w + sigma + p1 + max(0.0, sum(r[1:]) - alpha * (p1 - r[0]))


def w_of(lay: dict) -> float:
    return float(lay.get("_w", 32 * MiB))


def fit_constants(files: list[dict]) -> dict:
    """W, alpha and sigma (see the module docstring) from the fit model and fusion only."""
    from simulator.model.models import load_model

    ws = []
    for d in files:
        lays = _layouts(d)
        if not (d.get("layouts") and d["layouts"][0].get("model") == FIT_MODEL and lays and lays[0]["fusion"] == FIT_FUSION):
            continue
        full = [x for x in lays if x["mode"] == "full" and x["workspace_in_first"]]
        pw = [x for x in lays if x["mode"] == "piecewise"]
        if full and pw and full[0]["batch"][0] == pw[0]["batch"][0]:
            ws.append(full[0]["private_reserved"][0] - pw[0]["private_reserved"][0])
    fit = [(d, x) for d in files for x in _layouts(d) if d["layouts"] and d["layouts"][0].get("model") == FIT_MODEL
           and x["fusion"] == FIT_FUSION]
    if not ws or not fit:
        raise ValueError(f"no {FIT_MODEL} {FIT_FUSION} full+piecewise memory file to fit the constants on")
    w = float(statistics.median(ws))
    m = load_model(FIT_MODEL)
    rows = []
    for _, lay in fit:
        lay = dict(lay, _w=w)
        for ret in ("keep", "drop"):
            rows += [(lay, ret, s, v) for s, v in shared_rows(lay, ret)]
    best = None
    for sigma in SIGMAS:
        for a in range(101):
            err = sum(abs(predict_shared(m, lay, ret, s, a / 100, sigma) / v - 1) for lay, ret, s, v in rows) / len(rows)
            if best is None or err < best[0] - 1e-12:
                best = (err, a / 100, sigma)
    return {"capture_workspace_bytes": w, "reuse_fraction": best[1], "slack_bytes": best[2],
            "source": (f"W: {FIT_MODEL} {FIT_FUSION}: private full b1 (first capture of the process) minus piecewise b1; alpha, sigma: "
                       f"grid fit on {len(rows)} cumulative shared rows of {FIT_MODEL} fusion {FIT_FUSION} "
                       f"(MAPE {best[0]:.3f}); other models and fusion levels held out")}


def memory_section(measured_dir, base: dict | None = None) -> dict:
    """`device.graph_memory` content (model name -> GraphMemoryTable dict) from memory_*.json files.

    `base`: the current section; its fusion-agnostic batch/private_pool_bytes/capture_s are kept."""
    files = load_measured(measured_dir)
    consts = fit_constants(files)
    out: dict = {}
    for d in files:
        lays = _layouts(d)
        if not d.get("layouts"):
            continue
        model = d["layouts"][0]["model"]
        env = d.get("environment", {})
        t = out.setdefault(model, {"layouts": [], "constants": consts, "formula": FORMULA,
                                   "static_buffers": d.get("static_buffers"), "source": ""})
        t["layouts"] += lays
        t["source"] = (t["source"] + " " if t["source"] else "") + (
            f"{d['_file']} (calibration/child_memory.py, {env.get('gpu')}, torch {env.get('torch')}, "
            f"warm-up runs {d.get('warmup_runs')})")
    for model, t in out.items():
        b = (base or {}).get(model)
        if b:
            for k in ("batch", "private_pool_bytes", "capture_s", "nodes", "shared_pool_total_bytes"):
                if b.get(k) is not None:
                    t[k] = b[k]
        if "batch" not in t:
            ref = next((x for x in t["layouts"] if x["fusion"] == FIT_FUSION and x["mode"] == "full"), t["layouts"][0])
            pools = [float(v) for v in ref["private_reserved"]]
            if ref["workspace_in_first"]:
                pools[0] -= consts["capture_workspace_bytes"]
            t["batch"], t["private_pool_bytes"] = list(ref["batch"]), pools
        t["layouts"].sort(key=lambda x: (x["fusion"], x["mode"]))
    return out


__all__ = ["memory_section", "load_measured", "fit_constants", "predict_shared", "shared_rows", "FIT_MODEL",
           "FIT_FUSION"]
