"""The multi-step engine loop (simulator/engine/steploop.py): hand-computed 2- and 3-step timelines under sync and
async scheduling, DES == fast path on random multi-step workloads, async never slower than sync, and a step
never shorter than its GPU work."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.engine.des import simulate_des
from simulator.engine.fastpath import simulate_fast
from simulator.engine.steploop import EngineCosts, build_loop, run_loop, summarize_loop
from tests.conftest import make_plan

US = 1e-6


def costs(**kw):
    d = dict(schedule_s=1 * US, prep_s=1 * US, copy_launch_s=1 * US, copy_gpu_s=1 * US, h2d_copies=1,
             sample_host_s=1 * US, sample_gpu_s=2 * US, sample_kernels=1, tolist_s=1 * US, detok_s=1 * US)
    d.update(kw)
    return EngineCosts(**d)


def fwd():
    return make_plan([3], [10])  # one launch: 3 us host, 10 us kernel, no gaps


def run(steps, sched, engine):
    r, tl, lp = run_loop(fwd(), costs(), steps, sched, 0.0, engine)
    return r, tl


# step 0: copy (pre 2 + 1 host) submits at 3, forward 6, sample 7, d2h 8; GPU copy 3-4, fwd 6-16,
# sample 16-18, d2h 18-19.
@pytest.mark.parametrize("engine", ["des", "fast"])
def test_sync_two_and_three_steps(engine):
    # sync: step 1 waits for d2h(0) (19), post 2 -> delivery 21; + pre 2 + copy 1 -> submit 24, fwd 27,
    # sample 28, d2h 29; GPU copy 24-25, fwd 27-37, sample 37-39, d2h 39-40; tail: 40 + 2 = 42.
    r, tl = run(2, "sync", engine)
    np.testing.assert_allclose(np.array(r.deliver_s) / US, [21, 42])
    np.testing.assert_allclose(tl.submit / US, [3, 6, 7, 8, 24, 27, 28, 29])
    np.testing.assert_allclose(tl.gpu_end / US, [4, 16, 18, 19, 25, 37, 39, 40])
    np.testing.assert_allclose(tl.wait / US, [0, 0, 0, 0, 11, 0, 0, 0])
    assert r.step_s == pytest.approx(21 * US)
    r3, _ = run(3, "sync", engine)
    np.testing.assert_allclose(np.array(r3.deliver_s) / US, [21, 42, 63])
    assert r3.step_s == pytest.approx(21 * US)
    assert r3.host_per_step_s == pytest.approx(10 * US)  # forward 3 + engine 7
    assert r3.gpu_per_step_s == pytest.approx(14 * US)
    assert r3.bound == "gpu"


@pytest.mark.parametrize("engine", ["des", "fast"])
def test_async_two_and_three_steps(engine):
    # async: step 1 launches at once: copy 11, fwd 14, sample 15, d2h 16; GPU copy 19-20, fwd 20-30,
    # sample 30-32, d2h 32-33. Two steps: tail waits d2h(0) 19 -> 21, d2h(1) 33 -> 35.
    r, tl = run(2, "async", engine)
    np.testing.assert_allclose(tl.submit / US, [3, 6, 7, 8, 11, 14, 15, 16])
    np.testing.assert_allclose(tl.gpu_end / US, [4, 16, 18, 19, 20, 30, 32, 33])
    np.testing.assert_allclose(np.array(r.deliver_s) / US, [21, 35])
    assert r.step_s == pytest.approx(35 / 2 * US)  # too short for a steady state: last delivery / N
    # three steps: step 2's first launch waits for d2h(0) at 19 (host at 16), delivery 21, then copy 24,
    # fwd 27, sample 28, d2h 29; GPU copy 33-34, fwd 34-44, sample 44-46, d2h 46-47; tail: d2h(1) 33 -> 35,
    # d2h(2) 47 -> 49. Steady state: d2h ends 33 -> 47 = 14 = the GPU's work per step.
    r3, tl3 = run(3, "async", engine)
    np.testing.assert_allclose(tl3.submit[8:] / US, [24, 27, 28, 29])
    np.testing.assert_allclose(tl3.gpu_end[8:] / US, [34, 44, 46, 47])
    np.testing.assert_allclose(np.array(r3.deliver_s) / US, [21, 35, 49])
    assert r3.step_s == pytest.approx(14 * US)
    assert r3.host_wait_per_step_s == pytest.approx((3 + 4 + 12) / 3 * US)  # 16->19, 29->33, 35->47


def test_cpu_and_engine_bound_labels():
    slow_fwd = make_plan([50], [10])
    r, _, _ = run_loop(slow_fwd, costs(), 3, "async", 0.0)
    # host lane: forward 50 + engine 7 per step once steps wait (step 2 on)
    assert r.bound == "cpu" and r.step_s == pytest.approx(57 * US)
    r, _, _ = run_loop(fwd(), costs(detok_s=40 * US), 3, "async", 0.0)
    assert r.bound == "engine"


loops = st.tuples(
    st.integers(1, 12),  # forward launches
    st.lists(st.integers(1, 3), min_size=12, max_size=12),
    st.integers(1, 5),  # steps
    st.integers(1, 8),  # queue depth
    st.integers(0, 3),  # h2d copies
    st.integers(1, 3),  # sampling kernels
    st.lists(st.floats(0, 30), min_size=8, max_size=8),  # engine costs, us
    st.randoms(use_true_random=False),
)


def random_loop(args):
    nf, counts, steps, q, h2d, sk, e, rnd = args
    counts = counts[:nf]
    nk = sum(counts)
    f = make_plan([rnd.uniform(0, 20) for _ in range(nf)], [rnd.uniform(0, 20) for _ in range(nk)],
                  gap_us=[rnd.uniform(0, 2) for _ in range(nk)], counts=counts, queue_depth=q)
    f.host_tail_s = rnd.uniform(0, 5) * US
    ec = EngineCosts(schedule_s=e[0] * US, prep_s=e[1] * US, copy_launch_s=e[2] * US, copy_gpu_s=e[3] * US,
                     h2d_copies=h2d, sample_host_s=e[4] * US, sample_gpu_s=e[5] * US, sample_kernels=sk,
                     tolist_s=e[6] * US, detok_s=e[7] * US)
    return f, ec, steps, rnd.uniform(0, 2) * US


@settings(max_examples=150, deadline=None)
@given(loops, st.sampled_from(["sync", "async"]))
def test_fast_path_equals_des_multistep(args, sched):
    f, ec, steps, gap = random_loop(args)
    lp = build_loop(f, ec, steps, sched, gap)
    a, b = simulate_des(lp.plan), simulate_fast(lp.plan)
    scale = max(float(a.gpu_end[-1]), 1e-12)
    for k in ("submit", "stall", "gpu_start", "gpu_end", "wait"):
        np.testing.assert_allclose(getattr(a, k), getattr(b, k), rtol=0, atol=1e-9 * scale)
    ra, rb = summarize_loop(lp, a), summarize_loop(lp, b)
    assert ra.step_s == pytest.approx(rb.step_s, rel=1e-9, abs=1e-15)
    np.testing.assert_allclose(ra.deliver_s, rb.deliver_s, rtol=0, atol=1e-9 * scale)


@settings(max_examples=150, deadline=None)
@given(loops)
def test_async_never_slower_and_step_never_shorter_than_gpu(args):
    f, ec, steps, gap = random_loop(args)
    rs = summarize_loop(lp := build_loop(f, ec, steps, "sync", gap), simulate_fast(lp.plan))
    ra = summarize_loop(lq := build_loop(f, ec, steps, "async", gap), simulate_fast(lq.plan))
    tol = 1e-9 * max(rs.total_s, 1e-12)
    assert ra.total_s <= rs.total_s + tol
    if steps >= 3:
        assert ra.step_s <= rs.step_s + tol
    for r, p in ((rs, lp), (ra, lq)):
        gpu_step = float(p.plan.gpu_s.sum()) / steps  # kernel time of one step
        assert r.step_s >= gpu_step - tol
        assert r.total_s >= steps * gpu_step - tol


# --- interfaces: profile field, predict --steps, serving's per-step time ------------------------------------------

def test_old_profile_loads_and_engine_field_validates():
    from simulator.model.profile import load_profile, parse_profile
    from simulator.engine.steploop import ESTIMATE, engine_costs

    p = load_profile("h200")
    ec = engine_costs(p, 8)
    assert ec.measured is (p.host.engine_step_us is not None) and ec.host_s > 0
    raw = p.model_dump(mode="json")
    raw["host"]["engine_step_us"] = ESTIMATE.model_dump(mode="json")
    q = parse_profile(raw)
    assert engine_costs(q, 8).measured
    raw["host"]["engine_step_us"]["copy_launch_us"] = -1.0
    with pytest.raises(Exception, match="must not be negative"):
        parse_profile(raw)


def test_by_batch_interpolates_and_extrapolates():
    from simulator.model.profile import ByBatch

    b = ByBatch(batch=[1, 8, 64], us=[10, 24, 80])
    assert b.at(1) == 10 and b.at(8) == 24 and b.at(4.5) == pytest.approx(17)
    assert b.at(128) == pytest.approx(80 + 64)  # the last segment's slope
    assert b.at(0) >= 0 and ByBatch(batch=[4], us=[7]).at(100) == 7


def test_closed_form_matches_engine_loop_for_graph_replays():
    """Serving's closed-form steady state agrees with the simulated engine loop (graph full, both schedulings)."""
    from simulator.model.costs import CostModel
    from simulator.model.models import load_model
    from simulator.engine.plan import build_plan
    from simulator.model.profile import load_profile
    from simulator.engine.steploop import engine_costs, steady_step_s
    from simulator.engine.timeline import summarize
    from simulator.model.workload import build_step, decode

    prof = load_profile("h200")
    costs = CostModel(prof)
    for b in (1, 64):
        plan = build_plan(build_step(load_model("qwen3-0.6b"), decode(b, 511), "none"), costs, "full")
        f = summarize(simulate_fast(plan))
        ec = engine_costs(prof, b)
        for sched in ("sync", "async"):
            r, _, _ = run_loop(plan, ec, 6, sched, costs.eager_gap_s)
            cf = steady_step_s(f.step_s, f.cpu_busy_s, f.gpu_busy_s + f.gpu_gap_s, ec, sched)
            assert cf == pytest.approx(r.step_s, rel=0.03), (b, sched)


