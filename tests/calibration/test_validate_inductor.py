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
    assert len(committed["rows"]) == len(fresh) == 20
    for c, r in zip(committed["rows"], fresh):
        for k, v in c.items():
            assert r[k] == (pytest.approx(v, rel=1e-9) if isinstance(v, float) else v), k
    s = summary(fresh)
    assert committed["summary"].keys() == s.keys()
    for g, v in s.items():
        assert committed["summary"][g] == pytest.approx(v, rel=1e-9), g


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
    assert [(r["round"], r["dynamic"], r["batch"]) for r in fit] == [("b", False, 1)]
    assert abs(fit[0]["eager_err_pct"]) < 1.0  # the wrapper figure was fitted on it
    s = summary([r for r in fresh if r["round"] == "b"])
    eager = [abs(r["eager_err_pct"]) for r in fresh if r["round"] == "b" and not r["fit"]]
    assert s["round b (28 layers, reference)"]["eager_mape_pct"] == pytest.approx(sum(eager) / len(eager))
