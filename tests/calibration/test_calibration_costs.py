"""Cost-model use of calibrated tables: interpolation, split-K kernel counts, and that predictions
follow the profile's figures."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.model.costs import CostModel, _loglog
from simulator.model.kernels import LaunchPath, Op, OpClass
from simulator.engine.predict import predict
from simulator.model.profile import load_profile


@pytest.fixture(scope="module")
def prof():
    return load_profile("h200")


def test_loglog_exact_at_grid_points():
    xs, ys = [1.0, 4.0, 16.0, 64.0], [2.0, 2.0, 3.0, 9.0]
    for x, y in zip(xs, ys):
        assert _loglog(x, xs, ys) == pytest.approx(y)


@given(a=st.floats(0.1, 10), p=st.floats(-1.5, 1.5), x=st.floats(1.0, 1000.0))
@settings(max_examples=200, deadline=None)
def test_loglog_exact_for_power_laws(a, p, x):
    xs = [1.0, 10.0, 100.0, 1000.0]
    ys = [a * v ** p for v in xs]
    assert _loglog(x, xs, ys) == pytest.approx(a * x ** p, rel=1e-9)


@given(x=st.floats(6144.0, 4.0e8))
@settings(max_examples=100, deadline=None)
def test_curve_interpolation_stays_within_neighbours(prof, x):
    c = prof.device.tables.elementwise
    cm = CostModel(prof)
    op = Op("e", OpClass.ELEMENTWISE, LaunchPath.EAGER_ELEMENTWISE, x, x)
    t = cm.table_s(op)
    if t is None:
        assert x < c.bytes[0] or x > c.bytes[-1]
        return
    i = max(j for j in range(len(c.bytes)) if c.bytes[j] <= x)
    j = min(i + 1, len(c.bytes) - 1)
    lo, hi = min(c.us[i], c.us[j]), max(c.us[i], c.us[j])
    assert lo * 1e-6 - 1e-15 <= t <= hi * 1e-6 + 1e-15


def test_gemm_table_used_and_split_k_counted(prof):
    cm = CostModel(prof)
    t = next(g for g in prof.device.tables.gemm if g.kernels and 2 in g.kernels)
    i = t.kernels.index(2)
    op = Op("g", OpClass.GEMM, LaunchPath.EAGER_GEMM, 2.0 * t.m[i] * t.n * t.k, 1.0,
            (("k", t.k), ("m", t.m[i]), ("n", t.n)))
    assert cm.gpu_s(op) == pytest.approx(t.us[i] * 1e-6)
    assert cm.gemm_kernels(op) == 2
    outside = Op("g", OpClass.GEMM, LaunchPath.EAGER_GEMM, 1e9, 1e6, (("k", 7), ("m", 3), ("n", 5)))
    assert cm.gemm_kernels(outside) == 1
    assert cm.gpu_s(outside) == pytest.approx(cm.roofline_s(outside))


def test_predictions_change_when_a_profile_figure_changes(prof):
    base_e = predict("qwen3-0.6b", 1, 511, "none", "none", prof).result.step_s
    base_g = predict("qwen3-0.6b", 1, 511, "none", "full", prof).result.step_s
    host = prof.host.model_copy(deep=True)
    s = host.launch_us["eager_elementwise"]
    host.launch_us["eager_elementwise"] = s.model_copy(update={"p50": s.p50 * 2})
    slower_host = prof.model_copy(update={"host": host})
    assert predict("qwen3-0.6b", 1, 511, "none", "none", slower_host).result.step_s > base_e * 1.2
    dev = prof.device.model_copy(update={"graph_node_us": prof.device.graph_node_us + 1.0})
    slower_nodes = prof.model_copy(update={"device": dev})
    g2 = predict("qwen3-0.6b", 1, 511, "none", "full", slower_nodes).result.step_s
    kernels = predict("qwen3-0.6b", 1, 511, "none", "full", prof).result.kernels
    assert g2 - base_g == pytest.approx((kernels - 1) * 1e-6, rel=1e-6)


def test_h100_predicts_slower_bandwidth_bound_steps():
    h200 = predict("llama3-8b", 64, 4095, "packed", "full", "h200").result.step_s
    h100 = predict("llama3-8b", 64, 4095, "packed", "full", "h100-sxm").result.step_s
    assert 1.15 < h100 / h200 < 4.8 / 3.35 + 0.01
    assert not math.isnan(h100)
