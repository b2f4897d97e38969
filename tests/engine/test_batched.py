"""The batch axis vectorised (engine/batched.py): step times of many shapes at once equal the per-shape path
(`StepCostCache.step_time`: tiled plan, fast engine, summary), bitwise where the recurrence runs over rows and
where a row falls back to `simulate_fast`; and the cache's batched entry points (`step_seconds`,
`routed_seconds`, `expected`) against their per-step counterparts."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from simulator.engine.batched import step_seconds
from simulator.engine.plan import PlanError
from simulator.engine.setup import Capture, StepSetup
from simulator.engine.stepcost import StepCostCache
from simulator.model.models import load_model
from simulator.model.profile import load_profile
from simulator.model.workload import StepShape, decode

PROFILE = "datasheet-h200"
MODELS = {n: load_model(n) for n in ("qwen3-0.6b", "llama3-8b")}


def per_shape(setup, mode, shapes):
    c = StepCostCache()
    return np.array([c.step_time(setup, mode, s).step_s for s in shapes])


shape_st = hs.builds(lambda b, pad, ctx, pre: StepShape(b, ctx, *(pre or (0, 0)), padding=pad),
                     hs.integers(1, 96), hs.sampled_from([0, 0, 1, 7, 40]), hs.sampled_from([1, 127, 1024]),
                     hs.sampled_from([None, None, (1, 16), (2, 64)]))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=hs.sampled_from(sorted(MODELS)), fusion=hs.sampled_from(["none", "packed", "compiled", "fused"]),
       mode=hs.sampled_from(["none", "full", "piecewise"]), shapes=hs.lists(shape_st, min_size=1, max_size=6))
def test_batched_equals_per_shape(model, fusion, mode, shapes):
    setup = StepSetup.of(MODELS[model], PROFILE, fusion)
    got = step_seconds(setup, mode, shapes)
    want = per_shape(setup, mode, shapes)
    assert np.allclose(got, want, rtol=1e-9, atol=0.0)
    assert np.array_equal(got, want)  # the same floating-point operations: bitwise


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=hs.sampled_from(sorted(MODELS)), fusion=hs.sampled_from(["none", "packed", "fused"]),
       mode=hs.sampled_from(["none", "full", "piecewise"]), shapes=hs.lists(shape_st, min_size=1, max_size=6))
def test_step_figures_equal_step_time(model, fusion, mode, shapes):
    """The cache's step_figures (what serving's step timer reads) == step_time's step, GPU busy, CPU busy and GPU
    gap seconds, bitwise (fusion compiled aside: step_time's tiled plans differ from the full build in the last
    bits at some shapes, and serving prices compiled steps through step_time)."""
    setup = StepSetup.of(MODELS[model], PROFILE, fusion)
    c, want = StepCostCache(), StepCostCache()
    got = c.step_figures(setup, mode, shapes)
    assert got == c.step_figures(setup, mode, shapes)  # memoised
    for s, g in zip(shapes, got):
        r = want.step_time(setup, mode, s)
        assert g == (r.step_s, r.gpu_busy_s, r.cpu_busy_s, r.gpu_gap_s)


def test_queue_bound_rows_and_long_plans_fall_back_exactly():
    # a queue of 4 launches binds in GPU-bound eager steps (large batch) and not in host-bound ones (batch 1);
    # a 4-deep queue also makes every eager plan longer than 8 x depth: the rows run simulate_fast alone
    p = load_profile(PROFILE)
    small_q = p.model_copy(update={"device": p.device.model_copy(update={"launch_queue_depth": 4})})
    for prof in (PROFILE, small_q):
        setup = StepSetup.of(MODELS["llama3-8b"], prof, "none")
        shapes = [decode(b, 2048) for b in (1, 64, 512)]
        for mode in ("none", "piecewise", "full"):
            assert np.array_equal(step_seconds(setup, mode, shapes), per_shape(setup, mode, shapes))


def test_hand_computed_full_graph_step():
    # a full graph is one replay: step = host launch of the graph + every kernel's gap and time, in order
    setup = StepSetup.of(MODELS["qwen3-0.6b"], PROFILE, "fused")
    shape = decode(3, 100)
    step, costs = setup.build(shape), setup.costs
    ks = [o for o in step.ops if o.launches_kernel]
    t = costs.graph_launch_s(len(ks))
    for i, o in enumerate(ks):
        node = costs.graph_node_trace_s if o.fixed_gpu_s is not None else costs.graph_node_s
        x = costs.gemm_kernels(o) - 1
        t += ((costs.graph_launch_latency_s if i == 0 else node) + x * node) + costs.gpu_s(o)
    assert step_seconds(setup, "full", [shape])[0] == pytest.approx(t, rel=1e-12)


def test_unknown_mode_is_refused():
    setup = StepSetup.of(MODELS["qwen3-0.6b"], PROFILE, "fused")
    with pytest.raises(PlanError, match="unknown plan mode"):
        step_seconds(setup, "fullish", [decode(1, 10)])


def test_cache_batched_entry_points_equal_routed_steps():
    setup = StepSetup.of(MODELS["qwen3-0.6b"], PROFILE, "fused", Capture.of("full_and_piecewise", (1, 2, 4, 8, 16)))
    shapes = [decode(b, 512) for b in (1, 3, 5, 8, 9, 16, 17, 40)] + [StepShape(2, 512, 1, 32)]
    c = StepCostCache()
    routes, padded, secs = c.routed_seconds(setup, shapes)
    ref = StepCostCache()
    for r, x, s, shape in zip(routes, padded, secs, shapes):
        rs = ref.routed(setup, shape)
        assert (rs.route, rs.shape, rs.step_s) == (r, x, s)
    n = c.stats["simulated"]
    c.routed_seconds(setup, shapes)  # memoised: nothing priced again
    assert c.stats["simulated"] == n
    # the expectation over a distribution: the batched fill equals per-batch routed steps
    bs, w = [1, 3, 9, 17, 40], [0.1, 0.2, 0.3, 0.2, 0.2]
    e = StepCostCache().expected(setup, bs, w, 512)
    step = sum(wi * ref.routed(setup, decode(b, 512)).step_s for b, wi in zip(bs, w))
    unpad = sum(wi * ref.step_time(setup, ref.routed(setup, decode(b, 512)).route.mode, decode(b, 512)).step_s
                for b, wi in zip(bs, w))
    assert e.step_s == pytest.approx(step, rel=1e-12) and e.unpadded_s == pytest.approx(unpad, rel=1e-12)


def test_pattern_fits_only_steps_that_repeat_its_positions():
    from dataclasses import replace

    from simulator.engine.batched import _Pattern

    setup = StepSetup.of(MODELS["qwen3-0.6b"], PROFILE, "fused")
    a, b = setup.build(decode(2, 64)).ops, setup.build(decode(9, 64)).ops
    pat = _Pattern(np.fromiter(map(id, a), dtype=np.int64, count=len(a)))
    assert pat.runs and pat.fits(a) and pat.fits(b)  # layers 1..L-1 repeat layer 1's objects at any batch
    i = pat.runs[-1][0]  # a repeated position holding another op: refused
    other = replace(b[i], name=b[i].name + "_x")
    assert not pat.fits(b[:i] + (other,) + b[i + 1:])
    assert not pat.fits(b[:-1])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layouts=hs.lists(hs.lists(hs.integers(1, 96), min_size=1, max_size=6, unique=True), min_size=1, max_size=4),
       graph=hs.sampled_from(["full", "piecewise", "full_and_piecewise"]),
       bs=hs.lists(hs.integers(1, 128), min_size=1, max_size=20))
def test_prefetched_layouts_give_the_expected_figures_of_layouts_priced_alone(layouts, graph, bs):
    """StepCostCache.prefetch_expected (the optimizer's layouts priced side by side) changes no figure: each
    layout's `expected` equals the one of a fresh cache that priced that layout alone."""
    base = StepSetup.of(MODELS["qwen3-0.6b"], PROFILE, "fused", Capture.of(graph, (8,)))
    setups = [base.with_capture(base.capture.with_graph(graph, sorted(lay))) for lay in layouts]
    w = np.full(len(bs), 1.0 / len(bs))
    shared = StepCostCache()
    shared.prefetch_expected(setups, bs, 512)
    for st in setups:
        assert shared.expected(st, bs, w, 512) == StepCostCache().expected(st, bs, w, 512)
