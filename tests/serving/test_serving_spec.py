"""Speculative decoding in `serve` and `capacity` (issue 21 item 4, serving half): verify + draft steps, tokens per
step drawn per sequence from the acceptance model (seeded), k + 1 KV slots per sequence per step, refusals."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.config.capacity import CapacityScenario
from simulator.config.serve import ServeScenario
from simulator.engine.spec import predict_spec_setup
from simulator.model.spec import Acceptance, closed_form
from simulator.serving.kv import Cohort, blocks_for
from simulator.serving.replica import prepare
from simulator.serving.setup import build_config
from simulator.serving.study import serve
from simulator.serving.steptime import StepTimer
from tests.conftest import cli_error

MODEL, PROFILE = "qwen3-0.6b", "h200"  # h200: its verify-attention tables (q_len 2-8) are measured


def scenario(**kw) -> ServeScenario:
    base = dict(kind="serve", name="spec", model=MODEL, profile=PROFILE, rate=2.0, duration_s=20.0, seed=3)
    return ServeScenario(**{**base, **kw})


def metrics(**kw) -> dict:
    return serve(scenario(**kw))["metrics"]


def draw_moments(a: float, k: int) -> tuple[float, float]:
    """Mean and variance of one step's emitted tokens at constant acceptance a: P(T = j) = a^(j-1)(1 - a) for
    j <= k, P(T = k + 1) = a^k."""
    p = [a ** (j - 1) * (1 - a) for j in range(1, k + 1)] + [a ** k]
    j = np.arange(1, k + 2)
    mean = float(np.dot(p, j))
    return mean, float(np.dot(p, (j - mean) ** 2))


# -- the step: verify + draft, not plain decode ------------------------------------------------------------------

@pytest.mark.parametrize("n,ctx", [(1, 300), (5, 1000), (24, 700)])
def test_spec_step_is_verify_plus_draft_of_predict(n, ctx):
    """The serving step of n sequences is predict_spec_setup's verify + draft at the bucket's context (the same
    routing and pricing), and costs more than plain decode's step."""
    cfg = build_config(scenario(spec_tokens=3, acceptance=0.0), MODEL, PROFILE, "fused", "full_and_piecewise", "vllm")
    t = StepTimer.of(cfg.step_setup())
    c = t.decode(n, ctx)
    cb = t.ctx_of(ctx)
    p = predict_spec_setup(cfg.step_setup(), n, cb, baseline=False)
    assert c.step_s == pytest.approx(p.step_ms / 1e3, rel=1e-9)
    assert c.rows == 4 * n and c.padded >= 4 * n  # rows in verify tokens, padded to the verify sizes
    assert c.step_s > t.plain_decode(n, ctx).step_s
    assert t.spec_extra(n, ctx) == pytest.approx(c.step_s - t.plain_decode(n, ctx).step_s, rel=1e-12)


def test_acceptance_zero_emits_one_token_per_verify_step():
    m = metrics(spec_tokens=2, acceptance=0.0)
    assert m["tokens_per_step"] == 1.0 and m["tokens_per_step_expected"] == 1.0
    assert m["tokens_per_step_closed_form"] == 1.0
    plain = metrics()
    # same requests, one token a step each, but every step is the (dearer) verify + draft step
    assert m["completed"] == plain["completed"]
    assert m["spec_verify_steps"] > 0
    assert m["tpot_p50_ms"] > plain["tpot_p50_ms"]


# -- the acceptance model in the run -----------------------------------------------------------------------------

def test_seeded_determinism():
    a = metrics(spec_tokens=3, acceptance=0.7)
    b = metrics(spec_tokens=3, acceptance=0.7)
    assert a == b
    c = metrics(spec_tokens=3, acceptance=0.7, seed=4)
    assert c["tokens_per_step"] != a["tokens_per_step"]


