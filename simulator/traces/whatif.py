"""An imported workload as a simulator `Step`, with batch/context and fusion what-ifs.

Every kernel becomes an `Op` with `fixed_gpu_s` = its measured time; its host cost follows the
workload's host-time policy (simulator/traces/host.py: the profile's launch paths plus host-only ops
and traced interpreter gaps, or the traced host time, or the traced time deflated by the profile's
profiler-overhead factor); the host tail becomes trailing host-only ops. The plan and engines then run
as for a preset model (graph none / full / piecewise use the profile's gap, graph node and replay
costs).

Batch (and context) what-ifs: where the trace recorded input shapes, each tensor whose leading
dim is the traced batch (or batch x tokens) is resized, attention's key/value length is set to the
new context, and the kernel's time becomes measured x cost(new shape) / cost(traced shape) under
the profile's cost model (GEMM and attention tables where they cover the shape, else the roofline;
byte curves for the rest, held flat below their first grid point). Kernels without recorded shapes keep their measured time and are
reported as `unscaled`. Host costs do not change with size.
Fusion `compiled`: `trace_fusion` merges runs; every launch then costs the profile's `compiled`
host path (plus one compiled-region entry), as the preset `compiled` level does; the traced host
tail (eager Python) is dropped.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from simulator.model.costs import CostModel
from simulator.common.errors import UserError
from simulator.common import vocab as V
from simulator.model.kernels import LaunchPath, Op, OpClass, Step
from simulator.traces.classify import EAGER_PATH
from simulator.traces.fusion import fuse, summary
from simulator.traces.host import charge, charge_tail, deflate_factor, describe, policy_of
from simulator.model.workload_file import KernelEntry, Workload

US = 1e-6
WORKLOAD_FUSIONS = V.values(V.WORKLOAD_FUSIONS)
_ESIZE = {"c10::bfloat16": 2, "c10::half": 2, "float": 4, "double": 8, "long int": 8, "long": 8, "int": 4,
          "short int": 2, "bool": 1, "unsigned char": 1, "signed char": 1, "c10::float8_e4m3fn": 1}
_INDEXED_WRITES = ("index_copy", "index_put", "scatter", "slice_scatter", "select_scatter", "index_add")


class WhatIfError(UserError):
    """A what-if an imported workload cannot answer."""


@dataclass
class WhatIf:
    step: Step
    unscaled: list[str] = field(default_factory=list)  # labels of kernels kept at measured time
    scaled: int = 0
    fusion: dict | None = None
    notes: list[str] = field(default_factory=list)


def label(k: KernelEntry) -> str:
    """A short readable name: the top-level aten op, else the kernel name without templates."""
    if k.op:
        return k.op
    n = re.sub(r"<.*", "", k.name.replace("void ", ""))
    return n.split("::")[-1][:60] or k.name[:60]


def _is_shape(d) -> bool:
    return isinstance(d, list) and bool(d) and all(isinstance(x, int) for x in d)


def _tensors(dims: list, dtypes: list) -> list[tuple[list[int], int]]:
    """(shape, element bytes) of each tensor input; a tensor list (e.g. cat's inputs) counts each."""
    out = []
    for i, d in enumerate(dims):
        t = str(dtypes[i]).lower() if i < len(dtypes) else ""
        e = _ESIZE.get(t, 2)
        if _is_shape(d):
            out.append((d, e))
        elif isinstance(d, list) and d and all(_is_shape(x) for x in d):
            out.extend((x, e) for x in d)
    return out


def _gpu_s(costs: CostModel, op: Op) -> float:
    """The cost model's time, with byte curves held flat below their first grid point (kernel time is
    flat at small sizes; the roofline floor there need not match the curve's first point)."""
    t = costs.profile.device.tables
    curve = {OpClass.ELEMENTWISE: t.elementwise, OpClass.REDUCTION: t.reduction or t.elementwise,
             OpClass.COPY: t.memcopy or t.elementwise, OpClass.EMBEDDING: t.embedding or t.memcopy,
             OpClass.SAMPLING: t.reduction}.get(op.op_class)
    if curve is not None and op.bytes < curve.bytes[0]:
        return curve.us[0] * US
    return costs.gpu_s(op)


def cost_op(k: KernelEntry, dims: list) -> Op | None:
    """An op with flops/bytes/shape for the cost model, from an aten op's input shapes."""
    cls = OpClass(k.op_class)
    ts = _tensors(dims, k.dtypes or [])
    if not ts:
        return None
    op = (k.shape_op or "").lower()
    path = EAGER_PATH[cls]
    if cls is OpClass.GEMM and len(ts) >= 2:
        (a, e), (b, _) = (ts[-2], ts[-1]) if op.endswith("addmm") else (ts[0], ts[1])
        if op.endswith("linear"):
            m, kk, n = math.prod(a[:-1]), a[-1], b[0]
        elif len(b) == 2:
            m, kk, n = math.prod(a[:-1]), a[-1], b[-1]
        else:  # batched: fold the batch into m for flops and bytes; no table lookup
            bt = math.prod(a[:-2])
            f = 2.0 * bt * a[-2] * a[-1] * b[-1]
            return Op(k.name, cls, path, f, e * bt * (a[-2] * a[-1] + a[-1] * b[-1] + a[-2] * b[-1]))
        return Op(k.name, cls, path, 2.0 * m * n * kk, e * (m * kk + n * kk + m * n), (("k", kk), ("m", m), ("n", n)))
    if cls is OpClass.ATTENTION and "scaled_dot_product" in op and len(ts) >= 2 and len(ts[0][0]) == 4:
        (q, e), (kv, _) = ts[0], ts[1]
        B, H, L, hd = q
        KV, S = kv[1], kv[2]
        shape = (("batch", B), ("ctx", S), ("head_dim", hd), ("heads", H), ("kv_heads", KV), ("q_len", L))
        return Op(k.name, cls, path, 4.0 * B * H * L * S * hd, e * (2 * B * KV * S * hd + 2 * B * H * L * hd), shape)
    if cls is OpClass.EMBEDDING and op.endswith("embedding") and len(ts) >= 2:
        (w, e), (ids, _) = ts[0], ts[1]
        rows = math.prod(ids)
        return Op(k.name, cls, path, 0.0, 2.0 * e * rows * w[-1] + 8.0 * rows)
    if any(w in op for w in _INDEXED_WRITES):
        d, e = ts[-1]
        return Op(k.name, cls, path, float(math.prod(d)), 2.0 * e * math.prod(d))
    big = max(ts, key=lambda t: math.prod(t[0]))
    nbytes = sum(math.prod(d) * e for d, e in ts) + math.prod(big[0]) * big[1]
    return Op(k.name, cls, path, float(math.prod(big[0])), float(nbytes))


def rescale_dims(dims: list, b0: int, b1: int, q_len: int, c0: int | None, c1: int | None, attention: bool) -> list:
    """Input shapes at batch b1 (and context c1): a tensor of rank >= 2 whose leading dim is the
    traced batch (or batch x tokens) is resized; attention's key/value length becomes c1."""
    def one(i, d):
        if not (_is_shape(d) and len(d) >= 2):
            return d
        d = list(d)
        if b0 != b1 and d[0] in (b0, b0 * q_len):
            d[0] = d[0] // b0 * b1
        if attention and c0 and c1 and i in (1, 2) and len(d) == 4 and d[2] == c0:
            d[2] = c1
        return d

    return [[one(i, x) for x in d] if isinstance(d, list) and d and all(_is_shape(x) for x in d) else one(i, d)
            for i, d in enumerate(dims)]


def scaled_times(wl: Workload, costs: CostModel, batch: int | None, ctx: int | None) -> tuple[list[float], list[str]]:
    """Each kernel's GPU µs at (batch, ctx) and the labels of kernels left at measured time."""
    b0, c0 = wl.batch, wl.ctx
    b1 = batch if batch is not None else b0
    c1 = ctx if ctx is not None else c0
    if b1 == b0 and c1 == c0:
        return [k.gpu_us for k in wl.kernels], []
    if batch is not None and b0 is None:
        raise WhatIfError(f"workload '{wl.name}' has no batch size (its trace has no input shapes): "
                          "re-import it with `launchsim import-trace --batch B`")
    if ctx is not None and c0 is None:
        raise WhatIfError(f"workload '{wl.name}' has no context length (no attention shapes recorded): "
                          "--ctx cannot be changed")
    q_len = wl.q_len or 1
    out, unscaled = [], []
    for k in wl.kernels:
        if not k.dims:
            out.append(k.gpu_us)
            unscaled.append(label(k))
            continue
        attn = k.op_class == OpClass.ATTENTION.value
        old = cost_op(k, k.dims)
        new = cost_op(k, rescale_dims(k.dims, b0 or 1, b1 or 1, q_len, c0, c1, attn))
        if old is None or new is None:
            out.append(k.gpu_us)
            unscaled.append(label(k))
            continue
        t0, t1 = _gpu_s(costs, old), _gpu_s(costs, new)
        out.append(k.gpu_us * (t1 / t0) if t0 > 0 else k.gpu_us)
    return out, unscaled


def workload_step(wl: Workload, costs: CostModel, batch: int | None = None, ctx: int | None = None,
                  fusion: str = "none") -> WhatIf:
    if fusion not in WORKLOAD_FUSIONS:
        raise WhatIfError(f"fusion '{fusion}' is not available for an imported workload: use none or compiled")
    if batch is not None and batch <= 0:
        raise WhatIfError(f"--batch must be a positive integer, got {batch}")
    if ctx is not None and ctx <= 0:
        raise WhatIfError(f"--ctx must be a positive integer, got {ctx}")
    gpu, unscaled = scaled_times(wl, costs, batch, ctx)
    ks = wl.kernels
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
    scaled = len(ks) - len(unscaled) if resized else 0
    if unscaled:
        notes.append(f"{len(unscaled)} of {len(ks)} kernels unscaled (no recorded shape): kept at measured time")
    return WhatIf(step, unscaled, scaled, fz, notes)
