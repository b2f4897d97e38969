"""Host-time policies for an imported trace: what host time each traced launch is charged.

While torch.profiler records (and after, while CUPTI stays attached) every launch and every aten op
pays for tracing, so a trace's host durations are inflated; its GPU kernel durations (CUPTI GPU
timestamps) are not. Policies (`import-trace --host-time`):

- `calibrated` (default): host time comes from the profile. Each top-level aten op call that
  launches kernels is charged its launch path (`host.launch_us[path]`, path from the op class of
  its kernels: gemm, attention, embedding, reduction, copy, elementwise); each further kernel of
  the same call a bare launch (`raw`: cuBLAS split-K reduce, cuDNN attention's helper kernels);
  each top-level aten op that launches nothing (view, reshape, slice, expand, a no-op `to`)
  `eager_view`. On top comes the traced interpreter time between top-level ops: Python of the
  traced program (module calls, framework code) that no profile figure can know. No launch and no
  aten op runs in it; the profiler's per-op callbacks that fall just outside an op's window still
  inflate it slightly.
- `trace`: the traced host durations as they are (inflated under the profiler).
- `deflate`: traced host durations divided by the profile's measured profiler-overhead factor
  (`host.profiler_overhead.factor`); an error names the field when the profile lacks it.

`annotate` fills each kernel's `path`, `host_ops` and `gap_us` (host-only ops and interpreter µs
since the previous launch) at import; `charge` turns one workload kernel into simulator ops under a
policy at prediction time, so the figures follow the profile passed to `predict`.
"""

from __future__ import annotations

import bisect

from simulator.common.errors import UserError
from simulator.common import vocab as V
from simulator.model.kernels import LaunchPath, Op, OpClass
from simulator.traces.classify import EAGER_PATH

POLICIES = V.values(V.HostTime)
US = 1e-6
_CALL_PRIORITY = (OpClass.ATTENTION, OpClass.GEMM, OpClass.EMBEDDING, OpClass.SAMPLING)
OVERHEAD_FIELD = "host.profiler_overhead.factor"


class HostPolicyError(UserError):
    """An unknown host-time policy, or one the profile cannot serve."""


def check_policy(policy: str) -> str:
    if policy not in POLICIES:
        raise HostPolicyError(f"unknown host_time '{policy}': use one of {', '.join(POLICIES)}")
    return policy


def deflate_factor(profile) -> float:
    """The profile's measured profiler-overhead factor, or a HostPolicyError naming the field."""
    po = getattr(profile.host, "profiler_overhead", None)
    if po is None:
        raise HostPolicyError(f"profile '{profile.name}' has no {OVERHEAD_FIELD} (a measured profiler-overhead "
                              "factor): host_time deflate needs it; use host_time calibrated or trace")
    return float(po.factor)


def describe(policy: str, profile=None) -> str:
    """One phrase for output: which policy, and where its figures come from."""
    name = profile.name if profile is not None else "?"
    if policy == "calibrated":
        return (f"calibrated (profile '{name}': launch path per aten op call, raw per extra kernel, eager_view per "
                "host-only op, plus traced interpreter gaps)")
    if policy == "deflate":
        f = deflate_factor(profile) if profile is not None else float("nan")
        return f"deflate (traced host / {f:.3f}, {OVERHEAD_FIELD} of profile '{name}')"
    return "trace (traced host durations, inflated by the profiler)"


def _top_ops(cpu_ops, threads) -> list:
    """Top-level cpu ops (no enclosing cpu op) on the launching threads, by start time."""
    out, end = [], {}
    # sorted by (ts, -dur) and, for ties, trace order (a stable sort by that key), without a key function
    items = [(e.ts, -e.dur, i, e) for i, e in enumerate(cpu_ops) if (e.pid, e.tid) in threads]
    items.sort()
    ninf = float("-inf")
    for ts, _, _, e in items:
        key = (e.pid, e.tid)
        if ts >= end.get(key, ninf) - 1e-3:
            out.append(e)
            end[key] = e.end
    return out


def _call_path(ks) -> LaunchPath:
    classes = [k.op_class for k in ks]
    for c in _CALL_PRIORITY:
        if c in classes:
            return EAGER_PATH[c]
    return EAGER_PATH[classes[0]]