@pytest.mark.parametrize("a,k", [(0.8, 3), (0.5, 4)])
def test_mean_tokens_per_step_reaches_the_closed_form(a, k):
    """Long outputs: measured decode tokens / verify steps -> (1 - a^(k+1)) / (1 - a). The last step of each
    request emits at most what is left, so the measure sits below the mean draw by at most k x requests / steps."""
    m = metrics(spec_tokens=k, acceptance=a, rate=1.0, duration_s=60.0,
                output={"kind": "fixed", "value": 3001}, prompt={"kind": "fixed", "value": 64})
    cf = closed_form(a, k)
    mean, var = draw_moments(a, k)
    assert mean == pytest.approx(cf, rel=1e-12)
    N, R = m["spec_verify_steps"], m["completed"]
    assert N > 30_000
    sigma = math.sqrt(var / N)
    assert cf - 4 * sigma - k * R / N <= m["tokens_per_step"] <= cf + 4 * sigma


def test_per_position_acceptance():
    acc = Acceptance.per_position([0.9, 0.5, 0.2], 3)
    m = metrics(spec_tokens=3, acceptance=[0.9, 0.5, 0.2], output={"kind": "fixed", "value": 801}, duration_s=40.0)
    assert m["tokens_per_step_expected"] == pytest.approx(1 + 0.9 + 0.45 + 0.09, rel=1e-12)
    assert "tokens_per_step_closed_form" not in m  # no constant a
    assert abs(m["tokens_per_step"] - acc.tokens_per_step) < 0.05


def test_speculation_cuts_tpot_at_batch_one_load_in_capacity():
    """A capacity run at a batch-1-ish load (rates up to 0.5 req/s): speculation at acceptance 0.8 gives lower
    TPOT than plain decode, and its req/s at the SLO is at least plain's."""
    from simulator.studies.capacity import run_capacity_scenario

    def cap(**kw):
        sc = CapacityScenario(kind="capacity", name="c", models=[MODEL], profiles=[PROFILE], graph=["full_and_piecewise"],
                              slo={"tpot_ms": 50.0}, duration_s=30.0, curve_fractions=[0.5],
                              search={"rate_min": 0.1, "rate_max": 0.5, "max_runs": 4}, **kw)
        return run_capacity_scenario(sc, None)["summary"][0]

    plain, spec = cap(), cap(spec_tokens=3, acceptance=0.8)
    assert spec["tpot_p99_ms"] < plain["tpot_p99_ms"]
    assert spec["best_rate"] >= plain["best_rate"]
    assert spec["tokens_per_step"] > 2.5 and "tokens_per_step" not in plain


# -- KV: k + 1 slots per sequence per step -----------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-200, 200), min_size=1, max_size=12), st.integers(1, 20), st.integers(0, 40),
       st.integers(1, 40), st.sampled_from([4, 16]))
def test_cohort_rate_matches_brute_force(bases, rate, g0, k, bs):
    """need / needs_over / steps_affordable of a cohort growing `rate` slots a step equal a member-by-member count."""
    co = Cohort(bs, rate)
    for b in bases:
        co.add(b)

    def need(g):
        return sum(blocks_for(b + rate * g, bs) - blocks_for(b + rate * (g - 1), bs) for b in bases)

    assert all(co.need(g) == need(g) for g in range(g0, g0 + 2 * bs))
    total, weighted = co.needs_over(g0, k)
    assert total == sum(need(g0 + i) for i in range(k))
    assert weighted == sum(need(g0 + i) * (k - i) for i in range(k))
    free = total
    ka = co.steps_affordable(g0, free)
    assert sum(need(g0 + i) for i in range(ka)) <= free < sum(need(g0 + i) for i in range(ka + 1))


def test_kv_holds_k_plus_one_slots_per_step():
    """With KV the binding limit, speculation at acceptance 0 (same tokens, k + 1 slots a step) fills more of it."""
    kw = dict(rate=4.0, output={"kind": "fixed", "value": 200}, prompt={"kind": "fixed", "value": 100},
              engine={"kv_blocks": 4000})
    plain, spec = metrics(**kw), metrics(spec_tokens=3, acceptance=0.0, **kw)
    assert spec["kv_util_mean"] > 2 * plain["kv_util_mean"]


def test_draft_weights_and_kv_come_off_the_pool():
    sc = scenario(spec_tokens=3, acceptance=0.8)
    spec_kv = prepare(build_config(sc, MODEL, PROFILE, "fused", "full_and_piecewise", "vllm")).kv
    plain_kv = prepare(build_config(scenario(), MODEL, PROFILE, "fused", "full_and_piecewise", "vllm")).kv
    assert spec_kv.blocks < plain_kv.blocks


