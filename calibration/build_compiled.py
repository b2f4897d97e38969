"""The profile's torch.compile figures from round i (calibration/measured/h200-round-i; CPU only, no torch):

- `triton_curves`: device.tables.triton_pointwise / triton_reduction / triton_reduction_loop, Inductor's own kernels'
  time against bytes read + written, from job_triton's graph replays (triton.json: per point the time per call of 16
  identical calls in one replayed graph, as the eager curves are taken, calibration/tables.py curves); per size, the
  mean over the family's functions of their bytes and of their times (sizes that are the same work, a looped
  reduction's sizes under one row, averaged into one point). Every function must have launched exactly one
  kernel in the profiled process (counts.json `curves`): a function that did not is refused, not averaged in.
- `fit_compiled_wrapper`: host.compiled_wrapper_us, Inductor's wrapper cost per kernel beyond the compiled
  microbenchmark (`launch_us.compiled`), FITTED on the reference decoder's compiled rows only (calibration/
  reference_decoder.py, qwen3-0.6b 28 layers, dynamic=False, ctx 512): round b's rows (b1, b16; the calibration
  process, canary 6.49 us) and round i's fast-host passes of the same rows (host.json: both row canaries
  <= FAST_US and within ROW_AGREE of each other), each pass's step time moved to the profile's calibration canary by
  the ratio of canaries (the host scaling launchsim applies, model/profile.host_scaled). Per round the median of its
  rows, then the mean of the rounds (one figure per machine); w such that the predicted isolated step (eager
  graph mode, fast engine) at b1 and b16 matches that mean on average. The independent decoder's rows in rounds
  h and i are never used here: they are the held-out check (calibration/validate_compiled_host.py).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

ROUND_I = Path(__file__).resolve().parent / "measured" / "h200-round-i"
FAST_US = 7.6  # a fast-host row: both canaries at or under this (issue 20's fast-host threshold)
ROW_AGREE = 0.10  # |before / after - 1| at or under this: the host did not move during the row
FAMILIES = {"pointwise": "triton_pointwise", "reduction": "triton_reduction", "reduction_loop": "triton_reduction_loop"}
FIT_ROWS = {"ref_c28_b1": 1, "ref_c28_b16": 16}  # round i host.json row -> batch


def triton_curves(triton: dict, counts: dict) -> dict[str, dict]:
    """{profile table name: {"bytes": [...], "us": [...]}} from round i's triton.json and counts.json."""
    one = {(c["name"], c["exp"]): c["kernels"] for c in counts.get("curves", [])}
    bad = sorted({(n, e, k) for (n, e), k in one.items() if k != 1})
    if bad:
        raise ValueError(f"round i curve functions that did not launch exactly one kernel: {bad}")
    checked = {n for n, _ in one}
    out: dict[str, dict] = {}
    for fam, table in FAMILIES.items():
        by_exp: dict[int, list[dict]] = {}
        for p in triton["points"]:
            if p["family"] == fam:
                if p["name"] not in checked:
                    raise ValueError(f"round i curve function {p['name']} has no kernel-count check in counts.json")
                by_exp.setdefault(p["exp"], []).append(p)
        merged: dict[float, list[float]] = {}  # sizes under one row of the looped family are the same work
        for v in by_exp.values():
            merged.setdefault(statistics.fmean(q["bytes"] for q in v), []).append(
                statistics.fmean(q["graph_us"] for q in v))
        pts = sorted((b, statistics.fmean(us)) for b, us in merged.items())
        if len(pts) >= 2:
            out[table] = {"bytes": [b for b, _ in pts], "us": [u for _, u in pts]}
    return out


def add_triton_curves(p: dict, root: Path = ROUND_I) -> str:
    """Add the Triton curves to profile dict `p` (device.tables) and say so in device.source; returns the note."""
    triton = json.loads((root / "triton.json").read_text())
    counts = json.loads((root / "counts.json").read_text())
    curves = triton_curves(triton, counts)
    p["device"]["tables"].update(curves)
    src = (f"Triton (Inductor) kernel curves {', '.join(curves)} from {root.name}/triton.json (round_i.py job_triton: "
           f"graph replays of torch.compile'd pointwise and reduction functions, one kernel each by counts.json, "
           f"torch {triton['environment'].get('torch')}, triton {triton['environment'].get('triton')})")
    p["device"]["source"] += "; " + src
    return src


