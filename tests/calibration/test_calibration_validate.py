"""validate on a tiny synthetic measured file, the fit/validation split, and the calibration CLI's
one-line errors (no GPU or torch needed)."""

from __future__ import annotations

import json

import pytest

from calibration.validate import ValidationError, fit_split, load_measured, summarize, validate
from simulator.cli import main
from simulator.engine.predict import predict
from simulator.model.profile import load_profile


def _spread(v):
    return {"p10": v * 0.95, "p50": v, "p90": v * 1.05, "n": 10}


def _synthetic(tmp_path, err=0.02):
    """Rows whose 'measured' figures are the model's own predictions times (1 + err), in the timing
    process's format (isolated and pipelined regimes)."""
    from calibration.validate import pipelined_ms

    prof = load_profile("h200")
    rows = []
    for model, fusion, b, ctx, dyn in [("qwen3-0.6b", "none", 4, 512, None), ("llama3-8b", "packed", 8, 1024, None),
                                       ("qwen3-0.6b", "compiled", 2, 2048, True)]:
        if fusion == "compiled":  # a dynamic=True row: Inductor's pass with dynamic shapes and its wrapper cost
            from calibration.validate import predict_compiled

            e, g = (predict_compiled(model, b, ctx - 1, gr, prof, dyn) for gr in ("none", "full"))
        else:
            e = predict(model, b, ctx - 1, fusion, "none", prof)
            g = predict(model, b, ctx - 1, fusion, "full", prof)
        row = {"model": model, "fusion": fusion, "batch": b, "ctx": ctx, "dynamic": dyn}
        for key, p in (("eager", e), ("full", g)):
            row[key] = {"isolated": {"step_ms": _spread(p.result.step_s * 1e3 * (1 + err)),
                                     "host_ms": _spread(p.result.cpu_busy_s * 1e3)},
                        "pipelined": {"step_ms": _spread(pipelined_ms(p.result) * (1 + err)), "steps": 8}}
        rows.append(row)
    path = tmp_path / "measured.json"
    path.write_text(json.dumps({"rows": rows}))
    return path


def test_validate_synthetic_rows(tmp_path):
    d = load_measured(_synthetic(tmp_path, err=0.02))
    res = validate(d, load_profile("h200"), replicates=5)
    assert len(res["rows"]) == 12  # 3 rows x 2 graph modes x 2 regimes
    for r in res["rows"]:
        assert r["error_pct"] == pytest.approx(100 * (1 / 1.02 - 1), abs=0.01)
    s = res["summary"]
    assert s["graph replay [isolated]"]["mape_pct"] == pytest.approx(1.96, abs=0.01)
    assert s["graph replay [isolated]"]["pass"] and s["graph replay [pipelined]"]["rows"] == 2
    assert s["eager [isolated]"]["rows"] == 2 and s["compiled, no graph [isolated]"]["rows"] == 1
    assert s["compiled + graph [pipelined]"]["rows"] == 1


def test_old_format_rows_read_as_isolated(tmp_path):
    p = tmp_path / "old.json"
    p.write_text(json.dumps({"rows": [{"model": "qwen3-0.6b", "fusion": "none", "batch": 1, "ctx": 512,
                                       "eager": {"step_ms": _spread(20.0), "host_ms": _spread(19.0)},
                                       "graph": {"step_ms": _spread(4.0), "host_ms": _spread(0.01)}}]}))
    res = validate(load_measured(p), load_profile("h200"), replicates=3)
    assert {(r["graph"], r["regime"]) for r in res["rows"]} == {("none", "isolated"), ("full", "isolated")}


def test_summary_fails_beyond_target():
    rows = [{"mode": "graph replay", "split": "validation", "model": "m", "error_pct": 7.0, "regime": "isolated",
             "fusion": "none", "batch": 1, "ctx": 1},
            {"mode": "graph replay", "split": "fit", "model": "m", "error_pct": 50.0, "regime": "isolated",
             "fusion": "none", "batch": 1, "ctx": 1}]
    s = summarize(rows)["graph replay [isolated]"]
    assert s["rows"] == 1 and s["mape_pct"] == 7.0 and not s["pass"]  # the fit row is not scored


