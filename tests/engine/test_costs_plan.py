"""Cost model (roofline arithmetic, host quantiles) and launch plans per graph mode."""

import numpy as np
import pytest

from simulator.model.costs import CostModel
from simulator.model.kernels import LaunchPath, Op, OpClass
from simulator.model.models import PRESETS
from simulator.engine.plan import PlanError, build_plan, sample_host
from simulator.engine.predict import predict, simulate
from simulator.model.profile import load_profile
from simulator.model.workload import StepShape, build_step, decode

PROF = load_profile("datasheet-h200")


def test_roofline_hand_computed():
    c = CostModel(PROF)
    # 1 GB moved at 4.8 TB/s x 0.8 = 260.4 us; flops negligible
    op = Op("x", OpClass.ELEMENTWISE, LaunchPath.EAGER_ELEMENTWISE, flops=1e9, bytes=1e9)
    assert c.gpu_s(op) == pytest.approx(1e9 / (4.8e12 * 0.8))
    # a big GEMM is compute-bound: 2*4096^3 flops at 989 TF x 0.7
    g = Op("g", OpClass.GEMM, LaunchPath.EAGER_GEMM, flops=2 * 4096**3, bytes=3 * 2 * 4096**2)
    assert c.gpu_s(g) == pytest.approx(2 * 4096**3 / (989e12 * 0.7))
    # tiny kernels hit the floor
    assert c.gpu_s(Op("t", OpClass.ELEMENTWISE, LaunchPath.EAGER_ELEMENTWISE, bytes=8)) == pytest.approx(2e-6)
    assert c.host_s(op) == pytest.approx(5e-6)
    assert c.host_s(op, 0.9) == pytest.approx(7e-6)
    assert c.host_s(op, 0.3) == pytest.approx(4.5e-6)


def test_plan_modes_counts():
    c = CostModel(PROF)
    m = PRESETS["llama3-8b"]
    step = build_step(m, decode(4, 256), "fused")
    eager = build_plan(step, c, "none")
    assert eager.launches == eager.kernels == step.kernels
    full = build_plan(step, c, "full")
    assert full.launches == 1 and full.kernels == step.kernels
    assert full.host_s[0] == pytest.approx(10e-6)
    pw = build_plan(step, c, "piecewise")
    # 32 attention launches split the step into 33 graph segments
    assert pw.launches == 32 + 33 and pw.kernels == step.kernels
    fp_decode = build_plan(step, c, "full_and_piecewise", pure_decode=True)
    assert fp_decode.launches == 1
    mixed = build_step(m, StepShape(2, 256, 1, 64), "fused")
    assert build_plan(mixed, c, "full_and_piecewise", pure_decode=False).launches == 65
    with pytest.raises(PlanError):
        build_plan(step, c, "partial")


def test_views_fold_into_next_launch():
    c = CostModel(PROF)
    step = build_step(PRESETS["qwen3-0.6b"], decode(1, 64), "none")
    plan = build_plan(step, c, "none")
    total = sum(c.host_s(o) for o in step.ops)
    assert plan.host_s.sum() + plan.host_tail_s == pytest.approx(total)


def test_graphs_only_help_and_fusion_only_helps_when_launch_bound():
    for m in ("qwen3-0.6b", "llama3-8b"):
        eager = predict(m, 1, 1024, "none", "none", PROF).result.step_s
        graph = predict(m, 1, 1024, "none", "full", PROF).result.step_s
        fused = predict(m, 1, 1024, "fused", "none", PROF).result.step_s
        assert graph < eager and fused < eager


def test_step_time_monotone_in_batch_under_graphs():
    prev = 0.0
    for b in (1, 2, 4, 8, 16, 64, 256):
        t = predict("llama3-8b", b, 1024, "fused", "full", PROF).result.step_s
        assert t >= prev
        prev = t


def test_host_noise_band_is_seeded_and_ordered():
    a = predict("qwen3-0.6b", 1, 256, "none", "none", PROF, replicates=30, seed=7).band_ms
    b = predict("qwen3-0.6b", 1, 256, "none", "none", PROF, replicates=30, seed=7).band_ms
    assert a == b
    assert a["p10"] <= a["p50"] <= a["p90"]


def test_sampled_host_within_path_bounds():
    c = CostModel(PROF)
    step = build_step(PRESETS["qwen3-0.6b"], decode(1, 64), "fused")
    plan = build_plan(step, c, "none")
    h = sample_host(plan, step, c, np.random.default_rng(0))
    lo = np.array([c.host_s(o, 0.0) for o in step.ops])
    hi = np.array([c.host_s(o, 1.0) for o in step.ops])
    assert lo.sum() - 1e-12 <= h.sum() <= hi.sum() + 1e-12


def test_profile_change_changes_prediction():
    slow = PROF.model_copy(deep=True)
    slow.host.launch_us["eager_elementwise"].p50 *= 2
    a = simulate(build_step(PRESETS["qwen3-0.6b"], decode(1, 64), "none"), CostModel(PROF))[0].step_s
    b = simulate(build_step(PRESETS["qwen3-0.6b"], decode(1, 64), "none"), CostModel(slow))[0].step_s
    assert b > a


def test_combine_profiles_cli_keeps_host_and_device_sections(tmp_path):
    from simulator.cli import main

    out = tmp_path / "mine.json"
    with pytest.raises(SystemExit) as e:
        main(["combine-profiles", "datasheet-h100-sxm", "h200", "--out", str(out)])
    assert e.value.code in (0, None)
    p = load_profile(str(out))
    assert p.host == load_profile("datasheet-h100-sxm").host
    assert p.device == load_profile("h200").device
    eager = predict("qwen3-0.6b", 1, 256, "none", "none", p).result
    assert eager.cpu_busy_s == pytest.approx(predict("qwen3-0.6b", 1, 256, "none", "none", PROF).result.cpu_busy_s)
