"""The predict, startup and graph_memory kinds: their commands' flags and their YAML fill one scenario model and
give one answer (cli/generated.py makes the flags from the fields); rules across fields are the model's."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from simulator.cli import app
from simulator.cli.flags import scenario_from_flags
from simulator.cli.generated import model_options
from simulator.config import load_scenario
from simulator.config.capture import GraphMemoryScenario, StartupScenario
from simulator.config.predict import PredictScenario
from simulator.studies.runner import run_scenario

runner = CliRunner()


def _cli_json(argv) -> dict:
    r = runner.invoke(app, argv + ["--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


@pytest.mark.parametrize("kind,cls,cmd,given", [
    ("predict", PredictScenario, "predict", {"model": "qwen3-0.6b", "batch": 8, "ctx": 300, "fusion": "fused",
                                             "graph": "full", "layout": "1,4,16"}),
    ("startup", StartupScenario, "startup", {"model": "qwen3-0.6b", "layout": "1,8", "fusion": "compiled",
                                             "compile_cache": "warm", "warmups": 3}),
    ("graph_memory", GraphMemoryScenario, "graph-memory", {"model": "llama3-8b", "layout": "sglang",
                                                           "memory_budget": "8GiB", "private": True}),
])
def test_flags_and_yaml_are_one_scenario_and_one_answer(tmp_path, kind, cls, cmd, given):
    lines = [f"kind: {kind}", "name: x"] + [f"{k}: {str(v).lower() if isinstance(v, bool) else v}"
                                            for k, v in given.items()]
    (tmp_path / "s.yaml").write_text("\n".join(lines) + "\n")
    from_yaml = load_scenario(tmp_path / "s.yaml")
    _, flags = model_options(cls)
    from_flags = scenario_from_flags(cls, {"kind": kind, "name": "x", **given}, flags, given)
    assert from_flags == from_yaml
    argv = [cmd]
    for k, v in given.items():
        flag = "--" + k.replace("_", "-")
        argv += [flag] if v is True else [flag, str(v)]
    d = _cli_json(argv)
    res = run_scenario(from_yaml, None)
    row = res["rows"][0]
    for k in ("step_ms", "total_s", "total_bytes"):
        if k in d:
            assert row[k] == pytest.approx(d[k], rel=1e-12)


def test_every_field_of_the_kinds_is_a_flag():
    for cls, aliases in ((PredictScenario, {"tensor_parallel_size": ("--tp",)}), (StartupScenario, {}),
                         (GraphMemoryScenario, {})):
        params, flags = model_options(cls, aliases)
        assert set(flags) == set(cls.model_fields) - {"kind", "name", "description"}


@pytest.mark.parametrize("argv,needle", [
    (["predict", "--model", "qwen3-0.6b", "--sampling", "top_p"], "--sampling"),
    (["predict", "--model", "qwen3-0.6b", "--kv-cache", "dynamic"], "impl hf"),
    (["predict", "--model", "qwen3-0.6b", "--fusion", "none", "--impl", "hf", "--kv-cache", "dynamic",
      "--max-cache-len", "600"],
     "static cache"),
    (["startup", "--model", "qwen3-0.6b", "--compile", "dynamic"], "compiles nothing"),
    (["startup", "--model", "qwen3-0.6b", "--attention-backend", "fa3"], "--attention-backend"),
    (["graph-memory", "--model", "qwen3-0.6b", "--memory-budget", "lots"], "--memory-budget"),
    (["graph-memory", "--model", "qwen3-0.6b", "--gpu-memory-utilization", "2"], "--gpu-memory-utilization"),
])
def test_cross_field_rules_refused_in_one_line(capsys, argv, needle):
    from simulator.cli import main

    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err, err


def test_impl_changes_the_step_and_says_so():
    ref = _cli_json(["predict", "--model", "qwen3-0.6b", "--batch", "8", "--ctx", "512", "--graph", "full",
                     "--fusion", "none"])
    hf = _cli_json(["predict", "--model", "qwen3-0.6b", "--batch", "8", "--ctx", "512", "--graph", "full",
                    "--fusion", "none", "--impl", "hf"])
    assert (ref["impl"], hf["impl"]) == ("reference", "hf")
    assert hf["kernels"] > ref["kernels"] and hf["step_ms"] > ref["step_ms"]
    assert hf["kv_cache"] == "static" and hf["max_cache_len"] == 513
    gm_ref = _cli_json(["graph-memory", "--model", "qwen3-0.6b", "--fusion", "none"])
    gm_hf = _cli_json(["graph-memory", "--model", "qwen3-0.6b", "--fusion", "none", "--impl", "hf"])
    assert gm_hf["capture_s"] > gm_ref["capture_s"]  # more nodes captured, longer warm-ups


def test_host_canary_scales_the_host_lane_and_the_band_brackets_it():
    """--host-canary-us: an eager (CPU-bound) step moves with the host, a full-graph step barely; the eager band is
    the step at the calibration machine's fast and slow canaries."""
    fast = _cli_json(["predict", "--model", "qwen3-0.6b", "--fusion", "none", "--graph", "none"])
    lo, hi = fast["step_ms_host_band"]
    assert fast["host_canary_us"] == pytest.approx(6.49) and lo == pytest.approx(fast["step_ms"], rel=1e-12)
    slow = _cli_json(["predict", "--model", "qwen3-0.6b", "--fusion", "none", "--graph", "none",
                      "--host-canary-us", "9.808"])
    assert slow["host_canary_us"] == pytest.approx(9.808)
    assert slow["step_ms"] == pytest.approx(hi, rel=1e-9)  # the slow end of the band is the slow host
    assert slow["step_ms"] / fast["step_ms"] == pytest.approx(9.808 / 6.49, rel=0.02)  # CPU-bound: ~ the ratio
    g_fast = _cli_json(["predict", "--model", "qwen3-0.6b", "--graph", "full"])
    g_slow = _cli_json(["predict", "--model", "qwen3-0.6b", "--graph", "full", "--host-canary-us", "9.808"])
    assert "step_ms_host_band" not in g_fast
    assert g_slow["step_ms"] / g_fast["step_ms"] - 1 < 0.01  # one replay: host cost is a few µs


def test_a_speculative_prediction_carries_no_band_of_another_step():
    """step_ms of a speculative prediction is verify + draft; a host band re-priced at the plain decode shape would
    describe a different step, so none is given (the host fields still say which host is assumed)."""
    d = _cli_json(["predict", "--model", "llama3-8b", "--layout", "vllm", "--spec-tokens", "3", "--acceptance", "0.7",
                   "--graph", "none"])
    assert d["spec_tokens"] == 3 and "host_canary_us" in d and "step_ms_host_band" not in d
