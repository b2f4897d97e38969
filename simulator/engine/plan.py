"""Launch plans: a step + a cost model + a graph mode -> what the host submits and what the GPU runs.

A plan is plain arrays, the common input of both engines:
- `host_s[j]`: CPU time spent building host launch j before it is pushed into the launch queue
  (host-only ops such as views are folded into the next launch that submits work);
- `kernels_per_launch[j]`: GPU kernels launch j submits (1 for an eager op, n for a graph replay);
- `wait_kernel[j]` (optional): a kernel of an earlier launch whose end the host waits for before it starts
  launch j's host work (a sync such as `.tolist()`), -1 for none;
- `gpu_s[i]`, `gap_s[i]`: GPU time of kernel i and the gap the stream pays before it (the in-stream
  gap for eager kernels and a graph's first node, the per-node cost inside a replayed graph).
  Inside a graph, an op whose GPU time was read from a trace (CUPTI duration) pays the profile's
  `graph_node_trace_us` instead: table times already include what identical nodes cost in a graph.
  An op the profile says runs as several kernels (a split-K GEMM and its reduce kernel) stays one
  entry whose measured time covers both; it pays one extra gap per extra kernel.
Graph modes: `build_plan` takes a configured graph mode and asks `routing.plan_mode` which plan the step runs:
`none` (eager), `full` (one replay) or `piecewise` (graph segments split at attention, attention eager); the
table of modes is in routing.py. Padding and the largest captured size are routing's too (`routing.route`).
"""

from __future__ import annotations

from simulator.common.errors import UserError

from dataclasses import dataclass, field

import numpy as np

from simulator.model.costs import CostModel
from simulator.model.kernels import HOST_SYNC, LaunchPath, Step
from simulator.engine.routing import PLAN_MODES, RoutingError, plan_mode
_COMPILED_PATHS = (LaunchPath.COMPILED, LaunchPath.COMPILED_EXTERN)


class PlanError(UserError):
    """An unknown graph mode or an empty step."""


@dataclass
class LaunchPlan:
    host_s: np.ndarray
    kernels_per_launch: np.ndarray
    gpu_s: np.ndarray
    gap_s: np.ndarray
    queue_depth: int
    host_tail_s: float = 0.0
    launch_labels: list[str] = field(default_factory=list)
    kernel_names: list[str] = field(default_factory=list)
    host_calls: int = 0
    graph_mode: str = "none"
    extra_kernels: int = 0  # helper kernels inside one op (cuBLAS split-K reduce), timed with their op
    # host syncs (multi-step plans, simulator/engine/steploop.py): wait_kernel[j] >= 0 makes the host wait for the end of
    # that (earlier) kernel before it starts launch j's host work, as `.tolist()` / `event.synchronize()` do
    wait_kernel: np.ndarray | None = None

    @property
    def gpu_kernels(self) -> int:
        """Kernels the GPU runs, as a profiler counts them."""
        return self.kernels + self.extra_kernels

    @property
    def launches(self) -> int:
        return int(self.host_s.size)

    @property
    def kernels(self) -> int:
        return int(self.gpu_s.size)

    def with_host(self, host_s: np.ndarray) -> "LaunchPlan":
        """The same plan with other host times (used for sampled host-noise replicates)."""
        p = LaunchPlan(**{**self.__dict__})
        p.host_s = np.asarray(host_s, dtype=float)
        return p


def build_plan(step: Step, costs: CostModel, graph: str = "none", quantile: float = 0.5,
               pure_decode: bool = True) -> LaunchPlan:
    """Lower a step under a *configured* graph mode (routed here by `routing.plan_mode`, every size captured).
    Callers that routed already (predict, the step-cost cache, serving) call `lower` with the plan mode."""
    try:
        mode = plan_mode(graph, pure_decode)
    except RoutingError as e:
        raise PlanError(str(e)) from None
    return lower(step, costs, mode, quantile)


