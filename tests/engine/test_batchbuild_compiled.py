"""Compiled (Inductor) steps built over the batch axis by one traced build (engine/batchbuild.py through
model/inductor.py's pass): the traced rows equal each shape's real build (the kernels value for value, their figures
and launch structure) and step times through them are bitwise the scalar path's, with torch.compile dynamic and
static, the compile-inputs options, and batch sizes on both sides of the size thresholds Inductor's plan tests
(m > 1, persistent reductions); StepCostCache.prebuild (a sweep task's hint) changes no figure or count."""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from simulator.engine import batchbuild as BB
from simulator.engine import batched
from simulator.engine.setup import Capture, StepSetup
from simulator.engine.stepcost import StepCostCache
from simulator.model.resolve import resolve_model
from simulator.model.workload import StepShape

PROFILE = "h200"
MODELS = {"qwen3-0.6b": resolve_model("qwen3-0.6b"), "llama3-8b": resolve_model("llama3-8b"),
          "qwen3-8b-fp8": resolve_model("qwen3-8b", "fp8"), "llama3-70b-tp4": resolve_model("llama3-70b", tp=4)}
OPTIONS = [(None, None), (False, None), (True, None), (True, "module"), (True, "arguments")]


def setup_of(model: str, opt: int, capture: Capture | None = None) -> StepSetup:
    dyn, inputs = OPTIONS[opt]
    return StepSetup.of(MODELS[model], PROFILE, "compiled", capture, compile_dynamic=dyn, compile_inputs=inputs)


def per_shape(setup, mode, shapes):
    c = StepCostCache()
    return np.array([c.step_time(setup, mode, s).step_s for s in shapes])


def ops_of(r):
    if r.ops is None:
        r._materialise()
    return r.ops


pairs_st = hs.lists(hs.tuples(hs.integers(1, 300), hs.sampled_from([0, 0, 1, 5, 64])), min_size=8, max_size=40,
                    unique=True)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=hs.sampled_from(sorted(MODELS)), opt=hs.integers(0, len(OPTIONS) - 1),
       ctx=hs.sampled_from([1, 127, 1024]), pairs=pairs_st)
def test_traced_compiled_rows_equal_built_rows(model, opt, ctx, pairs):
    setup = setup_of(model, opt)
    shapes = [StepShape(b, ctx, padding=p) for b, p in pairs]
    assert BB.traceable(setup, shapes[0])
    before = BB.STATS["traced"]
    memo, figs = {}, {}
    batched._build_many(setup, shapes, memo, memo.setdefault("patterns", []), figs)
    got = [memo[s] for s in shapes]
    wm, wf = {}, {}
    pats = wm.setdefault("patterns", [])
    want = [batched._Row(setup.build(s), setup.costs, pats, wf) for s in shapes]
    for g, w in zip(got, want):
        assert np.array_equal(g.pat.first[g.pat.inv], w.pat.first[w.pat.inv])
        # a row's distinct ops are in its pattern's order (by object id: the kernels are new objects per build), so
        # compare them position by position
        gi, wi = g.pat.inv.tolist(), w.pat.inv.tolist()
        gops, wops = [ops_of(g)[j] for j in gi], [w.ops[j] for j in wi]
        assert gops == wops  # the compiled kernels, value for value
        assert [type(v) for o in gops for _, v in o.shape] == [type(v) for o in wops for _, v in o.shape]
        assert [g.gpu[j] for j in gi] == [w.gpu[j] for j in wi]
        assert [g.extra[j] for j in gi] == [w.extra[j] for j in wi]
        assert [g.key[1][j] for j in gi] == [w.key[1][j] for j in wi]
        gh, wh = g.host(setup.costs), w.host(setup.costs)
        assert [gh[j] for j in gi] == [wh[j] for j in wi]
    assert BB.STATS["traced"] > before


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=hs.sampled_from(["qwen3-0.6b", "llama3-8b", "llama3-70b-tp4"]), opt=hs.integers(0, len(OPTIONS) - 1),
       mode=hs.sampled_from(["none", "full", "piecewise"]),
       calls=hs.lists(hs.lists(hs.tuples(hs.integers(1, 300), hs.sampled_from([0, 0, 3, 100])), min_size=8,
                               max_size=20, unique=True), min_size=1, max_size=3))
def test_compiled_step_seconds_through_traces_bitwise(model, opt, mode, calls):
    """Batch-priced compiled steps (successive calls on one memo replay the first call's traces) equal the scalar
    pricing (`StepCostCache.step_time`: a build and a plan per shape) bitwise."""
    setup = setup_of(model, opt)
    rows, figs = {}, {}
    for pairs in calls:
        shapes = [StepShape(b, 512, padding=p) for b, p in pairs]
        assert np.array_equal(batched.step_seconds(setup, mode, shapes, rows, figs), per_shape(setup, mode, shapes))


def test_compiled_every_batch_size_bitwise():
    """Batch 1 to 512 in one call (every threshold the plan tests on a size), dynamic and static."""
    for opt in (1, 2):
        setup = setup_of("qwen3-0.6b", opt)
        shapes = [StepShape(b, 300) for b in range(1, 513)]
        for mode in ("none", "full"):
            assert np.array_equal(batched.step_seconds(setup, mode, shapes, {}, {}), per_shape(setup, mode, shapes))


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fusion=hs.sampled_from(["none", "packed", "compiled", "fused"]), graph=hs.sampled_from(["none", "full",
       "piecewise"]), sizes=hs.lists(hs.integers(1, 256), min_size=1, max_size=12, unique=True).map(sorted),
       dists=hs.lists(hs.lists(hs.integers(1, 300), min_size=1, max_size=30, unique=True), min_size=1, max_size=4))
def test_prebuild_changes_no_figure_or_count(fusion, graph, sizes, dists):
    """`StepCostCache.prebuild` of the coming `expected` calls: the same Expected figures and the same lookup and
    simulation counts as without it."""
    m = MODELS["llama3-8b"]
    setup = StepSetup.of(m, PROFILE, fusion, Capture.of(graph, sizes))
    plain, hinted = StepCostCache(), StepCostCache()
    hinted.prebuild([(setup, sorted({b for d in dists for b in d}), 777)])
    for d in dists:
        w = [1.0 / len(d)] * len(d)
        assert plain.expected(setup, d, w, 777) == hinted.expected(setup, d, w, 777)
    assert plain.stats == hinted.stats