def annotate(kernels, windows, cpu_ops, syncs) -> list[tuple[int, float]]:
    """Fill path / host_ops / gap_us of in-step kernels; return each step's tail (host_ops, gap_us)."""
    threads = {(k.launch.pid, k.launch.tid) for k in kernels if k.launch is not None}
    tops = _top_ops(cpu_ops, threads)
    starts = [e.ts for e in tops]
    launching = {id(k.chain[0]) for k in kernels if k.chain}
    calls: dict[int, list] = {}
    for k in kernels:
        if k.chain:
            calls.setdefault(id(k.chain[0]), []).append(k)

    ends = [e.end for e in tops]
    host_only = [id(e) not in launching for e in tops]
    ntops = len(tops)
    within = syncs.within

    def between(a: float, b: float) -> tuple[int, float]:
        """Host-only top-level ops starting in [a, b) and interpreter µs in (a, b] outside any top op."""
        # max(0.0, min(end, b) - max(ts, a)) written out: the same floats, without two calls per op
        j = bisect.bisect_left(starts, a) - 1
        if j < 0:
            j = 0
        n, covered = 0, 0.0
        while j < ntops:  # an index walk, not tops[i:]: a slice per kernel made the import quadratic
            ts = starts[j]
            if ts >= b:
                break
            e = ends[j]
            x = (b if b < e else e) - (a if a > ts else ts)
            if x > 0.0:
                covered += x
            if ts >= a and host_only[j]:
                n += 1
            j += 1
        x = (b - a) - covered - within(a, b)
        return n, x if x > 0.0 else 0.0

    tails = []
    for st in windows:
        prev = st.host_start
        for k in kernels[st.i0:st.i1]:
            if k.launch is None or k.graph_pos > 0:
                continue
            call = calls.get(id(k.chain[0])) if k.chain else None
            if call is None:
                k.path = EAGER_PATH[k.op_class].value
            elif call[0] is k:
                k.path = _call_path(call).value
            else:
                k.path = LaunchPath.RAW.value
            k.host_ops, k.gap_us = between(prev, k.submit)
            prev = k.submit
        tails.append(between(prev, max(st.host_end, prev)))
    return tails


def charge(k, gpu_s: float, policy: str, factor: float = 1.0) -> list[Op]:
    """Simulator ops for one workload kernel under `policy`: host-only ops first, then the launch."""
    cls = OpClass(k.op_class)
    eager = EAGER_PATH[cls]
    if policy == "trace" or (policy == "calibrated" and k.path is None):
        return [Op(k.name, cls, eager, fixed_gpu_s=gpu_s, fixed_host_s=k.host_us * US)]
    if policy == "deflate":
        return [Op(k.name, cls, eager, fixed_gpu_s=gpu_s, fixed_host_s=k.host_us / factor * US)]
    ops = [Op("host-only op", OpClass.VIEW, LaunchPath.EAGER_VIEW)] * k.host_ops
    if k.gap_us > 0:
        ops.append(Op("interpreter", OpClass.VIEW, LaunchPath.EAGER_VIEW, fixed_host_s=k.gap_us * US))
    ops.append(Op(k.name, cls, LaunchPath(k.path), fixed_gpu_s=gpu_s))
    return ops


def charge_tail(wl, policy: str, factor: float = 1.0) -> list[Op]:
    """The host tail after the step's last launch, as host-only ops."""
    if policy == "calibrated" and wl.host_time is not None:
        ops = [Op("host-only op", OpClass.VIEW, LaunchPath.EAGER_VIEW)] * wl.host_time.get("tail_ops", 0)
        gap = wl.host_time.get("tail_gap_us", 0.0)
        return ops + ([Op("host tail", OpClass.VIEW, LaunchPath.EAGER_VIEW, fixed_host_s=gap * US)] if gap > 0 else [])
    t = wl.host_tail_us / (factor if policy == "deflate" else 1.0)
    return [Op("host tail", OpClass.VIEW, LaunchPath.EAGER_VIEW, fixed_host_s=t * US)] if t > 0 else []


def policy_of(wl) -> str:
    """The workload's stored policy; files written before policies existed used traced host time."""
    return (wl.host_time or {}).get("policy", "trace")


def host_breakdown(wl, costs) -> dict:
    """Charged host ms of the step under its policy, by part (no engine, no noise: p50 costs)."""
    policy = policy_of(wl)
    factor = deflate_factor(costs.profile) if policy == "deflate" else 1.0
    parts: dict[str, float] = {}
    for k in wl.kernels:
        for o in charge(k, 0.0, policy, factor):
            key = ("launches" if o.launches_kernel else "interpreter" if o.fixed_host_s is not None and
                   o.name == "interpreter" else "host_only_ops")
            parts[key] = parts.get(key, 0.0) + costs.host_s(o)
    for o in charge_tail(wl, policy, factor):
        key = "host_only_ops" if o.fixed_host_s is None else "interpreter" if policy == "calibrated" else "tail"
        parts[key] = parts.get(key, 0.0) + costs.host_s(o)
    out = {k: round(v * 1e3, 4) for k, v in parts.items()}
    out["total"] = round(sum(parts.values()) * 1e3, 4)
    return out
