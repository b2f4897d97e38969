"""The GEMM fallback for (n, k) the profile's tables lack (simulator/model/gemm_model.py)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings, strategies as st

from simulator.model.costs import CostModel, _loglog
from simulator.model.gemm_model import GemmFallback
from simulator.model.kernels import LaunchPath, Op, OpClass
from simulator.model.profile import GemmTable, load_profile

F, B = 1e15, 1e12  # round figures: roofline by hand


def _gemm(m, n, k):
    return Op("g", OpClass.GEMM, LaunchPath.EAGER_GEMM, 2.0 * m * n * k, 2.0 * (m * k + n * k + m * n),
              (("k", k), ("m", m), ("n", n)))


def _roof(n, k, m):
    return max(2 * m * n * k / F, 2 * (m * k + n * k + m * n) / B)


def test_hand_case_geometric_mean_of_two_equidistant_tables():
    # tables (1024, 1024) and (4096, 4096): aspect 1; the target (2048, 2048) sits halfway in ln(nk), so the two
    # inverse-distance weights are equal and ln s is the mean of the two tables' ln s
    ms = [1, 4]
    a = GemmTable(n=1024, k=1024, m=ms, us=[_roof(1024, 1024, m) * 1e6 * 3 for m in ms], kernels=[1, 1])
    b = GemmTable(n=4096, k=4096, m=ms, us=[_roof(4096, 4096, m) * 1e6 * 12 for m in ms], kernels=[2, 1])
    fb = GemmFallback([a, b], F, B)
    for m in ms:
        want = max(math.sqrt(3 * 12) * _roof(2048, 2048, m), min(a.us[ms.index(m)], b.us[ms.index(m)]) * 1e-6)
        assert fb.time_s(2048, 2048, m) == pytest.approx(want, rel=1e-12)
    # M = 2 between grid points: each table's ln s is linear in ln M (here constant), so s = 6 again
    fl = min(math.exp(sum(math.log(u) for u in t.us) / 2) for t in (a, b)) * 1e-6  # ln t linear in ln M: midpoint
    assert fb.time_s(2048, 2048, 2) == pytest.approx(max(6 * _roof(2048, 2048, 2), fl), rel=1e-12)
    assert fb.time_s(2048, 2048, 8) is None and fb.time_s(2048, 2048, 0) is None  # off the grid: the roofline


def test_floor_is_the_fastest_measured_gemm():
    # a tiny shape: slowdown x roofline is far below the measured times; the floor (fastest table at that M) holds
    a = GemmTable(n=1024, k=1024, m=[1], us=[5.0])
    b = GemmTable(n=4096, k=4096, m=[1], us=[14.0])
    fb = GemmFallback([a, b], F, B)
    assert fb.time_s(16, 16, 1) == pytest.approx(5.0e-6)


def test_kernel_count_from_the_nearest_counted_table():
    a = GemmTable(n=1024, k=4096, m=[1, 256], us=[8.0, 10.0], kernels=[2, 1])
    b = GemmTable(n=4096, k=1024, m=[1, 256], us=[5.0, 6.0], kernels=[1, 1])
    c = GemmTable(n=2048, k=2048, m=[1, 256], us=[6.0, 7.0])  # no counts: never the count's source
    fb = GemmFallback([a, b, c], F, B)
    assert [fb.kernels(1536, 6144, m) for m in (1, 8, 200, 1024)] == [2, 2, 1, 1]  # nearest M on the grid (log)
    assert fb.kernels(6144, 1536, 1) == 1
    assert GemmFallback([c], F, B).kernels(1536, 6144, 1) == 1  # no table records counts


def test_degenerate_tables_take_no_part():
    a = GemmTable(n=64, k=1, m=[1], us=[2.0])
    assert GemmFallback([a], F, B).time_s(2048, 2048, 1) is None
    assert GemmFallback([], F, B).time_s(2048, 2048, 1) is None
    b = GemmTable(n=1024, k=1024, m=[1], us=[5.0], kernels=[2])
    assert GemmFallback([b], F, B).time_s(5, 7, 1) is None  # a shape below MIN_DIM is not priced: the roofline
    assert GemmFallback([b], F, B).kernels(5, 7, 1) == 1


@pytest.fixture(scope="module")
def h200():
    return CostModel(load_profile("h200"))


def test_shapes_in_the_tables_are_unchanged(h200, monkeypatch):
    def boom(*a, **k):
        raise AssertionError("fallback consulted for a measured shape")

    monkeypatch.setattr(CostModel, "gemm_fallback_s", boom)
    monkeypatch.setattr(CostModel, "gemm_fallback_kernels", boom)
    for t in h200.profile.device.tables.gemm:
        for g, m in enumerate(t.m):
            op = _gemm(m, t.n, t.k)
            assert h200.table_s(op) == _loglog(m, t.m, t.us) * 1e-6
            assert h200.gemm_kernels(op) == (1 if t.kernels is None else t.kernels[g])


def test_unmeasured_shape_is_priced_by_the_fallback(h200):
    op = _gemm(8, 8960, 1536)  # qwen2-1.5b's gate/up projection: not in the h200 tables
    assert (8960, 1536) not in h200._gemm
    assert h200.gpu_s(op) == h200.gemm_fallback.time_s(8960, 1536, 8)
    assert h200.gpu_s(op) > h200.roofline_s(op)  # measured GEMMs of this size run well below the roofline
    big = _gemm(4096, 8960, 1536)  # M beyond the tables' grid: the roofline, as for a measured shape
    assert h200.gpu_s(big) == h200.roofline_s(big)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(16, 300000), k=st.integers(16, 30000), m=st.integers(1, 1024))
def test_fallback_is_positive_floored_and_bounded_by_the_tables(h200, n, k, m):
    fb = h200.gemm_fallback
    v = fb.time_s(n, k, m)
    s = [t.us[i] / (fb.roofline_s(t.n, t.k, mm) * 1e6) for t in fb.tables for i, mm in enumerate(t.m)]
    floor = min(math.exp(fb._at_m(t.m, [math.log(u) for u in t.us], m)) for t in fb.tables) * 1e-6
    assert v is not None and v >= floor * (1 - 1e-12)
    # the interpolated slowdown never leaves the range of the measured ones (an inverse-distance mean)
    assert v <= max(max(s) * fb.roofline_s(n, k, m), floor) * (1 + 1e-9)
    assert fb.kernels(n, k, m) in (1, 2)
