"""Step times of the serving model: layer extrapolation equals the full-depth engine, graph-mode and padding
rules, and the mixed-step interpolation."""

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from simulator.model.costs import CostModel
from simulator.model.models import PRESETS, load_model
from simulator.engine.predict import simulate
from simulator.model.profile import load_profile
from simulator.serving.steptime import C_GRID, D_GRID, L_GRID, StepTimer, bracket
from simulator.model.workload import StepShape, build_step

COSTS = CostModel(load_profile("datasheet-h200"))
QWEN = load_model("qwen3-0.6b")


def full_depth(model, shape, fusion, mode):
    return simulate(build_step(model, shape, fusion), COSTS, mode, "fast", shape.is_pure_decode)[0]


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(sorted(PRESETS)), st.sampled_from(["none", "packed", "compiled", "fused"]),
       st.sampled_from(["none", "full", "piecewise"]), st.integers(0, 300), st.integers(0, 3),
       st.integers(1, 1500), st.integers(1, 4000))
def test_layer_extrapolation_equals_the_full_depth_engine(name, fusion, mode, d, p, L, ctx):
    m = load_model(name)
    assume(not (m.is_moe and fusion == "compiled"))  # refused for MoE models (simulator/model/moe.py)
    if d == 0 and p == 0:
        d = 1
    if mode == "full" and p:
        mode = "none"  # a full graph replays decode-only steps
    shape = StepShape(d, ctx, p, L if p else 0)
    t = StepTimer(m, COSTS, fusion, mode, [1])
    c = t._run(("test",), shape, mode, shape.tokens, shape.tokens)
    ref = full_depth(m, shape, fusion, mode)
    assert c.step_s == pytest.approx(ref.step_s, rel=1e-9)
    assert c.gpu_busy_s == pytest.approx(ref.gpu_busy_s, rel=1e-9)
    assert c.cpu_bound == (ref.bound == "cpu")


def test_decode_pads_to_the_layout_and_runs_eager_above_it():
    t = StepTimer(QWEN, COSTS, "fused", "full_and_piecewise", [1, 2, 4, 8])
    c = t.decode(3, 1000)
    assert (c.mode, c.rows, c.padded) == ("full", 3, 4)
    # padding rows attend to nothing: the padded step runs at context 1024 * 3 / 4
    assert c.step_s == pytest.approx(full_depth(QWEN, StepShape(4, 768), "fused", "full").step_s, rel=1e-9)
    big = t.decode(9, 1000)
    assert (big.mode, big.padded) == ("none", 9)
    assert big.step_s == pytest.approx(full_depth(QWEN, StepShape(9, 1024), "fused", "none").step_s, rel=1e-9)
    pw = StepTimer(QWEN, COSTS, "fused", "piecewise", [1, 2, 4, 8]).decode(3, 1000)
    assert pw.mode == "piecewise"
    eager = StepTimer(QWEN, COSTS, "fused", "none", [1, 2, 4, 8]).decode(3, 1000)
    assert (eager.mode, eager.padded) == ("none", 3) and eager.step_s > c.step_s


def test_mixed_steps_follow_the_graph_mode():
    sizes = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    for graph, small, large in (("none", "none", "none"), ("full", "none", "none"),
                                ("piecewise", "piecewise", "none"), ("full_and_piecewise", "piecewise", "none")):
        t = StepTimer(QWEN, COSTS, "fused", graph, sizes)
        assert t.mixed(4, 1, 100, 500).mode == small, graph
        assert t.mixed(4, 1, 1000, 500).mode == large, graph  # 1004 tokens: above the largest size
    pw = StepTimer(QWEN, COSTS, "fused", "piecewise", sizes).mixed(4, 1, 100, 500)
    assert (pw.rows, pw.padded) == (104, 128)


def test_mixed_interpolation_is_exact_on_grid_points_and_between_neighbours():
    t = StepTimer(QWEN, COSTS, "fused", "none", [1])
    d, L, ctx = D_GRID[6], L_GRID[9], C_GRID[4]
    exact = full_depth(QWEN, StepShape(d, ctx, 1, L), "fused", "none").step_s
    assert t.mixed(d, 1, L, ctx).step_s == pytest.approx(exact, rel=1e-9)
    mid = t.mixed(d, 1, (L_GRID[9] + L_GRID[10]) // 2, ctx).step_s
    lo, hi = exact, full_depth(QWEN, StepShape(d, ctx, 1, L_GRID[10]), "fused", "none").step_s
    assert min(lo, hi) <= mid <= max(lo, hi)
    ref = full_depth(QWEN, StepShape(20, 1300, 1, 700), "fused", "none").step_s
    assert t.mixed(20, 1, 700, 1300).step_s == pytest.approx(ref, rel=0.05)


def test_bracket():
    assert bracket(5, [0, 4, 8]) == (4, 8, 0.25)
    assert bracket(8, [0, 4, 8]) == (8, 8, 0.0)
    assert bracket(99, [0, 4, 8]) == (8, 8, 0.0)
    assert bracket(-1, [0, 4, 8]) == (0, 0, 0.0)
