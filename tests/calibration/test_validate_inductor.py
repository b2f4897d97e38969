"""calibration/validate_inductor.py: the committed inductor.json is what the committed measurements and profile give;
the reference decoder's compiled kernels match Inductor's on every committed row."""

from __future__ import annotations

import json

import pytest

from calibration.validate_inductor import ROOT, rows, summary
from simulator.model.profile import load_profile


@pytest.fixture(scope="module")
def fresh():
    return rows(load_profile("h200"))


def test_committed_inductor_report_is_reproducible(fresh):
    committed = json.loads((ROOT / "validation" / "inductor.json").read_text())
    assert len(committed["rows"]) == len(fresh) == 26
    for c, r in zip(committed["rows"], fresh):
        for k, v in c.items():
            assert r[k] == (pytest.approx(v, rel=1e-9) if isinstance(v, float) else v), k
    s = summary(fresh)
    assert committed["summary"].keys() == s.keys()
    for g, v in s.items():
        assert committed["summary"][g].keys() == v.keys(), g
        for k, x in v.items():  # None where a group has no such measurement (the depth sweep's kernels)
            assert committed["summary"][g][k] == (x if x is None else pytest.approx(x, rel=1e-9)), (g, k)


def test_reference_compiled_kernels_are_inductors_on_every_row(fresh):
    ref = [r for r in fresh if r["impl"] == "ref" and r["kernels_measured"] is not None]
    assert len(ref) == 11 and all(r["kernels_predicted"] == r["kernels_measured"] for r in ref)
    # dynamic=True: qwen3 +1 kernel a layer (k-norm split from the cache write), llama unchanged
    by = {(r["round"], r["model"], r["dynamic"], r["batch"]): r["kernels_predicted"] for r in ref}
    assert by[("f", "qwen3-0.6b", True, 1)] - by[("f", "qwen3-0.6b", False, 1)] == 2  # 2 layers
    assert by[("f", "llama3-8b", True, 1)] == by[("f", "llama3-8b", False, 1)]
    assert by[("b", "qwen3-0.6b", True, 16)] - by[("b", "qwen3-0.6b", False, 16)] == 28


def test_the_fit_row_is_marked_and_not_scored(fresh):
    fit = [r for r in fresh if r["fit"]]
    assert sorted((r["round"], r["dynamic"], r["batch"]) for r in fit) == [("b", False, 1), ("b", False, 16)]
    # the wrapper figure was fitted on them with round i's passes (their mean over the two machines): each round's
    # rows sit on either side of it, round b's above the prediction (its machine the slower of the two)
    assert all(-20.0 < r["eager_err_pct"] < 0.0 for r in fit)
    s = summary([r for r in fresh if r["round"] == "b"])
    eager = [abs(r["eager_err_pct"]) for r in fresh if r["round"] == "b" and not r["fit"]]
    assert s["round b (28 layers, reference)"]["eager_mape_pct"] == pytest.approx(sum(eager) / len(eager))


def test_on_its_host_scales_the_host_lane_by_the_rows_canary_and_leaves_the_device(fresh):
    """Each row's own-host prediction is the profile's host lane times canary / calibration canary (host_scaled):
    round b's timing process is the profile's calibration process (mean canary 6.49 us), so there it equals the
    plain prediction; elsewhere the host's busy time scales by exactly that factor, the GPU's not at all."""
    from calibration.validate_inductor import _model, _on_host, _predict
    from simulator.model.profile import host_factor

    prof = load_profile("h200")
    for r in fresh:
        if r["round"] == "b":
            assert r["host_canary_us"] == pytest.approx(6.49, abs=1e-9)
            assert r["eager_on_host_predicted_ms"] == pytest.approx(r["eager_predicted_ms"], rel=1e-12)
    r = next(x for x in fresh if x["round"] == "f" and x["impl"] == "ref" and x["model"] == "llama3-8b" and x["dynamic"])
    assert r["host_canary_us"] == pytest.approx((9.623 + 10.21) / 2)
    m = _model("ref", r["model"], r["layers"])
    a = _predict("ref", m, r["batch"], r["ctx"], "none", prof, True).result
    c = _predict("ref", m, r["batch"], r["ctx"], "none", _on_host(prof, r["host_canary_us"], True), True).result
    assert c.cpu_busy_s / a.cpu_busy_s == pytest.approx(host_factor(prof, r["host_canary_us"]), rel=1e-9)
    assert c.gpu_busy_s == a.gpu_busy_s
    assert r["eager_on_host_predicted_ms"] == pytest.approx(c.step_s * 1e3, rel=1e-12)


def test_transformers_repeat_kv_copies_priced_at_their_bytes_put_compiled_graph_within_target(fresh):
    """Round f transformers at batch 64 (StaticCache of 640 slots): the repeat_kv Triton copies priced at the bytes they
    move (the whole cache read, every repeated slot written) by round i's measured Triton pointwise curve: the kernel
    sum within 6 % of CUPTI's. The compiled + graph step is 10-13 % under: the measured graph holds 73-79 us more than
    its kernels there, launchsim's node gaps 25 us (inductor.md section 5; before round i the eager copy curve's excess
    hid it: +1.8 to +2.4 %)."""
    hf64 = [r for r in fresh if r["round"] == "f" and r["impl"] == "hf" and r["batch"] == 64]
    assert len(hf64) == 4
    assert all(abs(r["gpu_kernel_err_pct"]) <= 6.0 for r in hf64)
    assert all(-13.0 <= r["graph_err_pct"] <= -10.0 for r in hf64)