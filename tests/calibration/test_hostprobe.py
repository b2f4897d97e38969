"""The host as an input: host_scaled / canary_band (simulator/model/profile.py), calibration/hostprobe.py's records,
and `calibrate --host-only`'s refusal without a GPU."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings, strategies as st

from calibration import hostprobe
from simulator.cli import main
from simulator.engine.predict import predict
from simulator.model.profile import (ProfileError, assumed_canary, canary_band, host_factor, host_scaled, load_profile,
                                     PROFILE_DIR)

H200 = load_profile("h200")
BASE = H200.host.canary.calibration_us


def _host_figures(p) -> dict:
    """Every host cost figure host_scaled promises to scale, flattened (name -> value)."""
    h = p.host
    out = {f"launch.{k}.{q}": getattr(v, q) for k, v in h.launch_us.items() for q in ("p10", "p50", "p90")
           if getattr(v, q) is not None}
    for k in ("graph_launch_fixed_us", "graph_launch_per_node_us", "compiled_entry_us", "compiled_wrapper_us",
              "capture_per_node_ms"):
        out[k] = getattr(h, k)
    e = h.engine_step_us
    for k in ("schedule", "prep", "tolist", "detokenize"):
        out.update({f"engine.{k}.{i}": u for i, u in enumerate(getattr(e, k).us)})
    out.update({f"engine.sample_host.{m}.{i}": u for m, b in e.sample_host.items() for i, u in enumerate(b.us)})
    out["engine.copy_launch_us"] = e.copy_launch_us
    for k in ("compile_static_cold", "compile_static_warm", "compile_dynamic_cold", "compile_dynamic_warm"):
        c = getattr(h.startup, k)
        if c is not None:
            out[f"{k}.fixed_s"], out[f"{k}.per_node_s"] = c.fixed_s, c.per_node_s
    return out


def test_shipped_profile_records_its_canary_from_the_round_b_process():
    raw = json.loads((PROFILE_DIR / "h200.json").read_text())
    t = json.loads((hostprobe.MEASURED / "h200-round-b" / "timing.json").read_text())
    mean = (t["canary_start"]["host_tiny_op_us"]["p50"] + t["canary_end"]["host_tiny_op_us"]["p50"]) / 2
    assert raw["host"]["canary"]["calibration_us"] == pytest.approx(mean, abs=1e-4)
    slowest = max(r[2] for r in hostprobe.recorded_canaries([hostprobe.MEASURED / f"h200-round-{r}" for r in "bcde"]))
    assert canary_band(H200) == (pytest.approx(mean, abs=1e-4), slowest)
    assert "h200-round-b" in raw["host"]["canary"]["source"] or "canary_start" in raw["host"]["canary"]["source"]


def test_scaling_is_exact_on_every_host_figure_and_leaves_the_device_alone():
    c = 9.0
    f = c / BASE
    q = host_scaled(H200, c)
    a, b = _host_figures(H200), _host_figures(q)
    assert a.keys() == b.keys() and len(a) > 20
    for k in a:
        assert b[k] == pytest.approx(a[k] * f, rel=1e-12), k
    assert q.device == H200.device
    # the ratios multiply host costs that are already scaled: unchanged
    assert q.host.step_factor == H200.host.step_factor
    assert q.host.startup.capture_host_ratio == H200.host.startup.capture_host_ratio
    assert q.host.engine_step_us.copy_gpu_us == H200.host.engine_step_us.copy_gpu_us
    assert q.host.engine_step_us.sample_gpu == H200.host.engine_step_us.sample_gpu
    assert assumed_canary(q) == c and assumed_canary(H200) == BASE
    assert host_factor(H200, c) == pytest.approx(f)
    assert H200.with_host_canary(c) == q


def test_calibration_canary_is_the_identity_and_scaling_does_not_compound():
    assert host_scaled(H200, BASE) == H200
    twice = host_scaled(host_scaled(H200, 12.0), 8.0)
    once = host_scaled(H200, 8.0)
    assert twice.name == once.name
    a, b = _host_figures(twice), _host_figures(once)
    assert all(b[k] == pytest.approx(a[k], rel=1e-12) for k in a)
    back = host_scaled(host_scaled(H200, 12.0), BASE)
    assert back.name == H200.name and back.host.canary.assumed_us is None


@settings(max_examples=25, deadline=None)
@given(st.floats(min_value=0.5, max_value=200.0, allow_nan=False))
def test_every_launch_path_scales_by_the_canary_ratio(c):
    q = host_scaled(H200, c)
    for k, s in H200.host.launch_us.items():
        assert q.host.launch_us[k].p50 == pytest.approx(s.p50 * c / BASE, rel=1e-12)


def test_eager_step_moves_with_the_host_and_a_gpu_bound_graph_step_barely_does():
    slow = host_scaled(H200, canary_band(H200)[1])
    f = canary_band(H200)[1] / BASE
    e0 = predict("qwen3-0.6b", 1, 512, "none", "none", H200).result
    e1 = predict("qwen3-0.6b", 1, 512, "none", "none", slow).result
    assert e0.bound == "cpu" and e0.cpu_busy_s > e0.gpu_busy_s
    # host-bound: the step follows the host lane (within the GPU tail the host cannot hide)
    assert e1.step_s / e0.step_s == pytest.approx(f, rel=0.05)
    assert e1.cpu_busy_s / e0.cpu_busy_s == pytest.approx(f, rel=0.01)
    g0 = predict("llama3-8b", 64, 4096, "none", "full", H200).result
    g1 = predict("llama3-8b", 64, 4096, "none", "full", slow).result
    assert g1.gpu_busy_s == g0.gpu_busy_s and g0.bound == "gpu"
    assert abs(g1.step_s / g0.step_s - 1) < 0.01


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), 1e300, "x", None])
def test_bad_canary_is_one_line(bad):
    with pytest.raises(ProfileError) as e:
        host_scaled(H200, bad)
    assert "\n" not in str(e.value) and "host canary" in str(e.value)


def test_profile_without_a_canary_is_refused_naming_the_field():
    p = load_profile("datasheet-h200")
    assert p.host.canary is None
    for fn in (lambda: host_scaled(p, 7.0), lambda: canary_band(p)):
        with pytest.raises(ProfileError, match=r"host\.canary"):
            fn()


def test_host_canary_record_from_a_timing_process(tmp_path):
    t = {"canary_start": {"host_tiny_op_us": {"p50": 6.0}}, "canary_end": {"host_tiny_op_us": {"p50": 7.0}}}
    c = hostprobe.host_canary(t, "here")
    assert (c["calibration_us"], c["fast_us"], c["slow_us"]) == (6.5, 6.5, 6.5)
    assert hostprobe.host_canary({}, "here") is None
    assert hostprobe.process_canary({"canary_start": {"host_tiny_op_us": {"p50": 8.0}}}) == 8.0
    d = tmp_path / "r"
    d.mkdir()
    (d / "a.json").write_text(json.dumps({"canary_end": {"host_tiny_op_us": {"p50": 11.25}}}))
    (d / "b.json").write_text("not json")
    (d / "c.json").write_text(json.dumps([1, 2]))
    w = hostprobe.with_slow_state(c, [d])
    assert w["slow_us"] == 11.25 and w["fast_us"] == 6.5 and "11.25" in w["source"]
    assert hostprobe.with_slow_state(c, [tmp_path]) == c  # nothing recorded: unchanged


def _has_gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def _cli_error(capsys, args) -> str:
    with pytest.raises(SystemExit) as e:
        main(args)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    return err


@pytest.mark.skipif(_has_gpu(), reason="the refusal is for machines without a GPU")
def test_host_only_without_gpu_is_one_line(tmp_path, capsys):
    assert "needs torch and a CUDA GPU" in _cli_error(capsys, ["calibrate", "--host-only", "--out",
                                                               str(tmp_path / "c.json")])
    assert not (tmp_path / "c.json").exists()


def test_calibrate_flags_refused_in_one_line(tmp_path, capsys):
    assert "--out" in _cli_error(capsys, ["calibrate"])
    assert "--quick" in _cli_error(capsys, ["calibrate", "--host-only", "--quick"])
    assert ".json" in _cli_error(capsys, ["calibrate", "--host-only", "--out", str(tmp_path / "c.txt")])


def test_validation_rows_use_each_process_canary():
    """The conditional validation predicts with host_scaled(profile, the process's mean canary); the committed
    report (calibration/validation/host_scaling.md) is what this code writes (`--validate --write-shipped`)."""
    text, rows = hostprobe.validate()
    assert text == (hostprobe.ROOT / "validation" / "host_scaling.md").read_text()
    rows = [r for r in rows if r["round"] == "h200-round-c"]
    t = json.loads((hostprobe.MEASURED / "h200-round-c" / "timing.json").read_text())
    c = hostprobe.process_canary(t)
    assert rows and all(r["canary_us"] == round(c, 3) for r in rows)
    r = rows[0]
    assert r["band_ms"][0] <= r["pred_canary_ms"] <= r["band_ms"][1] or c > canary_band(H200)[1]
    assert all(math.isfinite(r["pred_canary_ms"]) for r in rows)


def test_host_state_phrase_names_the_canary():
    from simulator.model.profile import host_state

    assert f"{BASE:.2f} µs" in host_state(H200) and "fast state" in host_state(H200)
    s = host_state(host_scaled(H200, 9.735))
    assert "9.73 µs" in s or "9.74 µs" in s
    assert f"x {9.735 / BASE:.3f}" in s
    assert "no host canary" in host_state(load_profile("datasheet-h200"))