def test_predict_steps_json(capsys):
    import json

    from simulator.cli import main

    out = {}
    for sched in ("sync", "async"):
        with pytest.raises(SystemExit) as e:
            main(["predict", "--model", "qwen3-0.6b", "--batch", "8", "--ctx", "511", "--graph", "full",
                  "--steps", "6", "--scheduling", sched, "--json"])
        assert e.value.code in (0, None)
        out[sched] = json.loads(capsys.readouterr().out)
    for d in out.values():
        assert {"step_ms", "host_ms_per_step", "bound", "forward_step_ms"} <= set(d)
        assert d["bound"] in ("cpu", "gpu", "engine") and d["step_ms"] >= d["gpu_ms_per_step"] - 1e-9
    assert out["async"]["step_ms"] <= out["sync"]["step_ms"]


def test_predict_steps_bad_flags(capsys):
    from tests.conftest import cli_error

    assert "--scheduling" in cli_error(capsys, ["predict", "--model", "qwen3-0.6b", "--steps", "3",
                                                "--scheduling", "later"])
    assert "--steps" in cli_error(capsys, ["predict", "--model", "qwen3-0.6b", "--steps", "-1"])


def test_serving_step_includes_engine_work():
    from simulator.model.costs import CostModel
    from simulator.model.models import load_model
    from simulator.model.profile import load_profile
    from simulator.serving.steptime import StepTimer

    m, costs = load_model("qwen3-0.6b"), CostModel(load_profile("h200"))
    t = {s: StepTimer(m, costs, "fused", "full_and_piecewise", [1, 2, 4, 8, 16, 32], scheduling=s)
         for s in ("none", "sync", "async")}
    for n in (1, 8, 32):
        none, sync, asyn = (t[s].decode(n, 700).step_s for s in ("none", "sync", "async"))
        assert sync > none and asyn <= sync
    mixed = {s: t[s].mixed(4, 1, 300, 900).step_s for s in ("none", "sync", "async")}
    assert mixed["sync"] > mixed["none"] and mixed["async"] <= mixed["sync"]


