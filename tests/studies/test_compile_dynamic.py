"""The `compile_dynamic` step knob (config/stepopts.StepOptions; issue 20 item 3, issue 24's "a new step knob reaches
every study"): torch.compile dynamic=True or False for fusion `compiled`, carried whole in engine/setup.StepSetup,
honoured by every study (predict, serve, optimize, sweep, startup, graph-memory), refused in one line where it
cannot change anything. Default (None) = vLLM's: torch.compile(..., dynamic=False) with the token dimension marked
dynamic (vllm/compilation/wrapper.py, decorators.py), which leaves Inductor's kernels here as dynamic=False."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs
from typer.testing import CliRunner

from simulator.cli import app
from simulator.cli.flags import scenario_from_flags
from simulator.cli.generated import model_options
from simulator.config import load_scenario
from simulator.config.predict import PredictScenario
from simulator.engine.setup import DYNAMIC_WRAPPER, StepSetup
from simulator.model.costs import CostModel
from simulator.model.inductor import DYNAMIC_WRAPPER_EXTRA_US
from simulator.model.kernels import LaunchPath
from simulator.model.models import load_model
from simulator.model.profile import load_profile
from simulator.model.workload import decode
from simulator.studies.runner import run_scenario
from tests.conftest import cli_error

runner = CliRunner()
QWEN = load_model("qwen3-0.6b")


def _cli(argv) -> dict:
    r = runner.invoke(app, argv + ["--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def _predict(*extra) -> dict:
    # ctx 511: the measured rows' step (the reference decoder at ctx 512 attends 512 keys); one key more and cuDNN's
    # split-KV reduce adds a kernel a layer at this batch (workload.py attention)
    return _cli(["predict", "--model", "qwen3-0.6b", "--batch", "1", "--ctx", "511", "--fusion", "compiled",
                 "--graph", "none", *extra])


def test_wrapper_extra_is_the_stated_formula():
    # round b, qwen3-0.6b batch 16 compiled eager: 7.736474 ms host for 453 kernels dynamic, 6.718204 ms for 425
    # static; beyond 28 more launches at the static per-launch cost: (7.736474 - 453 * 6.718204 / 425) / 453 ms
    assert DYNAMIC_WRAPPER_EXTRA_US == pytest.approx(1.27077, abs=1e-5)
    costs = CostModel(load_profile("h200"))
    op = next(o for o in StepSetup.of(QWEN, "h200", "compiled").build(decode(1, 512)).ops
              if o.path is LaunchPath.COMPILED)
    marked = StepSetup.of(QWEN, "h200", "compiled", compile_dynamic=True)
    mop = next(o for o in marked.build(decode(1, 512)).ops if o.path is LaunchPath.COMPILED)
    assert mop.dim(DYNAMIC_WRAPPER) == 1 and op.dim(DYNAMIC_WRAPPER) == 0
    bare = replace(mop, shape=tuple(kv for kv in mop.shape if kv[0] != DYNAMIC_WRAPPER))
    assert costs.host_s(mop) - costs.host_s(bare) == pytest.approx(DYNAMIC_WRAPPER_EXTRA_US * 1e-6, rel=1e-9)


def test_predict_kernels_452_vs_424_and_the_default_is_static():
    """qwen3-0.6b compiled at batch 1: dynamic=True leaves k-norm and RoPE-k + cache write apart (+1 kernel in each
    of 28 layers): 452 GPU kernels vs 424 (measured 453 / 425, calibration/validation/inductor.md)."""
    default, off, on = _predict(), _predict("--no-compile-dynamic"), _predict("--compile-dynamic")
    assert (default["kernels"], off["kernels"], on["kernels"]) == (424, 424, 452)
    assert default["step_ms"] == off["step_ms"] < on["step_ms"]
    assert (default["compile_dynamic"], on["compile_dynamic"]) == (False, True)
    # host lane: 28 more launches at the static per-launch cost is not all of it, every launch pays the wrapper
    assert on["cpu_ms"] - off["cpu_ms"] > on["launches"] * DYNAMIC_WRAPPER_EXTRA_US * 1e-3


def test_hf_compiled_same_kernels_each_launch_pays_the_wrapper_exactly():
    """transformers' op list: its StaticCache keeps the symbolic sizes out of the kernels, so dynamic=True launches
    the same kernels (inductor.py dynamic_inputs); the host lane is longer by exactly launches x the extra."""
    off = _predict("--impl", "hf", "--no-compile-dynamic")
    on = _predict("--impl", "hf", "--compile-dynamic")
    assert on["kernels"] == off["kernels"] and on["launches"] == off["launches"]
    st = StepSetup.of(QWEN, "h200", "compiled", impl="hf").build(decode(1, 1024))
    n = sum(1 for o in st.ops if o.path in (LaunchPath.COMPILED, LaunchPath.COMPILED_EXTERN) and o.launches_kernel)
    assert on["cpu_ms"] - off["cpu_ms"] == pytest.approx(n * DYNAMIC_WRAPPER_EXTRA_US * 1e-3, rel=1e-9)


@settings(max_examples=15, deadline=None)
@given(batch=hs.integers(1, 256), ctx=hs.integers(1, 4000))
def test_reference_dynamic_adds_one_kernel_per_layer(batch, ctx):
    s = StepSetup.of(QWEN, "h200", "compiled")
    d = StepSetup.of(QWEN, "h200", "compiled", compile_dynamic=True)
    assert d.build(decode(batch, ctx)).kernels - s.build(decode(batch, ctx)).kernels == QWEN.num_hidden_layers


def test_setup_hash_and_memo_keys():
    s, f, t = (StepSetup.of(QWEN, "h200", "compiled", compile_dynamic=v) for v in (None, False, True))
    assert hash(t) != hash(s) and t != s and t != f
    assert t.build_key != s.build_key and t.cost_key != s.cost_key
    assert f.build_key == s.build_key and f.cost_key == s.cost_key  # None and False build the same step
    # derived setups at other levels (start-up counts fusion none nodes) do not carry a dynamic compile
    assert t.with_fusion("none").build_key == s.with_fusion("none").build_key


def test_yaml_twin_of_the_flag(tmp_path):
    given = {"model": "qwen3-0.6b", "batch": 4, "fusion": "compiled", "graph": "none", "compile_dynamic": True}
    (tmp_path / "s.yaml").write_text("kind: predict\nname: x\n" + "".join(
        f"{k}: {str(v).lower() if isinstance(v, bool) else v}\n" for k, v in given.items()))
    from_yaml = load_scenario(tmp_path / "s.yaml")
    _, flags = model_options(PredictScenario)
    assert scenario_from_flags(PredictScenario, {"kind": "predict", "name": "x", **given}, flags, given) == from_yaml
    d = _cli(["predict", "--model", "qwen3-0.6b", "--batch", "4", "--fusion", "compiled", "--graph", "none",
              "--compile-dynamic"])
    assert run_scenario(from_yaml, None)["rows"][0]["step_ms"] == pytest.approx(d["step_ms"], rel=1e-12)


@pytest.mark.parametrize("argv,needle", [
    (["predict", "--model", "qwen3-0.6b", "--fusion", "fused", "--compile-dynamic"], "compiles nothing"),
    (["predict", "--model", "qwen3-0.6b", "--fusion", "none", "--no-compile-dynamic"], "compiles nothing"),
    (["graph-memory", "--model", "qwen3-0.6b", "--fusion", "fused", "--compile-dynamic"], "compiles nothing"),
    (["serve", "--model", "qwen3-0.6b", "--compile-dynamic"], "compiles nothing"),
    (["startup", "--model", "qwen3-0.6b", "--fusion", "compiled", "--compile", "static", "--compile-dynamic"],
     "disagree"),
])
def test_refused_in_one_line(capsys, argv, needle):
    assert needle in cli_error(capsys, argv)


def test_yaml_refusal_names_the_field(tmp_path):
    from simulator.config import ConfigError

    f = tmp_path / "s.yaml"
    f.write_text("kind: predict\nname: x\nmodel: qwen3-0.6b\nfusion: fused\ncompile_dynamic: true\n")
    with pytest.raises(ConfigError, match="compile_dynamic applies to fusion compiled"):
        load_scenario(f)


def test_startup_compile_mode_follows_the_knob():
    base = ["startup", "--model", "qwen3-0.6b", "--fusion", "compiled", "--layout", "1,8"]
    st, dyn, mode = _cli(base), _cli(base + ["--compile-dynamic"]), _cli(base + ["--compile", "dynamic"])
    assert (st["compile"], dyn["compile"]) == ("static", "dynamic")
    assert dyn["compile_s"] > st["compile_s"]  # the dynamic=True compile-time line
    assert dyn["warmup_s"] > st["warmup_s"] and dyn["capture_s"] > st["capture_s"]  # 28 more kernels a step
    assert mode == dyn  # --compile dynamic is the same knob


def test_graph_memory_capture_follows_the_knob():
    base = ["graph-memory", "--model", "qwen3-0.6b", "--fusion", "compiled", "--layout", "1,8"]
    st, dyn = _cli(base), _cli(base + ["--compile-dynamic"])
    assert dyn["capture_s"] > st["capture_s"]


def test_serve_follows_the_knob():
    base = ["serve", "--model", "qwen3-0.6b", "--fusion", "compiled", "--graph", "none", "--duration", "3",
            "--rate", "5"]
    st, off, on = _cli(base), _cli(base + ["--no-compile-dynamic"]), _cli(base + ["--compile-dynamic"])
    figures = [k for k in st if k.startswith(("tpot_", "ttft_", "latency_", "throughput_"))]
    assert "tpot_p50_ms" in figures
    assert {k: st[k] for k in figures} == {k: off[k] for k in figures}  # None is vLLM's: dynamic=False
    assert off["step_evals"] == 0  # ... and shares its memoised step costs
    assert on["tpot_p50_ms"] > st["tpot_p50_ms"]


def test_optimize_follows_the_knob(tmp_path):
    f = tmp_path / "d.csv"
    f.write_text("batch,count\n1,5\n3,3\n8,2\n")
    base = ["optimize", "--distribution", str(f), "--model", "qwen3-0.6b", "--fusion", "compiled", "--graph",
            "piecewise", "--max-graphs", "2"]
    st, on = _cli(base), _cli(base + ["--compile-dynamic"])
    assert on["best_step_ms"] > st["best_step_ms"]  # 28 more kernels in every graph piece


def test_sweep_point_follows_the_knob():
    from simulator.sweep.grid import evaluate_point, point_for

    p = point_for(QWEN, "h200", fusion="compiled", graph="piecewise", layout="l", sizes=(1, 4), distribution="d",
                  dist_sizes=(1, 3), dist_weights=(0.5, 0.5), budget_bytes=1 << 30, ctx=512)
    q = replace(p, compile_dynamic=True)
    assert q.key() != p.key() and replace(p, compile_dynamic=None).key() == p.key()
    assert evaluate_point(q)["expected_step_ms"] > evaluate_point(p)["expected_step_ms"]
    # the eager baseline (fusion none) is the same step either way
    assert evaluate_point(q)["eager_step_ms"] == evaluate_point(p)["eager_step_ms"]


def test_step_grid_follows_the_knob(tmp_path):
    """The step kind: its compiled rows and its kernels_per_layer (14 static, 15 dynamic for qwen3-0.6b: README's
    kernels-per-layer table); the fusion none rows are the same step either way."""
    def run(extra: str) -> dict:
        f = tmp_path / "s.yaml"
        f.write_text("kind: step\nname: x\nmodel: qwen3-0.6b\nfusion: [none, compiled]\ngraph: [none]\nbatch: [1]\n"
                     "ctx: 511\n" + extra)  # 512 keys, as _predict
        return run_scenario(load_scenario(f), None)

    st, on = run(""), run("compile_dynamic: true\n")
    assert (st["kernels_per_layer"]["compiled"], on["kernels_per_layer"]["compiled"]) == (14, 15)
    rows = {(r["fusion"], k): r for k, d in (("st", st), ("on", on)) for r in d["rows"]}
    assert rows[("none", "st")]["step_ms"] == rows[("none", "on")]["step_ms"]
    assert (rows[("compiled", "st")]["kernels"], rows[("compiled", "on")]["kernels"]) == (424, 452)
