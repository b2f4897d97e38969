"""Expected step time and padding over a batch-size distribution (stepcost.expected_step): a hand-computed
case against direct DES simulations, and the sweep and the optimizer reporting the same figures for the same
layout and distribution (issue 12 item 1: one definition of padding waste)."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from simulator.engine.predict import simulate
from simulator.engine.stepcost import expected_step
from simulator.layouts.distribution import from_histogram
from simulator.model.costs import CostModel
from simulator.model.models import load_model
from simulator.model.profile import load_profile
from simulator.model.workload import StepShape, build_step, decode
from simulator.optimizer.dp import objective
from simulator.studies.optimize import Inputs, build_problem, metrics, setup
from simulator.sweep.grid import evaluate_point, point_for

PROFILE = "datasheet-h200"
QWEN = load_model("qwen3-0.6b")
CTX = 256


def des_s(shape, graph, fusion="fused"):
    step = build_step(QWEN, shape, fusion)
    return simulate(step, CostModel(load_profile(PROFILE)), graph, "des", pure_decode=shape.is_pure_decode)[0].step_s


def test_hand_computed_expectation():
    # sizes (4, 8), full graphs. Batch 3 (half the steps) pads to 4: 1 dummy row; batch 8 (a quarter) is captured;
    # batch 20 (a quarter) is above the largest size: eager, unpadded.
    e = expected_step(QWEN, PROFILE, "fused", "full", (4, 8), (3, 8, 20), (0.5, 0.25, 0.25), CTX)
    assert e.padded_rows == 0.5 * 1
    assert e.executed_rows == 0.5 * 4 + 0.25 * 8 + 0.25 * 20  # 9 rows: the eager step's 20 rows count
    assert e.waste == pytest.approx(0.5 / 9, rel=1e-15)
    assert e.waste_mean == pytest.approx(0.5 * 1 / 4, rel=1e-15)
    assert e.eager_share == 0.25 and e.overflow_share == 0.25
    assert e.tokens == 0.5 * 3 + 0.25 * 8 + 0.25 * 20
    want = 0.5 * des_s(decode(4, CTX), "full") + 0.25 * des_s(decode(8, CTX), "full") \
        + 0.25 * des_s(decode(20, CTX), "none")
    assert e.step_s == pytest.approx(want, rel=1e-9)
    unpad = 0.5 * des_s(decode(3, CTX), "full") + 0.25 * des_s(decode(8, CTX), "full") \
        + 0.25 * des_s(decode(20, CTX), "none")
    assert e.unpadded_s == pytest.approx(unpad, rel=1e-9)
    assert e.evals == 3


def test_hand_computed_mixed_share():
    # a quarter of the steps are mixed: 3 decode + 1 x 4 prefill = 7 tokens -> 8 (piecewise, 1 dummy row);
    # the rest are decode steps of batch 3 -> 4 (full graph, 1 dummy row)
    e = expected_step(QWEN, PROFILE, "fused", "full_and_piecewise", (4, 8), (3,), (1.0,), CTX, mixed=(0.25, 1, 4))
    assert e.padded_rows == 1.0 and e.executed_rows == 0.75 * 4 + 0.25 * 8
    assert e.waste == pytest.approx(1 / 5, rel=1e-15) and e.eager_share == 0 and e.tokens == 0.75 * 3 + 0.25 * 7
    want = 0.75 * des_s(decode(4, CTX), "full") + 0.25 * des_s(StepShape(4, CTX, 1, 4), "full_and_piecewise")
    assert e.step_s == pytest.approx(want, rel=1e-9)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sizes=hs.lists(hs.integers(1, 24), min_size=1, max_size=6, unique=True),
       hist=hs.dictionaries(hs.integers(1, 28), hs.integers(1, 9), min_size=1, max_size=8),
       graph=hs.sampled_from(["full", "full_decode_only", "piecewise", "full_and_piecewise"]))
def test_sweep_and_optimizer_report_the_same_expectation(sizes, hist, graph):
    sizes = sorted(sizes)
    dist = from_histogram(hist)
    row = evaluate_point(point_for(QWEN, PROFILE, fusion="fused", graph=graph, layout="L", sizes=tuple(sizes),
                                   distribution="d", dist_sizes=dist.sizes, dist_weights=dist.weights,
                                   budget_bytes=1 << 40, ctx=CTX))
    st = setup(Inputs(dist, model=QWEN, profile=PROFILE, fusion="fused", graph=graph, ctx=CTX, presets=()))
    m = metrics(st, sizes)
    # the same function, correctly rounded sums: the same floats
    assert (m["step_ms"], m["padded_rows"], m["padding_waste"]) == \
        (row["expected_step_ms"], row["padded_rows"], row["waste"])
    assert m["eager_share"] == row["overflow_frac"]  # decode steps: without a graph = above the largest size
    # the optimizer's DP arithmetic (alpha of the padded size, eager above the largest) gives the same figure
    if sizes[-1] <= int(st.sizes[-1]):  # every size is a candidate
        assert objective(build_problem(st, None), sizes) * 1e3 == pytest.approx(m["step_ms"], rel=1e-12)