def _fake_engine_loop() -> dict:
    """The shape calibration/scripts/engine_loop.py writes (figures made up)."""
    def pct(v):
        return {"p10": v * 0.9, "p50": v, "p90": v * 1.2, "n": 30}

    rows = []
    for b in (1, 8, 64):
        runs = []
        for graph, samplings in (("none", ("greedy",)), ("full", ("greedy", "top_p"))):
            for s in samplings:
                for sched in ("sync", "async"):
                    parts = {"schedule": pct(20 + b), "prep": pct(15 + b / 4), "h2d": pct(24), "forward": pct(30),
                             "sample": pct(12 if s == "greedy" else 140), "wait": pct(4000), "tolist": pct(30),
                             "detok": pct(3 + b)}
                    runs.append({"graph": graph, "sampling": s, "scheduling": sched,
                                 "wall": {"step_ms": pct(4.5)}, "parts_us": parts})
        rows.append({"batch": b, "runs": runs, "device_us": {"sample_greedy": pct(6 + b / 16),
                                                              "sample_top_p": pct(70 + b), "h2d_copy": pct(2)}})
    return {"loop": rows, "loop_ops": {"greedy": 1, "top_p": 13, "h2d_copies": 3},
            "capture": [{"model": "qwen3-0.6b", "layers": 28, "batch": 64, "order": 0, "repeat": False,
                         "warmup_s": [0.05, 0.03], "capture_s": 0.03}],
            "compile": [{"model": "qwen3-0.6b", "layers": 2, "batch": 8, "dynamic": False, "cache": "cold",
                         "compile_s": 12.0, "second_call_s": 0.01}]}


