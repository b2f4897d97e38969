"""Sanity checks of the serving model on the real step engine (datasheet-h200 profile, short runs):
Little's law, batch-1 TPOT at a very low rate, saturation, graphs never lowering the sustainable rate of a
launch-bound preset, determinism, and the capacity search's edge cases."""

import dataclasses
import math

import numpy as np
import pytest

from simulator.layouts.buckets import preset_sizes
from simulator.model.models import load_model
from simulator.model.profile import load_profile
from simulator.serving.arrivals import ArrivalSpec, LengthSpec, make_workload
from simulator.serving.capacity import Slo, find_capacity
from simulator.serving.replica import ServeConfig, prepare, simulate_serving

QWEN = load_model("qwen3-0.6b")
PROF = load_profile("datasheet-h200")
LOGN_P = LengthSpec("lognormal", mean=256, cv=1.0, low=1, high=2048)
LOGN_O = LengthSpec("lognormal", mean=128, cv=1.0, low=1, high=1024)
VLLM = tuple(preset_sizes("vllm"))


def cfg(graph="full_and_piecewise", **kw):
    return ServeConfig(QWEN, PROF, "fused", graph, VLLM if graph != "none" else (1,), **kw)


def serve(c, rate, duration=30.0, seed=0, prompt=LOGN_P, output=LOGN_O, prep=None):
    wl = make_workload(ArrivalSpec("poisson"), prompt, output, rate, duration, seed)
    return simulate_serving(c, wl, duration, prep)


@pytest.fixture(scope="module")
def prep_graph():
    return prepare(cfg())


def test_littles_law_on_the_simulated_queue(prep_graph):
    m = serve(cfg(), 40.0, 60.0, prep=prep_graph).metrics
    # L (time-average in system, integrated over the window) vs lambda * W (per-request records)
    assert m["little_L"] == pytest.approx(m["little_lambda_W"], rel=0.05)
    assert m["unfinished"] == 0 and m["little_L"] > 1


def test_low_rate_tpot_is_the_batch_1_step_time(prep_graph):
    fixed_p, fixed_o = LengthSpec("fixed", value=100), LengthSpec("fixed", value=50)
    r = serve(cfg(), 0.2, 200.0, prompt=fixed_p, output=fixed_o, prep=prep_graph)
    step1 = prep_graph.timer.decode(1, 150).step_s  # every context stays in the first bucket (256)
    assert r.metrics["tpot_p50_ms"] == pytest.approx(step1 * 1e3, rel=1e-9)
    assert r.metrics["mean_decode_batch"] < 1.05
    eager = serve(cfg("none"), 0.2, 200.0, prompt=fixed_p, output=fixed_o)
    assert eager.metrics["tpot_p50_ms"] > r.metrics["tpot_p50_ms"]  # batch 1 is launch-bound eager


def test_throughput_saturates_as_the_rate_grows():
    c = cfg(max_num_seqs=16)
    prep = prepare(c)
    rates = [5, 20, 80, 160, 320]
    tput = [serve(c, r, 15.0, prep=prep).metrics["throughput_req_s"] for r in rates]
    assert tput[1] > 3 * tput[0]  # light load: throughput follows the offered rate
    assert tput[3] < 0.8 * rates[3]  # overload: it does not
    assert tput[4] == pytest.approx(tput[3], rel=0.15)  # and stays flat at the saturation level
    assert max(tput) < 1.2 * tput[3]


def test_same_seed_same_results_other_seed_differs(prep_graph):
    a = serve(cfg(), 30.0, 20.0, seed=3, prep=prep_graph)
    b = serve(cfg(), 30.0, 20.0, seed=3, prep=prepare(cfg()))
    c = serve(cfg(), 30.0, 20.0, seed=4, prep=prep_graph)
    assert a.metrics == b.metrics and a.batch_log == b.batch_log
    assert a.metrics != c.metrics


def capacity(c, slo, duration=20.0, seed=0):
    prep = prepare(c)

    def evaluate(rate):
        return serve(c, rate, duration, seed, prep=prep).metrics

    return find_capacity(evaluate, slo, 20.0, 0.5, 1000.0, 0.03)


def test_graphs_never_lower_the_sustainable_rate_of_a_launch_bound_preset():
    # qwen3-0.6b with fused ops is launch-bound at small batches (eager batch-1 step: host > GPU time)
    slo = Slo(99, ttft_s=0.5, tpot_ms=2.0)
    eager = capacity(cfg("none"), slo)
    for graph in ("full", "full_and_piecewise", "piecewise"):
        g = capacity(cfg(graph), slo)
        assert g.status == eager.status == "ok"
        assert g.best_rate >= eager.best_rate * (1 - 0.03), graph


def test_impossible_slo_reports_no_rate_without_looping():
    calls = []

    def evaluate(rate):
        calls.append(rate)
        return {"tpot_p99_ms": 5.0, "ttft_p99_s": 0.01}

    res = find_capacity(evaluate, Slo(99, tpot_ms=0.001), 50.0, 0.5, 1000.0, 0.02)
    assert res.status == "none" and res.best_rate is None and "no rate meets" in res.message
    assert calls[-1] == 0.5 and len(calls) <= 9
    assert res.replicas(100.0) is None


def test_bisection_brackets_a_known_threshold_within_tolerance():
    res = find_capacity(lambda r: {"tpot_p99_ms": r / 10.0}, Slo(99, tpot_ms=3.7), 1.0, 0.1, 1000.0, 0.01)
    assert res.status == "ok" and res.best_rate <= 37.0 <= res.fail_rate
    assert (res.fail_rate - res.best_rate) / res.best_rate <= 0.01
    assert res.replicas(100.0) == math.ceil(100.0 / res.best_rate)
    top = find_capacity(lambda r: {"tpot_p99_ms": 1.0}, Slo(99, tpot_ms=3.7), 1.0, 0.1, 50.0, 0.01)
    assert top.status == "at_max" and top.best_rate == 50.0


def test_kv_pressure_preempts_and_still_serves_everyone():
    c = dataclasses.replace(cfg(), kv_blocks=200)  # 3200 tokens of KV: the longest request (3071) still fits
    r = serve(c, 60.0, 20.0)
    m = r.metrics
    assert m["preemptions"] > 0 and m["kv_util_peak"] <= 1.0 and m["kv_util_peak"] > 0.9
    assert m["unfinished"] == 0 and m["completed"] == m["requests"]
    free = serve(cfg(), 60.0, 20.0).metrics
    assert m["ttft_p99_s"] >= free["ttft_p99_s"]


def test_padding_waste_and_graph_share_follow_the_layout():
    dense = dataclasses.replace(cfg(), sizes=tuple(range(1, 513)), layout_label="all")
    a = serve(cfg(), 30.0, 20.0).metrics
    b = serve(dense, 30.0, 20.0).metrics
    assert b["padding_waste"] < a["padding_waste"] and a["padding_waste"] > 0
    assert b["graph_step_share"] == pytest.approx(a["graph_step_share"], abs=0.02)
    e = serve(cfg("none"), 30.0, 20.0).metrics
    assert e["graph_step_share"] == 0 and e["padding_waste"] == 0
    assert np.isfinite(e["cpu_bound_step_share"]) and e["cpu_bound_step_share"] > a["cpu_bound_step_share"]