def fast_rows(host: dict, key: str) -> list[tuple[float, float]]:
    """(row canary us, step median ms) of every fast-host, steady pass of row `key` in round i's host.json."""
    out = []
    for ps in host["passes"]:
        for r in ps["rows"]:
            if r["row"] != key:
                continue
            a, b = r["canary_before_us"], r["canary_after_us"]
            if max(a, b) <= FAST_US and abs(a / b - 1) <= ROW_AGREE:
                out.append((0.5 * (a + b), r["step_ms"]["median"]))
    return out


def fit_targets(timing_b: dict, host_i: dict, c0: float) -> dict:
    """The measured compiled-eager step (ms) of the reference rows at the calibration canary c0, per round and
    batch, and their mean over rounds per batch."""
    rb = {}
    for r in timing_b["rows"]:
        if (r.get("model"), r.get("fusion"), r.get("dynamic"), r.get("ctx")) == ("qwen3-0.6b", "compiled", False, 512) \
                and "eager" in r:
            rb[r["batch"]] = r["eager"]["isolated"]["step_ms"]["p50"]  # the calibration process: canary c0 itself
    ri = {}
    for key, b in FIT_ROWS.items():
        xs = fast_rows(host_i, key)
        if xs:
            ri[b] = statistics.median(ms * c0 / c for c, ms in xs)
    rounds = {"h200-round-b": rb, "h200-round-i": ri}
    batches = sorted(set(rb) & set(ri))
    return {"rounds": rounds, "batches": batches,
            "mean_ms": {b: statistics.fmean(r[b] for r in rounds.values()) for b in batches},
            "passes": {key: len(fast_rows(host_i, key)) for key in FIT_ROWS}}


def predicted_step_ms(q: dict, batch: int, wrapper_us: float) -> tuple[float, int]:
    """(isolated compiled-eager step ms, launches) of the reference qwen3-0.6b at `batch`, ctx 512, under profile
    dict `q` with host.compiled_wrapper_us = wrapper_us (the fast engine; graph none)."""
    import copy

    from simulator.engine.fastpath import simulate_fast
    from simulator.engine.plan import build_plan
    from simulator.engine.timeline import summarize
    from simulator.model.costs import CostModel
    from simulator.model.models import PRESETS
    from simulator.model.profile import parse_profile
    from simulator.model.workload import build_step, decode

    p = copy.deepcopy(q)
    p["host"]["compiled_wrapper_us"] = wrapper_us
    cm = CostModel(parse_profile(p))
    st = build_step(PRESETS["qwen3-0.6b"], decode(batch, 511), "compiled")  # ctx 512 keys: 511 past + the new one
    pl = build_plan(st, cm, "none")
    return summarize(simulate_fast(pl)).step_s * 1e3, pl.launches


def fit_compiled_wrapper(q: dict, timing_b: dict, host_i: dict) -> tuple[float, str]:
    """host.compiled_wrapper_us fitted as the module docstring says; returns (w, note)."""
    c0 = q["host"]["canary"]["calibration_us"]
    t = fit_targets(timing_b, host_i, c0)
    if not t["batches"]:
        raise ValueError("no reference compiled row common to rounds b and i: nothing to fit the wrapper on")
    # the predicted step is linear in w while the step is host-bound (every launch pays w): solve from two points
    p0 = {b: predicted_step_ms(q, b, 0.0) for b in t["batches"]}
    p1 = {b: predicted_step_ms(q, b, 10.0) for b in t["batches"]}
    ws = [(t["mean_ms"][b] - p0[b][0]) / ((p1[b][0] - p0[b][0]) / 10.0) for b in t["batches"]]
    w = max(statistics.fmean(ws), 0.0)
    rb, ri = t["rounds"]["h200-round-b"], t["rounds"]["h200-round-i"]
    note = (f"host.compiled_wrapper_us {w:.2f} us per kernel FITTED on the reference decoder's compiled rows "
            f"(qwen3-0.6b, dynamic=False, ctx 512, b{'/b'.join(map(str, t['batches']))}): round b "
            + ", ".join(f"b{b} {rb[b]:.3f} ms" for b in t["batches"])
            + " (calibration process), round i " + ", ".join(f"b{b} {ri[b]:.3f} ms" for b in t["batches"])
            + f" (median of {'/'.join(str(n) for n in t['passes'].values())} fast-host passes moved to canary {c0} "
            f"us); their mean per batch against the step predicted without it; the independent decoder's rows "
            "(rounds h and i) are held out (calibration/validation/compiled_host.md)")
    return w, note
