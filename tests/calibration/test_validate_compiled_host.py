"""calibration/validate_compiled_host.py: the committed compiled_host.{json,md} are what round i's host.json and
launchsim's predict give today (regenerated here); the fit rows are the reference decoder's two, everything else is
held out; each pass is predicted on its own host."""

from __future__ import annotations

import json

import pytest

from calibration.build_compiled import FIT_ROWS
from calibration.validate_compiled_host import RI, ROOT, ROWS, markdown, predicted_ms, report


@pytest.fixture(scope="module")
def fresh():
    # report() reads each prediction's step_ms only; run_predict's host band (the same step at the calibration
    # machine's fast and slow canaries: two more predictions of each of the ~600 passes, half the time) is off here
    from simulator.studies import predict as P

    host_fields = P._host_fields
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(P, "_host_fields", lambda setup, sc, p, band=True: host_fields(setup, sc, p, band=False))
        return json.loads(json.dumps(report()))


def test_committed_report_is_regenerated(fresh):
    committed = json.loads((ROOT / "validation" / "compiled_host.json").read_text())
    assert committed["aggregate"] == pytest.approx(fresh["aggregate"], rel=1e-9)
    assert [r["row"] for r in committed["rows"]] == [r["row"] for r in fresh["rows"]]
    assert (ROOT / "validation" / "compiled_host.md").read_text() == markdown(fresh)


def test_fit_rows_are_the_wrapper_fits_and_the_rest_is_held_out(fresh):
    assert {k for k, v in ROWS.items() if v[5]} == set(FIT_ROWS)
    held = [r for r in fresh["rows"] if not r["fit"]]
    assert all(r["row"].startswith("ind") or r["row"] == "ref_c4_b1" or "eager" in r["row"] for r in held)


def test_every_steady_pass_is_scored_with_its_own_canary(fresh):
    host = json.loads((RI / "host.json").read_text())
    n = sum(1 for ps in host["passes"] for r in ps["rows"]
            if abs(r["canary_before_us"] / r["canary_after_us"] - 1) <= 0.10)
    assert sum(r["passes"] for r in fresh["rows"]) == n
    p = fresh["passes"]["ind_c_b1"][0]
    assert p["predicted_ms"] == predicted_ms("ind_c_b1", p["canary_us"])
    # a slower host, a slower compiled step: the host lane scales with the canary
    assert predicted_ms("ind_c_b1", 9.8) > predicted_ms("ind_c_b1", 6.5)