def lower(step: Step, costs: CostModel, mode: str, quantile: float = 0.5, memo: dict | None = None) -> LaunchPlan:
    """Lower a step to launches under a *plan mode* (`none`, `full`, `piecewise`: what `routing.route` decided;
    no second routing pass). `quantile` picks host costs from the profile. `memo` (optional, owned by the caller,
    e.g. a run's StepCostCache): keeps each Op object's costs under this cost model between calls, so a step
    lowered in several plan modes is costed once (the same figures: the cost model's functions of the op)."""
    if mode not in PLAN_MODES:
        raise PlanError(f"unknown plan mode '{mode}': use one of {', '.join(PLAN_MODES)}")
    ops = step.ops
    if not any(o.launches_kernel for o in ops):
        raise PlanError("step has no kernels")
    host, counts, gpu, gap, labels, names = [], [], [], [], [], []
    extra = 0
    # layers repeat the same Op objects: each object is costed once (by id: the step holds every op);
    # a kernel's entry is (gpu s, extra kernels, name, trace-timed, op, host sync); the costs' figures are read once
    # per call
    if memo is None:
        km: dict[int, tuple] = {}
        hm: dict[int, tuple] = {}
    else:  # entries hold the op (and the memo the cost model), so the ids stay theirs while they are kept
        hit = memo.get(id(costs))
        if hit is None:
            hit = memo[id(costs)] = (costs, {}, {})
        km = hit[1]
        hm = hit[2] if quantile == 0.5 else {}
    cost_gpu, cost_kernels, cost_host = costs.gpu_s, costs.gemm_kernels, costs.host_s
    eager_gap = costs.eager_gap_s

    def kernel(o) -> tuple:
        v = km.get(id(o))
        if v is None:
            v = km[id(o)] = (cost_gpu(o), cost_kernels(o) - 1, o.name, o.fixed_gpu_s is not None, o,
                             bool(o.dim(HOST_SYNC)))
        return v

    def host_of(o) -> float:
        v = hm.get(id(o))
        if v is None:
            v = hm[id(o)] = (cost_host(o, quantile), o)
        return v[0]

    pending_host = 0.0
    compiled = any(o.path in _COMPILED_PATHS for o in ops)
    node_s, node_trace_s, latency_s = costs.graph_node_s, costs.graph_node_trace_s, costs.graph_launch_latency_s

    def graph_segment(seg):
        nonlocal extra
        n = len(seg)
        host.append(costs.graph_launch_s(n))
        counts.append(n)
        labels.append(f"graph replay ({n} nodes)")
        first = True
        for o in seg:
            g, x, name, traced, _, sync = kernel(o)
            if sync:
                raise PlanError(_UNCAPTURABLE.format(mode=mode))
            node = node_trace_s if traced else node_s
            gpu.append(g)
            extra += x
            gap.append((latency_s if first else node) + x * node)
            names.append(name)
            first = False

    waits: list[int] = []  # eager launches whose host work waits for the GPU to drain (ops marked HOST_SYNC)
    if mode == "full":
        graph_segment([o for o in ops if o.launches_kernel])
    elif mode == "piecewise":
        seg: list = []
        for o in ops:
            if not o.launches_kernel:
                continue
            if o.in_attention:  # the attention call's kernels run eager between the pieces
                if seg:
                    graph_segment(seg)
                    seg = []
                host.append(host_of(o))
                counts.append(1)
                labels.append(o.name)
                g, x, name, _, _, sync = kernel(o)
                if sync:
                    raise PlanError(_UNCAPTURABLE.format(mode=mode))
                gpu.append(g)
                extra += x
                gap.append(eager_gap + x * eager_gap)
                names.append(name)
            else:
                seg.append(o)
        if seg:
            graph_segment(seg)
    else:
        pending_host = costs.compiled_entry_s if compiled else 0.0
        for o in ops:
            pending_host += host_of(o)
            if o.launches_kernel:
                g, x, name, _, _, sync = kernel(o)
                if sync and gpu:
                    waits.append(len(gpu))
                host.append(pending_host)
                pending_host = 0.0
                gpu.append(g)
                extra += x
                gap.append(eager_gap + x * eager_gap)
                names.append(name)
        labels = names.copy()
        counts = [1] * len(names)
    return LaunchPlan(
        host_s=np.asarray(host, dtype=float),
        kernels_per_launch=np.asarray(counts, dtype=np.int64),
        gpu_s=np.asarray(gpu, dtype=float),
        gap_s=np.asarray(gap, dtype=float),
        queue_depth=costs.queue_depth,
        host_tail_s=pending_host,
        launch_labels=labels,
        kernel_names=names,
        host_calls=len(ops) if mode == "none" else len(counts),
        graph_mode=mode,
        extra_kernels=extra,
        wait_kernel=_waits(waits, len(host)),
    )


_UNCAPTURABLE = ("this step cannot be captured as a CUDA graph ({mode}): it copies a host tensor to the GPU every step "
                 "(transformers' sliding-window cache once its window is full, ctx >= window: 'Cannot copy between "
                 "CPU and CUDA tensors during CUDA graph capture', measured on gemma-3-1b at ctx 512 and phi-3-mini at "
                 "ctx 2048); eager only, or a ctx below the window")