def test_fit_rows_are_the_documented_ones():
    """Only the compiled wrapper cost is fitted on decode rows (qwen3-0.6b compiled, dynamic=False, b1 and b16, ctx 512,
    no graph: round b's two, with round i's passes of them, calibration/build_compiled.py)."""
    fit = {"model": "qwen3-0.6b", "fusion": "compiled", "batch": 1, "ctx": 512, "dynamic": False}
    assert fit_split(fit, "none") == fit_split({**fit, "batch": 16}, "none") == "fit"
    assert fit_split({**fit, "batch": 64}, "none") == "validation"
    assert fit_split(fit, "full") == "validation"
    assert fit_split({**fit, "dynamic": True}, "none") == "validation"
    assert fit_split({"model": "qwen3-0.6b", "fusion": "none", "batch": 8, "ctx": 128}, "none") == "validation"
    assert "FITTED on the reference decoder's compiled rows" in load_profile("h200").notes


def test_compiled_static_rows_are_their_own_mode():
    from calibration.validate import mode_of

    assert mode_of("compiled", "full", True) == "compiled + graph"
    assert mode_of("compiled", "none", False) == "compiled static, no graph"
    assert mode_of("packed", "full") == "graph replay" and mode_of("none", "none") == "eager"


def test_committed_report_is_reproducible():
    """The committed validation.json is what the committed measurements and profile give today."""
    from calibration.validation_report import ROOT, build

    res = build("h200", replicates=2)  # the MAPEs do not depend on the host-noise band
    committed = json.loads((ROOT / "validation" / "validation.json").read_text())
    assert set(committed["summary"]) == set(res["summary"])
    for k, v in res["summary"].items():
        assert committed["summary"][k]["mape_pct"] == pytest.approx(v["mape_pct"], rel=1e-6), k
    assert res["runs"]["round b"]["canary"]["ok"] is True


def test_measured_file_errors(tmp_path):
    with pytest.raises(ValidationError, match="no measured file"):
        load_measured(tmp_path / "nope.json")
    p = tmp_path / "m.json"
    p.write_text("[1, 2")
    with pytest.raises(ValidationError, match="not valid JSON"):
        load_measured(p)
    p.write_text(json.dumps({"rows": []}))
    with pytest.raises(ValidationError, match="non-empty 'rows'"):
        load_measured(p)
    p.write_text(json.dumps({"rows": [{"model": "qwen3-0.6b"}]}))
    with pytest.raises(ValidationError, match="lacks fusion, batch, ctx"):
        load_measured(p)


def _cli(args, capsys):
    with pytest.raises(SystemExit) as e:
        main(args)
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def test_cli_validate_writes_report(tmp_path, capsys):
    m = _synthetic(tmp_path)
    code, out, err = _cli(["validate", str(m), "--out", str(tmp_path / "rep"), "--replicates", "3"], capsys)
    assert code == 0, err
    assert "graph replay [isolated]" in out and "MAPE" in out
    data = json.loads((tmp_path / "rep" / "validation.json").read_text())
    assert data["summary"]["graph replay [isolated]"]["rows"] == 2
    html = (tmp_path / "rep" / "validation.html").read_text()
    assert "<html" in html and "<script src=\"http" not in html and len(html) > 1_000_000  # plotly.js inlined


@pytest.mark.parametrize("args,needle", [
    (["validate", "/no/such/file.json"], "no measured file"),
    (["validate", "MEASURED", "--profile", "no-such"], "unknown profile"),
    (["calibrate", "--out", "x.txt"], ".json"),
    (["measure", "--out", "x.txt"], ".json"),
])
def test_cli_user_errors_are_one_line(tmp_path, capsys, args, needle):
    args = [str(_synthetic(tmp_path)) if a == "MEASURED" else a for a in args]
    code, out, err = _cli(args, capsys)
    assert code == 2
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err


def test_cli_calibrate_without_gpu(tmp_path, capsys):
    try:
        import torch

        if torch.cuda.is_available():
            pytest.skip("a GPU is present")
    except ImportError:
        pass
    for cmd in ("calibrate", "measure"):
        code, _, err = _cli([cmd, "--out", str(tmp_path / "p.json")], capsys)
        assert code == 2 and err.count("\n") == 1 and "GPU" in err
        assert not (tmp_path / "p.json").exists()


def test_cli_profiles_lists_derived(capsys):
    code, out, _ = _cli(["profiles"], capsys)
    assert code == 0
    line = next(ln for ln in out.splitlines() if ln.startswith("h100-sxm"))
    assert "derived" in line and "h200" in line
    assert any(ln.startswith("h200 *") and "measured" in ln for ln in out.splitlines())
