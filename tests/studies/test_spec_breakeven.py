"""scenarios/spec_breakeven_llama3_8b.yaml (issue 21 item 4): where speculation stops paying. Every figure is
recomputed here from the engine (engine/spec.py predict_spec, the plain decode step) and the closed form
tokens_per_step = (1 - a^(k+1)) / (1 - a), not copied from a run."""

import math

import pytest

from simulator.config import load_scenario
from simulator.engine.spec import predict_spec, spec_request
from simulator.studies.runner import run_scenario
from tests.paths import ROOT

SCENARIO = ROOT / "scenarios" / "spec_breakeven_llama3_8b.yaml"


def _closed(a: float, k: int) -> float:
    return (1 - a ** (k + 1)) / (1 - a)


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    return run_scenario(load_scenario(SCENARIO), tmp_path_factory.mktemp("be"))


def test_breakeven_table_equals_engine_and_closed_form(result):
    be = result["spec_breakeven"]
    assert sorted({r["batch"] for r in be}) == [1, 2, 4, 8, 16, 32, 64]
    assert sorted({r["spec_tokens"] for r in be}) == [1, 3]
    for r in be:
        k, b = r["spec_tokens"], int(r["batch"])
        sp, vs, ds = spec_request(k, 0.5, "eagle", "vllm", None, 256, graph="full")
        want = predict_spec("llama3-8b", b, 1024, "fused", "full", sp, "h200", vs, backend="fa3", baseline_sizes=ds)
        assert r["spec_step_ms"] == pytest.approx(want.verify_ms + want.draft_ms, rel=1e-12)
        assert r["decode_step_ms"] == pytest.approx(want.decode_ms, rel=1e-12)
        ratio = r["spec_step_ms"] / r["decode_step_ms"]
        a = r["breakeven_acceptance"]
        if ratio > k + 1:
            assert a is None  # tokens_per_step never exceeds k + 1: speculation never pays
        else:
            assert 0 < a < 1 and _closed(a, k) == pytest.approx(ratio, rel=1e-9)
            # just above it speculation pays, just below it does not (the closed form rises with a)
            assert _closed(a + 1e-6, k) > ratio > _closed(a - 1e-6, k)


def test_rows_ms_per_token_cross_plain_decode_at_the_breakeven(result):
    be = {(r["distribution"], r["spec_tokens"]): r for r in result["spec_breakeven"]}
    for r in result["rows"]:
        k, a = r["spec_tokens"], r["acceptance"]
        assert r["tokens_per_step"] == pytest.approx(_closed(a, k), rel=1e-12)
        assert r["ms_per_token"] == pytest.approx(r["expected_step_ms"] / _closed(a, k), rel=1e-12)
        b = be[(r["distribution"], k)]["breakeven_acceptance"]
        pays = r["ms_per_token"] < r["decode_step_ms"]
        assert pays == (b is not None and a > b)


def test_report_has_the_breakeven_figures(result, tmp_path):
    out = tmp_path / "o"
    run_scenario(load_scenario(SCENARIO), out)
    html = (out / "report.html").read_text()
    assert "break-even acceptance over batch" in html and "ms per token over batch" in html
    assert not math.isnan(result["rows"][0]["ms_per_token"])
