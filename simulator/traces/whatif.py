"""An imported workload as a simulator `Step`, with batch/context and fusion what-ifs.

Every kernel becomes an `Op` with `fixed_gpu_s` = its measured time; its host cost follows the
workload's host-time policy (simulator/traces/host.py: the profile's launch paths plus host-only ops
and traced interpreter gaps, or the traced host time, or the traced time deflated by the profile's
profiler-overhead factor); the host tail becomes trailing host-only ops. The plan and engines then run
as for a preset model (graph none / full / piecewise use the profile's gap, graph node and replay
costs).

Batch (and context) what-ifs: simulator/traces/retarget.py classifies every traced call (GEMM, attention,
byte-moving, constant) from its recorded input shapes, or from the model named at import when the trace
recorded none: each tensor whose leading dim is the traced batch (or batch x tokens) is resized,
attention's key/value length is set to the new context, and the kernel's time becomes measured x
cost(new shape) / cost(traced shape) under the profile's cost model (GEMM and attention tables where they
cover the shape, else the roofline; byte curves for the rest, held flat below their first grid point).
Split-K reduce and split-KV combine kernels come and go with the size. A kernel that cannot be classified
refuses the what-if (one line); the traced time is never answered for another size. Host costs per launch
do not change with size (a dropped or added kernel drops or adds its launch).
Fusion `compiled`: `trace_fusion` merges runs; every launch then costs the profile's `compiled`
host path (plus one compiled-region entry), as the preset `compiled` level does; the traced host
tail (eager Python) is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from simulator.model.costs import CostModel
from simulator.common.errors import UserError
from simulator.common import vocab as V
from simulator.model.kernels import LaunchPath, Op, OpClass, Step
from simulator.traces.fusion import fuse, summary
from simulator.traces.host import charge, charge_tail, deflate_factor, describe, policy_of
from simulator.traces.retarget import retarget
from simulator.traces.shapes import _gpu_s, cost_op, label, rescale_dims  # noqa: F401  (re-exported)
from simulator.model.workload_file import Workload

US = 1e-6
WORKLOAD_FUSIONS = V.values(V.WORKLOAD_FUSIONS)


class WhatIfError(UserError):
    """A what-if an imported workload cannot answer."""


@dataclass
class WhatIf:
    step: Step
    unscaled: list[str] = field(default_factory=list)  # labels of kernels kept at measured time
    scaled: int = 0
    fusion: dict | None = None
    notes: list[str] = field(default_factory=list)
    roles: dict[str, int] = field(default_factory=dict)  # re-priced kernels by role (simulator/traces/retarget.py)


def scaled_times(wl: Workload, costs: CostModel, batch: int | None, ctx: int | None) -> tuple[list[float], list[str]]:
    """Each kernel's GPU µs at (batch, ctx) when the kernel list does not change there (simulator/traces/retarget.py
    re-prices; it raises where it cannot, never keeping the traced time for another size)."""
    r = retarget(wl, costs, batch, ctx)
    if len(r.kernels) != len(wl.kernels):
        raise WhatIfError(f"workload '{wl.name}': the kernel list changes at batch {batch}: use workload_step")
    return r.gpu_us, []


def check_workload_fusion(fusion: str) -> None:
    """WhatIfError unless an imported workload can be rebuilt at `fusion`: none (as traced) or compiled (fusion
    rules). The one rule the workload kinds' validators and the CLI call."""
    if fusion not in WORKLOAD_FUSIONS:
        raise WhatIfError(f"fusion '{fusion}' is not available for an imported workload: use "
                          f"{V.one_of(V.WORKLOAD_FUSIONS)}")


def workload_step(wl: Workload, costs: CostModel, batch: int | None = None, ctx: int | None = None,
                  fusion: str = "none") -> WhatIf:
    check_workload_fusion(fusion)
    if batch is not None and batch <= 0:
        raise WhatIfError(f"batch must be a positive integer, got {batch}")
    if ctx is not None and ctx <= 0:
        raise WhatIfError(f"ctx must be a positive integer, got {ctx}")
    rt = retarget(wl, costs, batch, ctx)
    gpu, unscaled, ks = rt.gpu_us, [], rt.kernels
    b = batch or wl.batch or 1
    tokens = b * (wl.q_len or 1)
    notes = []
    if fusion == "none":
        policy = policy_of(wl)
        factor = deflate_factor(costs.profile) if policy == "deflate" else 1.0
        ops = [o for k, g in zip(ks, gpu) for o in charge(k, g * US, policy, factor)]
        ops += charge_tail(wl, policy, factor)
        notes.append(f"host time: {describe(policy, costs.profile)}")
        fz = None
    else:
        seq = [(label(k), OpClass(k.op_class), g, k.event) for k, g in zip(ks, gpu)]
        merged = fuse(seq)
        fz = summary(seq, merged)
        ops = [Op(m.name if len(m.members) > 1 else ks[m.members[0]].name, m.op_class, LaunchPath.COMPILED,
                  fixed_gpu_s=m.gpu_us * US) for m in merged]
        notes.append("compiled: host cost per launch from the profile's 'compiled' path; traced host tail dropped")
    step = Step(tuple(ops), label=f"{wl.name} (imported) {fusion} batch={b}", layers=0, tokens=tokens)
    resized = (batch is not None and batch != wl.batch) or (ctx is not None and ctx != wl.ctx)
    scaled = sum(n for r, n in rt.roles.items() if r != "constant") if resized else 0
    notes += rt.notes
    return WhatIf(step, unscaled, scaled, fz, notes, dict(rt.roles) if resized else {})
