"""validate on a tiny synthetic measured file, the fit/validation split, and the calibration CLI's
one-line errors (no GPU or torch needed)."""

from __future__ import annotations

import json

import pytest

from calibration.validate import ValidationError, fit_split, load_measured, summarize, validate
from simulator.cli import main
from simulator.predict import predict
from simulator.profile import load_profile


def _spread(v):
    return {"p10": v * 0.95, "p50": v, "p90": v * 1.05, "n": 10}


def _synthetic(tmp_path, err=0.02):
    """Rows whose 'measured' figures are the model's own predictions times (1 + err)."""
    prof = load_profile("h200")
    rows = []
    for model, fusion, b, ctx in [("qwen3-0.6b", "none", 4, 512), ("llama3-8b", "packed", 8, 1024),
                                  ("qwen3-0.6b", "compiled", 2, 2048)]:
        e = predict(model, b, ctx - 1, fusion, "none", prof)
        g = predict(model, b, ctx - 1, fusion, "full", prof)
        rows.append({"model": model, "fusion": fusion, "batch": b, "ctx": ctx, "kernels": e.result.kernels,
                     "eager": {"step_ms": _spread(e.result.step_s * 1e3 * (1 + err)),
                               "host_ms": _spread(e.result.cpu_busy_s * 1e3)},
                     "graph": {"step_ms": _spread(g.result.step_s * 1e3 * (1 + err)),
                               "host_ms": _spread(0.3), "pool_bytes": 24 * 2**20, "capture_s": 0.03}})
    path = tmp_path / "measured.json"
    path.write_text(json.dumps({"rows": rows}))
    return path


def test_validate_synthetic_rows(tmp_path):
    d = load_measured(_synthetic(tmp_path, err=0.02))
    res = validate(d, load_profile("h200"), replicates=5)
    assert len(res["rows"]) == 6
    for r in res["rows"]:
        assert r["error_pct"] == pytest.approx(100 * (1 / 1.02 - 1), abs=0.01)
    s = res["summary"]
    assert s["graph full"]["mape_pct"] == pytest.approx(1.96, abs=0.01) and s["graph full"]["pass"]
    assert s["eager"]["rows"] == 2 and s["compiled eager"]["rows"] == 1
    assert "kernels" in s and "memory" in s


def test_summary_fails_beyond_target():
    rows = [{"mode": "graph full", "split": "validation", "model": "m", "error_pct": 7.0},
            {"mode": "graph full", "split": "fit", "model": "m", "error_pct": 50.0}]
    s = summarize(rows)["graph full"]
    assert s["rows"] == 1 and s["mape_pct"] == 7.0 and not s["pass"]  # the fit row is not scored


def test_fit_rows_are_the_documented_ones():
    assert fit_split({"model": "qwen3-0.6b", "fusion": "none", "batch": 8, "ctx": 128}, "none") == "fit"
    assert fit_split({"model": "qwen3-0.6b", "fusion": "none", "batch": 8, "ctx": 128}, "full") == "validation"
    assert fit_split({"model": "qwen3-0.6b", "fusion": "compiled", "batch": 1, "ctx": 512}, "none") == "fit"
    assert fit_split({"model": "llama3-8b", "fusion": "none", "batch": 8, "ctx": 128}, "none") == "validation"


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
    assert "graph full" in out and "MAPE" in out
    data = json.loads((tmp_path / "rep" / "validation.json").read_text())
    assert data["summary"]["graph full"]["rows"] == 3
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