def _waits(launches: list[int], n: int) -> np.ndarray | None:
    """wait_kernel of an eager plan whose launches `launches` wait for the kernel just before them (each eager
    launch is one kernel: launch j's predecessor is kernel j - 1); None without any."""
    if not launches:
        return None
    w = np.full(n, -1, dtype=np.int64)
    w[launches] = np.asarray(launches, dtype=np.int64) - 1
    return w


def _host_sampler(step: Step, costs: CostModel):
    """A function u -> host times (u: uniform draws, one per op, in rows of replicates), equal (bitwise, same
    draws) to the per-op loop it replaces:

        acc += costs.host_s(op, clip(round(u, 2), 0, 1)) for each op; launches take acc and reset it.

    Rounded quantiles take 101 values (k / 100), and an op's host cost depends only on its fixed cost,
    launch path and whether it launches a kernel, so each op class gets a table of 101 costs computed by
    `host_s` itself; the per-launch sums keep the loop's order of additions (first op, then the next...).
    The sampler depends only on the sequence of op classes (not on shapes), so it is memoised on it, in the cost
    model's memos (`costs.memos["host_samplers"]`: steps of one fusion level share one).
    """
    classes: dict[tuple, int] = {}
    reps: list = []  # one op of each class
    by_obj: dict[int, int] = {}  # layers repeat the same Op objects: classify each object once
    cls_l = []
    for o in step.ops:
        c = by_obj.get(id(o))
        if c is None:
            key = (o.fixed_host_s, o.path, o.launches_kernel)
            c = classes.get(key)
            if c is None:
                c = classes[key] = len(reps)
                reps.append(o)
            by_obj[id(o)] = c
        cls_l.append(c)
    cls = np.asarray(cls_l, dtype=np.int64)
    memo = costs.memos.get("host_samplers")
    if memo is None:
        memo = costs.memos["host_samplers"] = {}
    mkey = (tuple(classes), cls.tobytes())
    hit = memo.get(mkey)
    if hit is not None:
        return hit
    qs = [k / 100 for k in range(101)]
    table = np.asarray([[costs.host_s(o, q) for q in qs] for o in reps], dtype=float)
    launches = np.asarray([k[2] for k in classes], dtype=bool)[cls]
    seg_all = np.cumsum(launches) - launches  # the launch each op's host work goes to
    n_launch = int(launches.sum())
    entry = costs.compiled_entry_s if any(o.path in _COMPILED_PATHS for o in reps) else 0.0
    keep = seg_all < n_launch  # ops after the last launch (the host tail) are not part of any launch
    ops_idx = np.nonzero(keep)[0]
    seg = seg_all[keep]
    starts = np.searchsorted(seg, np.arange(n_launch))
    pos = ops_idx - ops_idx[starts[seg]] if n_launch else ops_idx  # position of each op inside its launch
    # the k-th op of each launch, for k = 0, 1, ...: added in that order, as the loop does
    layers = []
    for k in range(int(pos.max()) + 1 if pos.size else 0):
        sel = pos == k
        layers.append((seg[sel], ops_idx[sel]))

    def sample(u: np.ndarray) -> np.ndarray:
        k = np.clip(np.rint(u * 100), 0, 100).astype(np.int64)
        v = table[cls, k]
        out = np.zeros(u.shape[:-1] + (n_launch,))
        if n_launch and entry:
            out[..., 0] = entry
        for s, o in layers:
            out[..., s] += v[..., o]
        return out

    if len(memo) > 64:
        memo.clear()
    memo[mkey] = sample
    return sample


def sample_hosts(plan: LaunchPlan, step: Step, costs: CostModel, u: np.ndarray) -> np.ndarray:
    """Host times of replicates from their uniform draws `u` (rows of one draw per op of `step`), as `sample_host`
    would give them one replicate at a time."""
    if plan.graph_mode != "none":
        return np.broadcast_to(plan.host_s, u.shape[:-1] + plan.host_s.shape).copy()
    return _host_sampler(step, costs)(u)


def sample_host(plan: LaunchPlan, step: Step, costs: CostModel, rng: np.random.Generator) -> np.ndarray:
    """Host times for one replicate: each eager op's cost drawn from its path's distribution.

    The distribution is piecewise-linear through (0.1, p10), (0.5, p50), (0.9, p90) and flat outside;
    graph replays keep their fixed cost. Only meaningful for graph mode `none`. Quantiles are rounded to
    0.01 (one of 101 values).
    """
    if plan.graph_mode != "none":
        return plan.host_s.copy()
    return _host_sampler(step, costs)(rng.random(len(step.ops)))
