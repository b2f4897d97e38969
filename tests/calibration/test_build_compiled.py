"""calibration/build_compiled.py: round i's Triton curves and the compiled wrapper fit (CPU only), from the committed
measured files; the fit's inputs are the reference decoder's rows only."""

from __future__ import annotations

import copy
import json
import statistics

import pytest

from calibration.build_compiled import (FAST_US, FIT_ROWS, ROUND_I, ROW_AGREE, fast_rows, fit_compiled_wrapper,
                                        fit_targets, predicted_step_ms, triton_curves)
from tests.paths import ROOT as REPO

PROFILE = REPO / "simulator" / "profiles" / "h200.json"


@pytest.fixture(scope="module")
def files():
    return {k: json.loads((ROUND_I / f"{k}.json").read_text()) for k in ("triton", "counts", "host")}


def test_shipped_curves_are_the_round_i_points(files):
    shipped = json.loads(PROFILE.read_text())["device"]["tables"]
    got = triton_curves(files["triton"], files["counts"])
    assert set(got) == {"triton_pointwise", "triton_reduction", "triton_reduction_loop"}
    for k, v in got.items():
        assert shipped[k] == v
    # a point is the mean over the family's functions at one size: the pointwise family at 2^10 elements by hand
    pts = [p for p in files["triton"]["points"] if p["family"] == "pointwise" and p["exp"] == 10]
    assert len(pts) == 3
    assert got["triton_pointwise"]["us"][0] == pytest.approx(statistics.fmean(p["graph_us"] for p in pts), rel=1e-15)
    assert got["triton_pointwise"]["bytes"][0] == pytest.approx(statistics.fmean(p["bytes"] for p in pts), rel=1e-15)


def test_a_function_that_launched_more_than_one_kernel_is_refused(files):
    counts = copy.deepcopy(files["counts"])
    counts["curves"][0]["kernels"] = 2
    with pytest.raises(ValueError, match="exactly one kernel"):
        triton_curves(files["triton"], counts)
    counts = copy.deepcopy(files["counts"])
    counts["curves"] = [c for c in counts["curves"] if c["name"] != "add"]
    with pytest.raises(ValueError, match="no kernel-count check"):
        triton_curves(files["triton"], counts)


def test_sizes_that_are_the_same_work_merge_into_one_point(files):
    loop = triton_curves(files["triton"], files["counts"])["triton_reduction_loop"]
    assert loop["bytes"] == sorted(set(loop["bytes"]))  # strictly increasing, as the profile requires
    one_row = [p for p in files["triton"]["points"] if p["family"] == "reduction_loop" and p["exp"] <= 12]
    assert len({p["bytes"] for p in one_row}) == 1  # 2^10 and 2^12 elements are both one row of 8192
    assert loop["us"][0] == pytest.approx(statistics.fmean(p["graph_us"] for p in one_row), rel=1e-15)


def test_fast_rows_keep_only_steady_fast_host_passes(files):
    for key in FIT_ROWS:
        xs = fast_rows(files["host"], key)
        assert len(xs) >= 20
        assert all(c <= FAST_US for c, _ in xs)
    # by hand: every kept pair has both canaries <= FAST_US and agreeing within ROW_AGREE
    n = sum(1 for ps in files["host"]["passes"] for r in ps["rows"] if r["row"] == "ref_c28_b1"
            and max(r["canary_before_us"], r["canary_after_us"]) <= FAST_US
            and abs(r["canary_before_us"] / r["canary_after_us"] - 1) <= ROW_AGREE)
    assert n == len(fast_rows(files["host"], "ref_c28_b1"))


def test_the_fit_uses_reference_rows_only_and_reproduces_the_shipped_figure(files):
    shipped = json.loads(PROFILE.read_text())
    timing_b = json.loads((REPO / "calibration" / "measured" / "h200-round-b" / "timing.json").read_text())
    assert all(k.startswith("ref_") for k in FIT_ROWS)
    q = copy.deepcopy(shipped)
    w, note = fit_compiled_wrapper(q, timing_b, files["host"])
    assert w == pytest.approx(shipped["host"]["compiled_wrapper_us"], rel=1e-12)
    assert "held out" in note
    # at the fitted figure the predicted steps straddle the rounds' mean: their mean error is zero (within 1 us of a
    # ~6 ms step: w is the mean of the per-batch solutions of a step that is linear in w while host-bound)
    t = fit_targets(timing_b, files["host"], shipped["host"]["canary"]["calibration_us"])
    errs = [predicted_step_ms(shipped, b, w)[0] - t["mean_ms"][b] for b in t["batches"]]
    assert statistics.fmean(errs) == pytest.approx(0.0, abs=1e-3)
    assert max(abs(e) for e in errs) < 0.05 * min(t["mean_ms"].values())
