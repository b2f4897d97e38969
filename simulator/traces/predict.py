"""Predict one step of an imported workload: what-if step -> plan -> engine -> figures.

Returns the same `Prediction` as `predict.predict` for a preset, plus the what-if notes (unscaled
kernels, fusion groups) and the traced figures the prediction can be read against.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from simulator.model.costs import CostModel
from simulator.engine.predict import Prediction, host_band, simulate
from simulator.model.profile import Profile, load_profile
from simulator.traces.host import policy_of
from simulator.traces.whatif import WhatIf, workload_step
from simulator.model.workload_file import Workload, load_workload


def predict_workload(workload: Workload | str | Path, batch: int | None = None, ctx: int | None = None,
                     fusion: str = "none", graph: str = "none", profile: Profile | str | None = None,
                     engine: str = "fast", replicates: int = 0, seed: int = 0) -> tuple[Prediction, WhatIf, Workload]:
    wl = workload if isinstance(workload, Workload) else load_workload(workload)
    prof = profile if isinstance(profile, Profile) else load_profile(profile)
    costs = CostModel(prof)
    wi = workload_step(wl, costs, batch, ctx, fusion)
    res, tl = simulate(wi.step, costs, graph, engine, pure_decode=True)
    band = host_band(wi.step, costs, graph, replicates, seed) if replicates > 0 else None
    return Prediction(res, tl, wi.step, band), wi, wl


def host_state_band(wl: Workload, batch: int | None, ctx: int | None, fusion: str, graph: str,
                    profile: Profile) -> tuple[float, float] | None:
    """Step ms with the profile's host lane scaled to the calibration VM's fast and slow canaries (canary_band);
    None when the profile records no canary."""
    from simulator.model.profile import canary_band, host_scaled

    if profile.host.canary is None:
        return None
    fast, slow = canary_band(profile)
    out = []
    for c in (fast, slow):
        p, _, _ = predict_workload(wl, batch, ctx, fusion, graph, host_scaled(profile, c))
        out.append(p.result.step_s * 1e3)
    return out[0], out[1]


def result_dict(p: Prediction, wi: WhatIf, wl: Workload, batch: int | None, ctx: int | None, fusion: str,
                profile: Profile | None = None) -> dict:
    """One flat row (times in ms) plus the what-if details; `profile` adds the host canary it assumes."""
    d = {"workload": wl.name, "batch": batch or wl.batch, "ctx": ctx or wl.ctx, "fusion": fusion, **p.as_dict(),
         "host_time_policy": policy_of(wl) if fusion == "none" else "compiled path (profile)",
         "traced_host_ms": round(wl.host_ms, 4), "traced_gpu_ms": round(wl.gpu_ms, 4),
         "scaled_kernels": wi.scaled, "unscaled_kernels": len(wi.unscaled)}
    if wi.roles:
        d["retarget"] = {"traced_batch": wl.batch, "traced_ctx": wl.ctx, "kernels_by_role": dict(sorted(
            (k, v) for k, v in wi.roles.items() if v))}
    if wi.unscaled:
        d["unscaled"] = dict(Counter(wi.unscaled).most_common())
    if wi.fusion:
        d["fusion_saved_kernels"] = wi.fusion["saved"]
        d["fusion_rule"] = wi.fusion["rule"]
        d["fusion_groups"] = wi.fusion["groups"]
    if wi.notes:
        d["notes"] = wi.notes
    if profile is not None:
        from simulator.model.profile import assumed_canary

        c = assumed_canary(profile)
        if c is not None:
            d["host_canary_us"] = round(c, 4)
    return d
