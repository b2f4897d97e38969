"""From a trace file to a workload: read, link, find steps, keep the representative step, record the
host-time policy (simulator/traces/host.py) and what it charges under the given profile."""

from __future__ import annotations

import hashlib
from pathlib import Path

from simulator.traces.importer import ImportedTrace, import_trace, infer_batch, representative
from simulator.traces.read import read_trace
from simulator.traces.gcpause import no_gc
from simulator.model.workload_file import FORMAT_VERSION, StepsInfo, Workload


def _device(meta: dict) -> str | None:
    props = meta.get("deviceProperties")
    if isinstance(props, list) and props and isinstance(props[0], dict):
        return props[0].get("name")
    return None


def workload_from_trace(path: str | Path, steps: str | int = "auto", batch: int | None = None,
                        host_time: str = "calibrated", profile=None, model=None,
                        ctx: int | None = None) -> tuple[Workload, ImportedTrace]:
    """Import `path`; `batch` overrides the batch size read from recorded shapes. `host_time` is the
    host-time policy; `profile` (a Profile, name or path) is checked for what the policy needs and
    gives the charged host figure recorded in the file (predictions re-charge from their own profile).
    `model` (a ModelSpec, preset name or config.json path) is kept in the file: its shapes size kernels the
    trace recorded none for, so the workload retargets (simulator/traces/retarget.py); `ctx` is the traced
    context (attended KV length) where no attention shapes were recorded; it must agree with them if they were."""
    from simulator.model.costs import CostModel
    from simulator.model.profile import Profile, load_profile
    from simulator.traces.host import check_policy, deflate_factor, host_breakdown

    check_policy(host_time)
    prof = profile if isinstance(profile, Profile) else load_profile(profile)
    if host_time == "deflate":
        deflate_factor(prof)
    p = Path(path)
    with no_gc():
        imp = import_trace(read_trace(p), steps)
    kernels, tail, how, (tail_ops, tail_gap) = representative(imp)
    b, q_len, c = infer_batch(imp.kernels)
    if ctx is not None and c is not None and ctx != c:
        from simulator.traces.read import TraceError

        raise TraceError(f"{p}: the trace's attention shapes say context {c}, the given context is {ctx}")
    ctx = c if c is not None else ctx
    spec = None
    if model is not None:
        from simulator.model.models import ModelSpec, load_model
        from simulator.traces.retarget import model_record

        spec = model_record(model if isinstance(model, ModelSpec) else load_model(model))
    name = p.name
    for suf in (".gz", ".json"):
        name = name[: -len(suf)] if name.endswith(suf) else name
    wl = Workload(
        format_version=FORMAT_VERSION,
        kind="launchsim-workload",
        name=name,
        source={"trace": str(p), "sha256": hashlib.sha256(p.read_bytes()).hexdigest(),
                "device": _device(imp.meta), "kernels_in_trace": len(imp.kernels)},
        batch=batch or b,
        q_len=q_len,
        ctx=ctx,
        steps=StepsInfo(method=imp.method, representative=how, outside_kernels=imp.outside, rows=imp.step_rows),
        host_tail_us=round(float(tail), 4),
        kernels=kernels,
        model=spec,
    )
    wl.host_time = {"policy": host_time, "profile": prof.name, "tail_ops": int(tail_ops),
                    "tail_gap_us": round(float(tail_gap), 4), "traced_host_ms": round(wl.host_ms, 4)}
    wl.host_time["charged_host_ms"] = host_breakdown(wl, CostModel(prof))
    return wl, imp
