"""`launchsim serve`, the `serve` and `capacity` scenario kinds, their outputs and one-line errors (exit 2)."""

import json
import math

import pytest
import yaml
from typer.testing import CliRunner

from simulator.cli import app
from simulator.config import ConfigError, load_scenario, parse_scenario
from simulator.layouts.distribution import from_csv
from simulator.studies.runner import run_scenario

from tests.conftest import cli_error  # noqa: E402
from tests.paths import ROOT

runner = CliRunner()
SERVE = ["serve", "--model", "qwen3-0.6b", "--profile", "datasheet-h200"]


def err_of(capsys, argv):
    return cli_error(capsys, argv)


def test_serve_json_has_metrics_and_timing():
    r = runner.invoke(app, SERVE + ["--rate", "20", "--duration", "10", "--seed", "1", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    for k in ("throughput_tok_s", "throughput_req_s", "ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tpot_p50_ms",
              "tpot_p90_ms", "tpot_p99_ms", "gpu_busy_frac", "cpu_bound_step_share", "padding_waste",
              "kv_util_mean", "simulated_s", "wall_s"):
        assert k in d, k
    assert d["simulated_s"] >= 10 and d["requests"] > 100
    again = json.loads(runner.invoke(app, SERVE + ["--rate", "20", "--duration", "10", "--seed", "1", "--json"]).stdout)
    volatile = ("wall_s", "step_evals")  # wall time; evaluations (the step-time memo is shared in the process)
    assert {k: v for k, v in again.items() if k not in volatile} == {k: v for k, v in d.items() if k not in volatile}


def test_serve_flags_override_a_scenario_and_write_outputs(tmp_path):
    out = tmp_path / "o"
    r = runner.invoke(app, ["serve", "--scenario", str(ROOT / "scenarios/serve_qwen3_0p6b.yaml"), "--duration", "8",
                            "--graph", "none", "--out", str(out), "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["graph"] == "none" and d["graph_step_share"] == 0
    for f in ("result.json", "metrics.csv", "batch_log.csv", "report.html"):
        assert (out / f).exists()
    dist = from_csv(out / "batch_log.csv")  # the optimizer's input format
    assert dist.max_batch >= 1 and abs(sum(dist.weights) - 1) < 1e-9


@pytest.mark.parametrize("argv,needle", [
    (SERVE + ["--rate", "0"], "--rate must be a positive"),
    (SERVE + ["--rate", "-3"], "--rate must be a positive"),
    (SERVE + ["--rate", "5", "--duration", "0"], "--duration must be a positive"),
    (["serve", "--rate", "5"], "give --model"),
    (SERVE + ["--rate", "5", "--graph", "fast"], "field 'graph'"),
    (SERVE + ["--rate", "5", "--layout", "banana"], "layout 'banana'"),
])
def test_serve_bad_flags_one_line_exit_2(capsys, argv, needle):
    assert needle in err_of(capsys, argv)


def test_empty_and_malformed_traces_exit_2(capsys, tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    assert f"{empty}: empty trace" in err_of(capsys, SERVE + ["--trace", str(empty)])
    bad = tmp_path / "bad.csv"
    bad.write_text("timestamp,prompt_tokens,output_tokens\n0,10,5\n0.5,x,5\n")
    assert f"{bad}:3: column 'prompt_tokens'" in err_of(capsys, SERVE + ["--trace", str(bad)])


def test_trace_replay_at_native_rate(tmp_path):
    tr = tmp_path / "t.csv"
    tr.write_text("timestamp,prompt_tokens,output_tokens\n" + "".join(f"{i * 0.1:.1f},100,20\n" for i in range(50)))
    r = runner.invoke(app, SERVE + ["--trace", str(tr), "--duration", "5", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["offered_rate"] == pytest.approx(10.0) and d["completed"] == d["requests"] > 0


def test_shipped_scenarios_validate():
    names = sorted(p.name for p in (ROOT / "scenarios").glob("serve_*.yaml")) + \
        sorted(p.name for p in (ROOT / "scenarios").glob("capacity_*.yaml"))
    assert {"serve_qwen3_0p6b.yaml", "capacity_qwen3_0p6b.yaml", "capacity_llama3_8b.yaml"} <= set(names)
    for n in names:
        sc = load_scenario(ROOT / "scenarios" / n)
        assert sc.kind in ("serve", "capacity")


def test_serve_scenario_rate_has_a_stated_default(tmp_path):
    """Issue 22 item 5: no rate is the stated default (10 req/s), not "poisson arrivals need 'rate'"."""
    from simulator.config.serve import DEFAULT_RATE

    p = tmp_path / "s.yaml"
    p.write_text("kind: serve\nname: x\nmodel: qwen3-0.6b\n")
    sc = load_scenario(p)
    assert sc.rate is None and sc.rate_used == DEFAULT_RATE == 10.0
    p.write_text("kind: serve\nname: x\nmodel: qwen3-0.6b\nrate: 1\nengine:\n  max_num_seqs: 0\n")
    with pytest.raises(ConfigError, match=r"s.yaml:6: field 'engine.max_num_seqs'"):
        load_scenario(p)


def small_capacity(tmp_path, slo, **extra):
    data = yaml.safe_load((ROOT / "scenarios/capacity_qwen3_0p6b.yaml").read_text())
    data.update({"duration_s": 8, "graph": ["none", "full_and_piecewise"], "layouts": data["layouts"][:1],
                 "profiles": ["datasheet-h200"],  # pinned: these SLOs are set for the datasheet figures
                 "slo": slo, "curve_fractions": [0.5], **extra})
    data["search"]["tolerance"] = 0.1
    return parse_scenario(data, "test")


def test_capacity_run_writes_table_curves_and_report(tmp_path):
    sc = small_capacity(tmp_path, {"percentile": 99, "tpot_ms": 2.5, "ttft_s": 0.5})
    res = run_scenario(sc, tmp_path)
    rows = {r["config"]: r for r in res["summary"]}
    assert len(rows) == 2 and all(r["status"] == "meets" for r in rows.values())
    eager = next(r for k, r in rows.items() if " none" in k)
    graph = next(r for k, r in rows.items() if "full_and_piecewise" in k)
    assert graph["best_rate"] >= eager["best_rate"] * 0.9
    assert graph["replicas"] == math.ceil(500 / graph["best_rate"])
    for f in ("result.json", "capacity.csv", "curves.csv", "report.html"):
        assert (tmp_path / f).exists()
    html = (tmp_path / "report.html").read_text()
    assert "SLO" in html and "Best rate per configuration" in html


def test_capacity_with_impossible_slo_says_so(tmp_path, capsys):
    sc = small_capacity(tmp_path, {"percentile": 99, "tpot_ms": 0.01}, graph=["full_and_piecewise"])
    res = run_scenario(sc, tmp_path)
    assert res["summary"][0]["status"] == "NO RATE MEETS THE SLOs" and res["no_rate_meets"]
    assert res["configs"][0]["runs"] <= 12
    assert "No arrival rate meets the SLOs" in (tmp_path / "report.html").read_text()


def test_capacity_config_without_room_for_kv_is_reported_not_crashed(tmp_path):
    sc = small_capacity(tmp_path, {"percentile": 99, "tpot_ms": 5.0}, models=["llama3-70b"], graph=["none"])
    res = run_scenario(sc, tmp_path)
    assert res["summary"][0]["status"] == "NO RATE MEETS THE SLOs"
    assert "no memory left for the KV cache" in res["summary"][0]["message"]
    assert "no memory left for the KV cache" in (tmp_path / "report.html").read_text()


def test_capacity_parallel_workers_give_the_same_answer(tmp_path):
    slo = {"percentile": 99, "tpot_ms": 2.5}
    one = run_scenario(small_capacity(tmp_path, slo, workers=1), None)
    two = run_scenario(small_capacity(tmp_path, slo, workers=2), None)
    assert [r["best_rate"] for r in one["summary"]] == [r["best_rate"] for r in two["summary"]]


def test_serve_layout_with_a_zero_size_is_one_clear_line(capsys):
    assert "capture sizes must be positive" in err_of(capsys, SERVE + ["--rate", "5", "--duration", "2",
                                                                        "--layout", "0,1"])
