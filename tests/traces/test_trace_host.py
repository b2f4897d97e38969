"""Host-time policies of trace import (simulator/traces/host.py) on a hand-built trace with exact figures."""

from __future__ import annotations

import json

import pytest

from typer.testing import CliRunner

from simulator.cli import app, main
from simulator.model.costs import CostModel
from simulator.engine.predict import simulate
from simulator.model.profile import load_profile, parse_profile
from simulator.traces.host import HostPolicyError, host_breakdown
from simulator.traces.whatif import workload_step
from simulator.traces.workload import workload_from_trace
from simulator.model.workload_file import load_workload
from tests.traces.test_trace_import import PID, TID, Trace

PATHS = {"eager_gemm": 10.0, "eager_elementwise": 4.0, "eager_reduction": 6.0, "eager_view": 1.0, "raw": 2.0,
         "eager_copy": 3.0, "eager_attention": 12.0, "eager_embedding": 5.0, "custom_op": 7.0, "compiled": 8.0}


def _profile(factor=None, tmp_path=None):
    raw = json.loads(load_profile("datasheet-h200").model_dump_json())
    raw["name"] = "hand"
    raw["host"]["launch_us"] = {k: {"p50": v} for k, v in PATHS.items()}
    raw["host"]["step_factor"] = None
    if factor is not None:
        raw["host"]["profiler_overhead"] = {"factor": factor, "source": "test"}
    p = parse_profile(raw)
    if tmp_path is not None:
        (tmp_path / "hand.json").write_text(p.model_dump_json())
    return p


def _trace(tmp_path):
    """The three-launch step (traced host 15 + 17 + 18 µs, tail 2) plus two host-only top-level ops:
    aten::view [121, 123] before the mul and aten::transpose [136, 138] before the mean."""
    t = Trace()
    t.three(100.0)
    for name, ts in (("aten::view", 121.0), ("aten::transpose", 136.0)):
        t.ev.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": PID, "tid": TID, "ts": ts, "dur": 2.0,
                     "args": {}})
    return t.write(tmp_path / "t.json")


def test_calibrated_policy_charges_paths_views_and_gaps(tmp_path):
    prof = _profile()
    wl, _ = workload_from_trace(_trace(tmp_path), batch=1, profile=prof)
    assert wl.host_time["policy"] == "calibrated"
    assert [k.path for k in wl.kernels] == ["eager_gemm", "eager_elementwise", "eager_reduction"]
    assert [k.host_ops for k in wl.kernels] == [0, 1, 1]
    # (115, 132]: linear 115-120, view 121-123, mul 125-132 cover 14 of 17 µs; (132, 150]: 15 of 18 µs
    assert [k.gap_us for k in wl.kernels] == pytest.approx([0.0, 3.0, 3.0])
    assert wl.host_time["tail_ops"] == 0 and wl.host_time["tail_gap_us"] == pytest.approx(0.0)
    # gemm 10 + (view 1 + gap 3 + elementwise 4) + (view 1 + gap 3 + reduction 6) = 28 µs; traced 52 µs
    h = wl.host_time["charged_host_ms"]
    assert h["total"] == pytest.approx(0.028)
    assert (h["launches"], h["host_only_ops"], h["interpreter"]) == pytest.approx((0.020, 0.002, 0.006))
    assert wl.host_time["traced_host_ms"] == pytest.approx(0.052)
    costs = CostModel(prof)
    res, _ = simulate(workload_step(wl, costs).step, costs, "none")
    assert res.cpu_busy_s == pytest.approx(28e-6)
    assert [o.fixed_gpu_s for o in workload_step(wl, costs).step.kernel_ops()] == pytest.approx([30e-6, 5e-6, 8e-6])


def test_trace_and_deflate_policies(tmp_path):
    prof = _profile(factor=2.0)
    costs = CostModel(prof)
    tr = _trace(tmp_path)
    traced, _ = workload_from_trace(tr, batch=1, host_time="trace", profile=prof)
    res, _ = simulate(workload_step(traced, costs).step, costs, "none")
    assert res.cpu_busy_s == pytest.approx(52e-6)
    defl, _ = workload_from_trace(tr, batch=1, host_time="deflate", profile=prof)
    res, _ = simulate(workload_step(defl, costs).step, costs, "none")
    assert res.cpu_busy_s == pytest.approx(26e-6)
    assert host_breakdown(defl, costs)["total"] == pytest.approx(0.026)
    with pytest.raises(HostPolicyError, match=r"host\.profiler_overhead\.factor"):
        workload_from_trace(tr, batch=1, host_time="deflate", profile=_profile())


def test_graph_full_ignores_host_policy(tmp_path):
    prof = _profile()
    costs = CostModel(prof)
    tr = _trace(tmp_path)
    a, _ = workload_from_trace(tr, batch=1, profile=prof)
    b, _ = workload_from_trace(tr, batch=1, host_time="trace", profile=prof)
    fa, _ = simulate(workload_step(a, costs).step, costs, "full")
    fb, _ = simulate(workload_step(b, costs).step, costs, "full")
    assert fa.step_s == pytest.approx(fb.step_s)
    assert fa.cpu_busy_s == pytest.approx(costs.graph_launch_s(3))


def test_cli_shows_policy(tmp_path):
    _profile(tmp_path=tmp_path)
    out = tmp_path / "w.json"
    r = CliRunner().invoke(app, ["import-trace", str(_trace(tmp_path)), "--out", str(out), "--profile",
                                 str(tmp_path / "hand.json")])
    assert r.exit_code == 0, r.output
    assert "host time policy: calibrated" in r.output and "charged host 0.028 ms" in r.output
    assert load_workload(out).host_time["policy"] == "calibrated"
    r = CliRunner().invoke(app, ["predict", "--workload", str(out), "--profile", str(tmp_path / "hand.json"),
                                 "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["host_time_policy"] == "calibrated"


@pytest.mark.parametrize("extra,message", [
    (["--host-time", "bogus"], "unknown --host-time 'bogus'"),
    (["--host-time", "deflate"], "host.profiler_overhead.factor"),
])
def test_bad_policy_exits_2_with_one_line(tmp_path, capsys, extra, message):
    _profile(tmp_path=tmp_path)
    with pytest.raises(SystemExit) as e:
        main(["import-trace", str(_trace(tmp_path)), "--out", str(tmp_path / "w.json"), "--profile",
              str(tmp_path / "hand.json"), *extra])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err
    assert not (tmp_path / "w.json").exists()
