"""calibration/validate_unseen.py: round aa's report (seven decoders launchsim never saw) is regenerated from the
measured files and the predictions committed before the run; its measured figures are the raw processes' figures."""

import json
import statistics
from pathlib import Path

import pytest

from calibration import validate_unseen as U
from calibration.scripts import round_aa as A

ROUND = U.ROUND


@pytest.fixture(scope="module")
def res():
    return U.build()


def test_committed_report_is_regenerated(res):
    assert (U.HERE / "validation" / "impl_hf_unseen.md").read_text() == U.markdown(res)
    committed = json.loads((U.HERE / "validation" / "impl_hf_unseen.json").read_text())
    assert committed == json.loads(json.dumps(res))


def test_every_grid_row_is_measured_and_predicted_before(res):
    grid = {(m, b, c) for m in A.MODELS for c, bs in A.GRID for b in bs}
    assert {(r["model"], r["batch"], r["ctx"]) for r in res["rows"]} == grid
    before = json.loads((ROUND / "predicted_before.json").read_text())
    assert before["made_before_measuring"] is True
    B = {(r["model"], r["batch"], r["ctx"]): r for r in before["rows"]}
    for r in res["rows"]:
        assert r["before"]["full_ms"] == B[(r["model"], r["batch"], r["ctx"])]["full_ms"]


def _raw_passes(model, batch, ctx):
    out = []
    for p in sorted(ROUND.glob("time_aa[0-9].json")):
        for r in json.loads(p.read_text())["rows"]:
            if (r["model"], r["batch"], r["ctx"]) == (model, batch, ctx):
                out += r["passes"]
    return out


def test_measured_eager_is_the_median_of_fast_host_passes_in_the_raw_files(res):
    for r in res["rows"]:
        ps = _raw_passes(r["model"], r["batch"], r["ctx"])
        fast = [x["median"] for x in ps
                if max(x["canary_before"]["host_us"], x["canary_after"]["host_us"]) <= 7.6]
        assert r["eager_passes"] == len(ps) > 0
        assert r["eager_fast_passes"] == len(fast)
        assert r["eager_fast_ms"] == (pytest.approx(statistics.median(fast)) if fast else None)


def test_kernel_counts_are_the_profiled_process_counts(res):
    counts = json.loads((ROUND / "counts_aa.json").read_text())["rows"]
    got = {(r["model"], r["batch"]): r["kernels_measured"] for r in res["rows"] if r["ctx"] == 512}
    for c in counts:
        assert got[(c["model"], c["batch"])] == c["last_step"]["kernels"]


def test_errors_are_prediction_over_measurement(res):
    r = res["rows"][0]
    assert r["now"]["full_err"] == pytest.approx((r["now"]["full_ms"] / r["full_ms"] - 1) * 100)
    assert res["summary"]["now"]["rows"]["full"] == len(res["rows"])


def test_report_defaults_to_an_untracked_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert U.main([]) == 0
    assert (tmp_path / "out" / "calibration" / "impl_hf_unseen.md").exists()
    assert Path(U.HERE / "validation" / "impl_hf_unseen.md").exists()