def test_build_engine_section_into_profile():
    from calibration.build_engine import engine_section, startup_figures
    from simulator.model.profile import load_profile, parse_profile
    from simulator.engine.steploop import engine_costs

    sec = engine_section(_fake_engine_loop())
    assert sec["copy_launch_us"] == pytest.approx(8) and sec["tolist"]["us"] == [pytest.approx(20)] * 3
    assert sec["schedule"]["batch"] == [1, 8, 64] and sec["sample_kernels"] == {"greedy": 1, "top_p": 13}
    raw = load_profile("h200").model_dump(mode="json")
    raw["host"]["engine_step_us"] = sec
    ec = engine_costs(parse_profile(raw), 8, "top_p")
    assert ec.measured and ec.sample_host_s == pytest.approx(140e-6) and ec.schedule_s == pytest.approx(28e-6)
    st = startup_figures(_fake_engine_loop())
    assert st["capture"][0]["capture_s"] == 0.03 and st["compile"][0]["compile_s"] == 12.0
    with pytest.raises(ValueError):
        engine_section({"loop": []})


def test_predict_steps_report_draws_the_loop(tmp_path):
    """`predict --steps N --report F.html` writes the loop's two lanes; --report without --steps is one line, exit 2."""
    from tests.cli.test_fuzz_inputs import assert_one_line_error, invoke

    page = tmp_path / "loop.html"
    code, out, err = invoke(["predict", "--model", "qwen3-0.6b", "--batch", "8", "--graph", "full", "--steps", "3",
                             "--scheduling", "async", "--report", str(page), "--json"])
    assert code == 0, err
    html = page.read_text()
    assert "3 steps, async scheduling" in html and "GPU" in html and "CPU" in html
    code, _, err = invoke(["predict", "--model", "qwen3-0.6b", "--report", str(tmp_path / "x.html")])
    assert_one_line_error(code, err, needles=("--steps",))