# -- outputs and refusals ----------------------------------------------------------------------------------------

def test_serve_json_carries_the_spec_figures():
    import json

    from typer.testing import CliRunner

    from simulator.cli import app

    r = CliRunner().invoke(app, ["serve", "--model", MODEL, "--profile", PROFILE, "--duration", "10", "--spec-tokens",
                                 "2", "--acceptance", "0.6", "--layout", "sglang", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["spec_tokens"] == 2 and d["acceptance"] == [0.6, 0.6] and d["spec_engine"] == "sglang"
    assert all(s % 3 == 0 for s in d["sizes"])  # verify sizes in tokens: multiples of 1 + k
    assert d["tokens_per_step_closed_form"] == pytest.approx(1 + 0.6 + 0.36)
    assert "speculative_decoding" in d["assumptions"]


@pytest.mark.parametrize("argv,needle", [
    (["--spec-tokens", "3"], "needs acceptance"),
    (["--acceptance", "0.8"], "need spec_tokens"),
    (["--spec-tokens", "3", "--acceptance", "0.8,0.5"], "per-position"),
    (["--spec-tokens", "3", "--acceptance", "1.5"], "probability"),
    (["--spec-tokens", "3", "--acceptance", "0.8", "--layout", "pow2"], "layout"),
])
def test_serve_refusals_are_one_line(capsys, argv, needle):
    err = cli_error(capsys, ["serve", "--model", MODEL, "--profile", PROFILE, "--duration", "5"] + argv)
    assert needle in err


def test_capacity_refuses_optimize_layouts_with_spec():
    with pytest.raises(Exception, match="optimize with spec_tokens"):
        CapacityScenario(kind="capacity", name="c", models=[MODEL], slo={"tpot_ms": 5.0}, spec_tokens=2,
                         acceptance=0.5, layouts=[{"label": "vllm", "sizes": "vllm"},
                                                  {"label": "opt", "optimize": {"against": "vllm"}}])


def test_capacity_cli_refusal_is_one_line(capsys):
    err = cli_error(capsys, ["capacity", "--model", MODEL, "--slo-tpot-ms", "5", "--spec-tokens", "2"])
    assert "acceptance" in err


def test_capacity_req_s_at_a_tpot_slo_includes_speculation():
    """An SLO between speculation's TPOT and plain decode's at a light load (both measured here, not assumed): plain
    decode meets it at no rate, speculation at some."""
    from simulator.studies.capacity import run_capacity_scenario

    light = dict(rate=0.5, duration_s=30.0)
    slo = 0.5 * (metrics(**light)["tpot_p99_ms"] + metrics(spec_tokens=3, acceptance=0.8, **light)["tpot_p99_ms"])

    def cap(**kw):
        sc = CapacityScenario(kind="capacity", name="c", models=[MODEL], profiles=[PROFILE], graph=["full_and_piecewise"],
                              slo={"tpot_ms": slo}, duration_s=30.0, curve_fractions=[],
                              search={"rate_min": 0.1, "rate_max": 200.0, "max_runs": 10}, **kw)
        return run_capacity_scenario(sc, None)["summary"][0]

    plain, spec = cap(), cap(spec_tokens=3, acceptance=0.8)
    assert plain["best_rate"] is None
    assert spec["best_rate"] is not None and spec["best_rate"] > 0.5
    assert spec["tpot_p99_ms"] <= slo


@pytest.mark.parametrize("name", ["serve_qwen3_0p6b.yaml", "capacity_qwen3_0p6b.yaml"])
def test_serve_and_capacity_scenarios_take_spec_tokens(name):
    """The shipped serve / capacity scenarios accept spec_tokens (the refusal lifted: their studies run it)."""
    import yaml

    from simulator.config import parse_scenario
    from tests.paths import ROOT

    data = yaml.safe_load((ROOT / "scenarios" / name).read_text())
    data.update(spec_tokens=2, acceptance=0.5)
    if "layouts" in data:  # an optimize layout is refused with spec_tokens (test_capacity_refuses_optimize_...)
        data["layouts"] = [lay for lay in data["layouts"] if "optimize" not in lay]
    sc = parse_scenario(data)
    assert sc.spec_tokens == 2 and sc.spec_acceptance().tokens_per_step == pytest.approx(1.75)
