"""Layer-tiled launch plans for fast step evaluations.

Owns `tiled_lower` (the one exact way of not planning every layer; `tiled_plan` is it for loose arguments); the
memoised step times built from it live in stepcost.py. The launch plan is built by layer tiling:
a decoder step is a preamble, L identical layers and a head, so the plans of the 1- and 2-layer versions
of the model determine the L-layer plan exactly: with `block` the extra launches (kernels) the second
layer adds, inserted at the first position where the two plans differ,
    plan_L = plan_1[:a] + block * (L - 1) + plan_1[a:].
That needs two small builds instead of one of L layers (about L/3 times less Python work); every array is
bitwise equal to `build_plan` on the full step (tests/sweep/test_sweep.py checks this), and any plan whose two
versions do not have this form is built in full instead.
"""

from __future__ import annotations


import numpy as np

from simulator.model.costs import CostModel
from simulator.model.models import ModelSpec
from simulator.engine.plan import LaunchPlan, lower
from simulator.engine.routing import plan_mode
from simulator.model.workload import StepShape, layers_repeat


def _lcp(a, b) -> int:
    """Length of the common prefix of two arrays or lists."""
    if not isinstance(a, np.ndarray):
        n = min(len(a), len(b))
        return next((i for i in range(n) if a[i] != b[i]), n)
    n = min(a.size, b.size)
    neq = np.nonzero(a[:n] != b[:n])[0]
    return int(neq[0]) if neq.size else n


def _insert(x1, x2, a: int, d: int, reps: int):
    """x1[:a] + x2[a:a+d] * reps + x1[a:] for numpy arrays or lists; None if x2 is not of that form."""
    if isinstance(x1, np.ndarray):
        if not (np.array_equal(x2[:a], x1[:a]) and np.array_equal(x2[a + d:], x1[a:])):
            return None
        return np.concatenate([x1[:a], np.tile(x2[a:a + d], reps), x1[a:]])
    if x2[:a] != x1[:a] or x2[a + d:] != x1[a:]:
        return None
    return x1[:a] + x2[a:a + d] * reps + x1[a:]


def tiled_plan(model: ModelSpec, shape: StepShape, fusion: str, costs: CostModel, mode: str,
               pure_decode: bool = True) -> LaunchPlan:
    """The same plan as build_plan(build_step(model, shape, fusion), costs, mode), built by layer tiling: `tiled_lower`
    of that step under the plan mode the configured `mode` gives it (every size captured)."""
    from simulator.engine.setup import StepSetup

    return tiled_lower(StepSetup(model, costs, "", fusion), shape, plan_mode(mode, pure_decode))


def tiled_lower(setup, shape: StepShape, mode: str, small: dict | None = None, ops: dict | None = None) -> LaunchPlan:
    """The plan of `setup`'s step of `shape` under plan mode `mode` (routed already: no second pass), built by
    layer tiling: bitwise `plan.lower(setup.build(shape), setup.costs, mode)`. `small`: a memo of the 1- and
    2-layer steps, `ops`: `lower`'s memo of their ops' costs (the caller's `StepCostCache` owns both)."""
    L = setup.model.num_hidden_layers
    costs = setup.costs
    if L <= 3 or not layers_repeat(setup.model, shape, setup.max_cache_len) or setup.fusion == "compiled":
        # sliding layers unlike full ones; and Inductor's pass, which inlines the residual stream into later layers'
        # kernels and materialises it every other layer (as Inductor does: round i's kernel names), so its 1- and
        # 2-layer plans do not extrapolate exactly (found by the serving A/B: llama3-8b compiled b134, 2.6e-6)
        return lower(setup.build(shape), costs, mode)
    memo = small if small is not None else {}

    def cut(k):
        key = (setup.build_key, k, shape)
        st = memo.get(key)
        if st is None:
            st = memo[key] = setup.with_layers(k).build(shape)
        return st

    p1, p2 = lower(cut(1), costs, mode, memo=ops), lower(cut(2), costs, mode, memo=ops)
    if p1.wait_kernel is not None:  # host syncs (plan.lower's waits) are not tiled: the whole step lowered
        return lower(setup.build(shape), costs, mode)
    return _tile(p1, p2, L, costs, mode) or lower(setup.build(shape), costs, mode)


def _tile(p1: LaunchPlan, p2: LaunchPlan, L: int, costs: CostModel, eff: str) -> LaunchPlan | None:
    """The L-layer plan from the 1- and 2-layer plans under plan mode `eff`; None where they are not of the form
    plan_1[:a] + block + plan_1[a:]."""
    reps = L - 1
    dk = p2.kernels - p1.kernels
    ak = min(_lcp(p1.gpu_s, p2.gpu_s), _lcp(p1.gap_s, p2.gap_s), _lcp(p1.kernel_names, p2.kernel_names))
    gpu = _insert(p1.gpu_s, p2.gpu_s, ak, dk, reps)
    gap = _insert(p1.gap_s, p2.gap_s, ak, dk, reps)
    names = _insert(p1.kernel_names, p2.kernel_names, ak, dk, reps)
    if eff == "full":
        k = int(gpu.size) if gpu is not None else 0
        host, counts, labels = np.array([costs.graph_launch_s(k)]), np.array([k], dtype=np.int64), \
            [f"graph replay ({k} nodes)"]
    else:
        dl = p2.launches - p1.launches
        al = min(_lcp(p1.host_s, p2.host_s), _lcp(p1.kernels_per_launch, p2.kernels_per_launch),
                 _lcp(p1.launch_labels, p2.launch_labels))
        host = _insert(p1.host_s, p2.host_s, al, dl, reps)
        counts = _insert(p1.kernels_per_launch, p2.kernels_per_launch, al, dl, reps)
        labels = _insert(p1.launch_labels, p2.launch_labels, al, dl, reps)
    if any(x is None for x in (gpu, gap, names, host, counts, labels)) or p1.host_tail_s != p2.host_tail_s:
        return None
    return LaunchPlan(host_s=host, kernels_per_launch=counts, gpu_s=gpu, gap_s=gap, queue_depth=p1.queue_depth,
                      host_tail_s=p1.host_tail_s, launch_labels=labels, kernel_names=names,
                      host_calls=p1.host_calls + reps * (p2.host_calls - p1.host_calls), graph_mode=p1.graph_mode,
                      extra_kernels=p1.extra_kernels + reps * (p2.extra_kernels - p1.extra_kernels))
