"""The array forms the optimizer reads (routing.route_decode, GraphMemoryModel.*_many, StartupModel.sizes_s,
GemmFallback.kernels_many / time_many, batchbuild._distinct_rows, StepCostCache.routed_step_seconds and
expected(unpadded=False)) give the scalar functions' figures, bitwise."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from simulator.engine.batchbuild import _distinct_rows
from simulator.engine.graph_memory import GraphMemoryModel
from simulator.engine.routing import route, route_decode
from simulator.engine.setup import Capture, StepSetup
from simulator.engine.stepcost import StepCostCache
from simulator.model.costs import CostModel
from simulator.model.gemm_model import _front
from simulator.model.models import load_model
from simulator.model.profile import load_profile
from simulator.model.workload import decode

PROFILE = load_profile("h200")


@settings(max_examples=200, deadline=None)
@given(graph=hs.sampled_from(["none", "full", "full_decode_only", "piecewise", "full_and_piecewise"]),
       sizes=hs.one_of(hs.none(), hs.lists(hs.integers(1, 64), max_size=8, unique=True).map(sorted)),
       rows=hs.lists(hs.integers(1, 80), min_size=1, max_size=30), one=hs.booleans())
def test_route_decode_is_route(graph, sizes, rows, one):
    if one:  # each step its own layout of one size (or none), as the optimizer's per-size steps
        each = [tuple(sizes[i % len(sizes)] for _ in range(i % 2)) if sizes else () for i in range(len(rows))]
        mode, padded, over = route_decode(graph, None, rows, each=each)
        want = [route(graph, e, r) for e, r in zip(each, rows)]
    else:
        mode, padded, over = route_decode(graph, sizes, rows)
        want = [route(graph, sizes, r) for r in rows]
    for r, p, o in zip(want, padded.tolist(), over.tolist()):
        assert (r.padded or 0) == p and r.overflow == o and r.mode == (mode if p else "none")


@pytest.mark.parametrize("model", ["qwen3-0.6b", "llama3-8b"])
@pytest.mark.parametrize("graph", ["full", "full_and_piecewise"])
@pytest.mark.parametrize("retention", ["drop", "keep"])
def test_graph_memory_arrays_are_the_scalar_figures(model, graph, retention):
    sizes = list(range(1, 700, 3)) + [1024, 4096]
    for fusion in ("none", "fused"):
        gm = GraphMemoryModel(load_model(model), PROFILE, fusion, graph, retention)
        floor, base = gm.shared_terms_many(sizes)
        assert floor.tolist() == [gm.shared_terms(s)[0] for s in sizes]
        assert base.tolist() == [gm.shared_terms(s)[1] for s in sizes]
        assert gm.output_bytes_many(sizes).tolist() == [gm.output_bytes(s) for s in sizes]
        assert gm.pool_bytes_many(sizes).tolist() == [gm.pool_bytes(s) for s in sizes]
        assert gm.static_buffer_bytes_many(sizes).tolist() == [gm.static_buffer_bytes(s) for s in sizes]
        assert gm.capture_s_many(sizes).tolist() == [gm.capture_s(s) for s in sizes]


def test_gemm_fallback_many_are_the_scalar_figures():
    fb = CostModel(PROFILE).gemm_fallback
    ms = [0, 1, 2, 3, 7, 64, 100, 513, 4096, 20000] + list(range(1, 3000, 37))
    for n, k in ((4096, 4096), (151936, 4096), (1024, 4096), (100, 50), (8, 4096)):
        fresh = type(fb).__new__(type(fb))
        fresh.__dict__.update(fb.__dict__)
        fresh._floor, fresh._near, fresh._count_m, fresh._count_at = {}, {}, {}, {}
        assert fb.kernels_many(n, k, ms) == [fresh.kernels(n, k, m) for m in ms]
        assert fb.time_many(n, k, ms) == [fresh.time_s(n, k, m) for m in ms]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hs.integers(1, 200), hs.integers(1, 5), hs.integers(0, 10 ** 6), hs.sampled_from([1, 3, 64]))
def test_floor_front_by_chunks_is_the_one_by_one_front(rows, points, seed, chunk):
    rng = np.random.default_rng(seed)
    y = np.round(rng.random((rows, points)) * 4) / 4 if seed % 2 else rng.random((rows, points))
    front: list[int] = []
    for r in np.argsort(y.sum(axis=1), kind="stable").tolist():
        if not front or not (y[front] <= y[r] - 1e-9).all(axis=1).any():
            front.append(r)
    assert _front(y, chunk) == front


@settings(max_examples=200, deadline=None)
@given(hs.integers(1, 60), hs.lists(hs.sampled_from(["int", "float", "const", "inc"]), min_size=1, max_size=3),
       hs.integers(0, 10 ** 6))
def test_distinct_rows_number_tuples_as_the_dict_does(n, kinds, seed):
    rng = np.random.default_rng(seed)
    arrs = []
    for kind in kinds:
        a = {"int": lambda: rng.integers(0, 5, n), "const": lambda: np.full(n, 3.0),
             "inc": lambda: np.cumsum(rng.integers(1, 3, n)),
             "float": lambda: np.where(rng.random(n) < 0.2, -0.0, np.round(rng.random(n) * 3) / 2)}[kind]()
        arrs.append(a)
    seen: dict[tuple, int] = {}
    inv = [seen.setdefault(c, len(seen)) for c in zip(*[a.tolist() for a in arrs])]
    got_inv, first = _distinct_rows(arrs, n)
    assert got_inv.tolist() == inv
    assert [repr(a[first].tolist()) for a in arrs] == [repr(list(col)) for col in zip(*seen)]


def test_routed_step_seconds_and_padded_only_expectation_match_the_routed_steps():
    setup = StepSetup.of(load_model("qwen3-0.6b"), PROFILE, "fused", Capture.of("full", (1, 2, 4, 8, 16)))
    shapes = [decode(b, 512) for b in (1, 3, 5, 8, 9, 16, 17, 40)]
    each = [(4,), (), (8,), (16,), (16,), (), (32,), (64,)]
    got = StepCostCache().routed_step_seconds(setup, shapes, each)
    ref = StepCostCache()
    want = [ref.routed(setup.with_capture(setup.capture.with_graph("full", e)), x).step_s
            for e, x in zip(each, shapes)]
    assert got.tolist() == want
    bs, w = [1, 3, 9, 17, 40], [0.1, 0.2, 0.3, 0.2, 0.2]
    full = StepCostCache().expected(setup, bs, w, 512)
    c = StepCostCache()
    c.prefetch_expected([setup], bs, 512, unpadded=False)
    part = c.expected(setup, bs, w, 512, unpadded=False)
    assert np.isnan(part.unpadded_s)
    assert {k: v for k, v in vars(part).items() if k != "unpadded_s"} == \
        {k: v for k, v in vars(full).items() if k != "unpadded_s"}
